"""Regression tests for issue 13 items 1, 2 and 5: every input bounded, no traceback, safe writes.

Each case runs the real CLI on a bad input and asserts the exit code, a one-line error and no
traceback. Cases about unbounded reads run in a subprocess under a wall-clock timeout and an
address-space limit (RLIMIT_AS), so a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from oomguard.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
S1 = ROOT / "tests" / "scenarios" / "s1"
CATALOG_CONFIG = ROOT / "src" / "oomguard" / "data" / "models" / "Qwen__Qwen3-8B" / "config.json"
MEMORY_LIMIT = 1536 << 20  # address space, not RSS: the interpreter and its libraries map ~400 MiB
TIME_LIMIT = 30  # CPU seconds of the child: the bound a former hang would break, whatever the machine's load
# Wall-clock only stops a real hang: on a shared 2-core machine at load 12 a 7 CPU-second run takes minutes.
WALL_LIMIT = 8 * TIME_LIMIT

LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _limit_cpu() -> None:
    _limit()
    resource.setrlimit(resource.RLIMIT_CPU, (TIME_LIMIT * 2, TIME_LIMIT * 2))


def cli(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> tuple[int, str, str, float]:
    """The real CLI in a child process, bounded in memory and CPU time.

    The last value is the CPU seconds (user + system) the child used: load-independent, unlike wall time,
    so the "no hang" assertions hold on a loaded machine and still catch a run that spins."""
    env = {k: v for k, v in os.environ.items() if k != "OOMGUARD_DEBUG"}
    env["HF_HUB_OFFLINE"] = "1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "oomguard.cli.main", *map(str, args)],
        input=stdin, capture_output=True, timeout=WALL_LIMIT, preexec_fn=_limit_cpu, env=env, cwd=cwd,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"), cpu


def assert_one_line_error(code: int, err: str, expected_code: int = 2, needle: str = "") -> None:
    assert "Traceback" not in err, err
    assert code == expected_code, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert ": error: " in lines[0]
    assert needle in lines[0], (needle, lines[0])


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- item 1: the reading layer


@pytest.fixture
def zero_links(tmp_path):
    """A model dir whose config.json is a symlink to /dev/zero, and a log symlinked to /dev/urandom."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").symlink_to("/dev/zero")
    (tmp_path / "vllm.log").symlink_to("/dev/urandom")
    (tmp_path / "start_api.sh").symlink_to("/dev/zero")
    return tmp_path


DEVICE_CASES = [
    (("plan", "--model", "/dev/zero", "--gpu", "A100-80GB"), 2),
    (("plan", "--model", "{d}/model", "--gpu", "A100-80GB"), 2),
    (("plan", "{d}/start_api.sh", "--gpu", "A100-80GB"), 2),
    (("check", "/dev/urandom", "--gpu", "A100-80GB"), 2),
    (("check", str(S1 / "start_api.sh"), "--model", str(S1 / "model"), "--gpu", "A100-80GB", "--nvidia-smi", "/dev/zero"), 2),
    (("check", str(S1 / "start_api.sh"), "--model", str(S1 / "model"), "--gpu", "A100-80GB", "--topo", "/dev/urandom"), 2),
    (("diagnose", "/dev/zero"), 2),
    (("diagnose", "{d}/vllm.log"), 2),
    (("diagnose", str(ROOT / "tests" / "fixtures" / "logs" / "v1-clean-start.log"), "--launch", "/dev/zero"), 2),
    (("bundle", "/dev/urandom"), 2),
    (("fit", "--from", "{d}/start_api.sh", "--gpu", "A100-80GB"), 2),
    (("host", "--topo", "/dev/zero"), 2),
    (("host", "--nvidia-smi", "/dev/urandom"), 2),
    (("export", "launch", "/dev/zero", "--to", "docker"), 2),
]


@pytest.mark.parametrize("args,code", DEVICE_CASES, ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v))
def test_devices_and_symlinks_to_them_are_refused(zero_links, args, code):
    args = tuple(a.format(d=zero_links) for a in args)
    rc, _out, err, took = cli(*args)
    assert_one_line_error(rc, err, code, "expected a regular file")
    assert took < TIME_LIMIT


def test_fifo_with_no_writer_never_blocks(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    for args, code in ((("diagnose", fifo), 2), (("plan", "--model", fifo, "--gpu", "A100-80GB"), 2), (("check", fifo), 2)):
        rc, _out, err, _took = cli(*args)
        assert_one_line_error(rc, err, code, "FIFO")


def test_process_substitution_pipe_is_read(tmp_path):
    """A pipe the user names (bash's <(cmd) is /dev/fd/N) is a stream, read like stdin."""
    r, w = os.pipe()
    os.write(w, b"ERROR 11-14 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    os.close(w)
    try:
        proc = subprocess.run([sys.executable, "-m", "oomguard.cli.main", "diagnose", f"/dev/fd/{r}"],
                              pass_fds=(r,), capture_output=True, timeout=WALL_LIMIT, preexec_fn=_limit)
    finally:
        os.close(r)
    assert proc.returncode == 1, proc.stderr
    assert b"Traceback" not in proc.stderr


def test_gzip_log_with_trailing_bytes_is_not_a_clean_start(tmp_path):
    log = tmp_path / "vllm.log.gz"
    text = (ROOT / "tests" / "fixtures" / "logs" / "v1-clean-start.log").read_bytes()
    log.write_bytes(gzip.compress(text) + b"\x01trailing bytes")
    rc, out, err, _ = cli("diagnose", log)
    assert_one_line_error(rc, err, 2, "not gzip")
    assert "clean" not in out.lower()
    good = tmp_path / "ok.log.gz"
    good.write_bytes(gzip.compress(text))
    rc, out, err, _ = cli("diagnose", good)
    assert rc == 0 and "Traceback" not in err


def test_gzip_bomb_is_capped_in_memory(tmp_path):
    # 64 MiB of log-like text in ~100 KiB; the reader streams it in bounded memory.
    bomb = tmp_path / "bomb.log.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        line = b"(APIServer pid=1) INFO 11-14 14:24:02 [loggers.py:127] Engine 000: Running: 0 reqs\n"
        fh.write(line * ((64 << 20) // len(line)))
    rc, _out, err, took = cli("diagnose", bomb)
    assert "Traceback" not in err and rc in (0, 1, 2, 3)  # 3: the log never reaches its ready line
    assert took < TIME_LIMIT


def test_long_and_invalid_paths_are_one_line(capsys, tmp_path):
    long_name = str(tmp_path / ("x" * 5000))
    for args, needle in (
        (("plan", "--model", long_name, "--gpu", "A100-80GB"), ""),
        (("diagnose", long_name), "file name too long"),
        (("plan", "--model", "org/" + "m" * 5000, "--gpu", "A100-80GB"), "model 'org/mmm"),
    ):
        code, _out, err = run_main(capsys, *args)
        assert_one_line_error(code, err, 2, needle)
        assert len(err) < 1300  # a 5000-character path is shortened in the message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable directories")
def test_unreadable_hf_cache_dir(capsys, tmp_path, monkeypatch):
    snaps = tmp_path / "hub" / "models--org--m" / "snapshots"
    snaps.mkdir(parents=True)
    snaps.chmod(0)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    try:
        code, _out, err = run_main(capsys, "plan", "--model", "org/m", "--gpu", "A100-80GB")
    finally:
        snaps.chmod(0o755)
    assert_one_line_error(code, err, 2, "permission denied")


# --------------------------------------------------------------------------- item 2: bounded parsers


def test_shell_variable_doubling_fails_fast(tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text("#!/bin/bash\nA=xx\n" + "A=$A$A\n" * 40 + "vllm serve $A --max-model-len 4096\n")
    assert script.stat().st_size < 1024
    for cmd, code in (("plan", 2), ("check", 2)):
        rc, _out, err, took = cli(cmd, script, "--gpu", "A100-80GB")
        assert_one_line_error(rc, err, code, "shell expansion")
        assert took < 10


@pytest.mark.parametrize("command,code", [("plan", 2), ("check", 2), ("fit", 2), ("export", 2)])
def test_billion_laughs_yaml(tmp_path, command, code):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("model: Qwen/Qwen3-8B\n" + LAUGHS)
    args = {"plan": ("plan", cfg, "--gpu", "A100-80GB"), "check": ("check", cfg, "--gpu", "A100-80GB"),
            "fit": ("fit", "--from", cfg, "--gpu", "A100-80GB"), "export": ("export", "launch", cfg, "--to", "docker")}[command]
    rc, _out, err, took = cli(*args)
    assert_one_line_error(rc, err, code, "aliases")
    assert took < 10


def test_large_yaml_is_refused_quickly(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("model: Qwen/Qwen3-8B\n" + "".join(f"# {'x' * 60}\n" for _ in range(40000)) + "max_model_len: 4096\n")
    assert cfg.stat().st_size > 2 << 20
    rc, _out, err, took = cli("check", cfg, "--gpu", "A100-80GB")
    assert_one_line_error(rc, err, 2, "too large for a launch file (2.4 MiB)")
    assert took < 10


def test_deep_json_config_is_one_line(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama", "x": ' + "[" * 100000 + "]" * 100000 + "}")
    rc, _out, err, _ = cli("plan", "--model", model, "--gpu", "A100-80GB")
    assert_one_line_error(rc, err, 2, "nested too deeply")


def test_diagnose_launch_long_line_is_linear(tmp_path):
    launch = tmp_path / "start_api.sh"
    launch.write_text("vllm serve m " + "a" * (512 << 10) + "\n")
    log = ROOT / "tests" / "fixtures" / "logs" / "v1-clean-start.log"
    rc, _out, err, took = cli("diagnose", log, "--launch", launch)
    assert "Traceback" not in err and rc in (0, 1)
    assert took < 10  # 25 s with shlex.split


OPTION_CASES = [
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--cpu-offload-gb", "nan"), 2, "not a finite number"),
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--gpu-memory-gib", "inf"), 2, "--gpu-memory-gib"),
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--gpu-memory-gib", "1e30"), 2, "at most"),
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--gpu-memory-gib", "-80"), 2, "greater than 0"),
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--num-gpus", "0"), 2, "at least 1"),
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--vllm-version", "99.0"), 2, "not a release"),
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--other-gpu-use-gib", "nan"), 2, "finite"),
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-num-seqs", "9" * 30), 2, "out of range"),
    (("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--gpu-memory-utilization", "inf"), 2, "finite"),
    (("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--margin-gib", "nan"), 2, "--margin-gib"),
    (("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--host-ram-gib", "-1"), 2, "--host-ram-gib"),
    (("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--top", "0"), 2, "--top"),
    (("check", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--num-gpus", "0"), 2, "--num-gpus"),
    (("check", "--gpu", "A100-80GB", "--vllm-version", "7.1"), 2, "--vllm-version"),
    (("diagnose", "--num-gpus", "-2", "x.log"), 2, "--num-gpus"),
    (("export", "launch", str(S1 / "start_api.sh"), "--to", "kubernetes", "--shm-size", "garbage"), 2, "--shm-size"),
    (("export", "launch", str(S1 / "start_api.sh"), "--to", "docker", "--vllm-version", "99.0"), 2, "--vllm-version"),
    (("bundle", "--max-bytes", "-5", "x.log"), 2, "--max-bytes"),
    (("check", str(S1 / "start_api.sh"), "--gpu", "A100-80GB", "--host-ram-gib", "nan"), 2, "--host-ram-gib"),
]


@pytest.mark.parametrize("args,code,needle", OPTION_CASES, ids=lambda v: " ".join(v[-2:]) if isinstance(v, tuple) else str(v))
def test_option_values_are_validated(capsys, args, code, needle):
    rc, _out, err = run_main(capsys, *args)
    assert_one_line_error(rc, err, code, needle)


def test_versions_just_past_the_newest_table_are_modelled(capsys):
    from oomguard.versions.releases import supported

    newest = supported()[-1].split(".")
    nxt = f"{newest[0]}.{int(newest[1]) + 1}.0"
    rc, _out, err = run_main(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--vllm-version", nxt)
    assert rc in (0, 1) and "Traceback" not in err


@pytest.mark.parametrize("line,needle", [
    ("max_model_len: [1, 2]", "found a list"),
    ("max_model_len: {a: 1}", "found a mapping"),
    ("max_model_len: 2024-01-01", "found a date"),
    ("max_num_seqs: true", "found true/false"),
    ("gpu_memory_utilization: .nan", "not a finite number"),
    ("max_model_len: 4096.5", "not an integer"),
    ("max_num_seqs: -4", "must not be negative"),
    ("quantization: [fp8]", "expected a string, found a list"),
    ("enforce_eager: {a: 1}", "expected true/false, found a mapping"),
    ("dtype: 2024-01-01", "expected a string, found a date"),
])
def test_yaml_values_of_the_wrong_type(capsys, tmp_path, line, needle):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"model: Qwen/Qwen3-8B\n{line}\n")
    rc, _out, err = run_main(capsys, "plan", cfg, "--gpu", "A100-80GB")
    assert_one_line_error(rc, err, 2, needle)
    assert f"{cfg}:2:" in err
    # check reads the same value leniently: a finding or a one-line error, never an internal error
    rc, out, err = run_main(capsys, "check", cfg, "--gpu", "A100-80GB", "--format", "json")
    assert rc in (1, 2, 3) and "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("field,value,needle", [
    ("hidden_size", "NaN", "not a finite number"),
    ("max_position_embeddings", "Infinity", "not a finite number"),
    ("rope_scaling", '{"rope_type": "linear", "factor": NaN}', "not a finite number"),
    ("hidden_size", "0", "must be positive"),
    ("num_hidden_layers", "-3", "must be positive"),
    ("vocab_size", "1e30", "implausibly large"),
    ("num_attention_heads", '"32"', "not an integer"),
    ("intermediate_size", "-1", "at least 0"),
    ("architectures", '{"a": 1}', "list of class names"),
    ("rope_scaling", '{"rope_type": "yarn", "factor": -4}', "rope_scaling.factor"),
    ("rope_scaling", '"yarn"', "expected an object"),
])
def test_config_json_fields(capsys, tmp_path, field, value, needle):
    cfg = json.loads(CATALOG_CONFIG.read_text())
    cfg.pop(field, None)
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(cfg)[:-1] + f', "{field}": {value}}}')
    rc, _out, err = run_main(capsys, "plan", "--model", model, "--gpu", "A100-80GB")
    assert_one_line_error(rc, err, 2, needle)
    assert f"config field {field}" in err


@pytest.mark.parametrize("field,value", [
    ("time_step_limit", "[0.0, Infinity]"),  # real Mamba configs: vLLM reads it, no memory depends on it
    ("rope_theta", "Infinity"),
    ("initializer_range", "NaN"),
    ("router_aux_loss_coef", "1e400"),
])
def test_config_json_infinity_in_a_field_the_plan_never_reads_is_accepted(capsys, tmp_path, field, value):
    cfg = json.loads(CATALOG_CONFIG.read_text())
    cfg.pop(field, None)
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(cfg)[:-1] + f', "{field}": {value}}}')
    rc, out, err = run_main(capsys, "plan", "--model", model, "--gpu", "A100-80GB", "--max-model-len", "4096")
    assert rc == 0, err
    assert "STARTS" in out


def test_config_field_one_family_needs_is_one_line(capsys, tmp_path):
    """A null where only the MLA adapter reads a size: translated at the boundary, naming the file."""
    cfg = json.loads((CATALOG_CONFIG.parents[1] / "deepseek-ai__DeepSeek-V3" / "config.json").read_text())
    cfg["moe_intermediate_size"] = None
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(cfg))
    rc, _out, err = run_main(capsys, "plan", "--model", model, "--gpu", "H100", "--num-gpus", "8")
    assert_one_line_error(rc, err, 2, "config field moe_intermediate_size: the wrong type or value")
    assert str(model / "config.json") in err


def _safetensors(path: Path, header: bytes, length: int | None = None) -> None:
    path.write_bytes(struct.pack("<Q", len(header) if length is None else length) + header)


@pytest.mark.parametrize("header,length,needle", [
    (b"", 0, "header length 0"),
    (b"{}", 1 << 40, "header length"),
    (b'{"a": {"dtype": "F16", "shape": [1, 2]}', None, "safetensors header"),
    (b"\xff\xfe not json", None, "not UTF-8"),
    (b'{"a": {"dtype": "F16", "shape": ["x", 2], "data_offsets": [0, 4]}}', None, "invalid shape"),
    (b'{"a": {"dtype": "F16", "shape": [-1], "data_offsets": [0, 4]}}', None, "invalid shape"),
    (b'{"a": {"dtype": "F16", "shape": [1e300], "data_offsets": [0, 4]}}', None, "invalid shape"),
    (b'{"a": {"dtype": "F16", "shape": [4096, 4096]}}', 1 << 20, "truncated"),
    (b"[" * 5000 + b"]" * 5000, None, "nested too deeply"),
])
def test_corrupt_safetensors_headers(capsys, tmp_path, header, length, needle):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(CATALOG_CONFIG.read_text())
    _safetensors(model / "model.safetensors", header, length)
    rc, _out, err = run_main(capsys, "plan", "--model", model, "--gpu", "A100-80GB")
    assert_one_line_error(rc, err, 2, needle)


def test_backtick_substitution_is_never_rewritten_by_fix(tmp_path):
    script = tmp_path / "start_api.sh"
    inner = "`hostname --max-model-len 409600`"
    script.write_text(f'#!/bin/bash\nvllm serve Qwen/Qwen3-8B --served-model-name "{inner}" --max-model-len 409600\n')
    rc, _out, err, _ = cli("check", script, "--gpu", "A100-80GB", "--fix")
    assert "Traceback" not in err and rc in (0, 1, 2)
    fixed = (tmp_path / "start_api.fixed.sh").read_text()
    assert inner in fixed
    assert fixed != script.read_text()  # the real --max-model-len was fixed


def test_ansi_c_quoted_value_is_understood(capsys, tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve Qwen/Qwen3-8B --max-model-len $'\\x38192'\n")
    rc, out, err = run_main(capsys, "plan", script, "--gpu", "A100-80GB")
    assert rc == 0 and "8,192 tokens per request" in out, err


# --------------------------------------------------------------------------- item 5: writes


def test_fix_replaces_a_planted_symlink_instead_of_following_it(tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text("#!/bin/bash\nvllm serve Qwen/Qwen3-8B --max-model-len 409600\n")
    script.chmod(0o755)
    victim = tmp_path / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA victim\n")
    victim.chmod(0o600)
    (tmp_path / "start_api.fixed.sh").symlink_to(victim)
    rc, _out, err, _ = cli("check", script, "--gpu", "A100-80GB", "--fix")
    assert "Traceback" not in err and rc in (0, 1, 2)
    assert victim.read_text() == "ssh-ed25519 AAAA victim\n"
    assert victim.stat().st_mode & 0o777 == 0o600
    fixed = tmp_path / "start_api.fixed.sh"
    assert not fixed.is_symlink() and "vllm serve" in fixed.read_text()
    assert fixed.stat().st_mode & 0o111  # a new file: the script's executable bits


@pytest.mark.parametrize("args", [
    ("bundle", str(ROOT / "tests" / "fixtures" / "logs" / "v1-clean-start.log"), "-o", "{out}"),
    ("export", "alerts", "-o", "{out}"),
    ("export", "launch", str(S1 / "start_api.sh"), "--to", "docker", "-o", "{out}"),
])
def test_output_files_do_not_follow_symlinks(capsys, tmp_path, args):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    out = tmp_path / "out.txt"
    out.symlink_to(victim)
    rc, _o, err = run_main(capsys, *(a.format(out=out) for a in args))
    assert rc in (0, 1) and "Traceback" not in err, err
    assert victim.read_text() == "keep me\n"
    assert not out.is_symlink() and out.stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_output_into_a_directory_is_one_line(capsys, tmp_path):
    rc, _o, err = run_main(capsys, "export", "alerts", "-o", tmp_path)
    assert_one_line_error(rc, err, 2, "a directory")


# --------------------------------------------------------------------------- the last line of defence


def test_internal_errors_are_one_line(capsys, monkeypatch):
    import oomguard.cli.plan as plan_cli

    def boom(args):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(plan_cli, "run", boom)
    monkeypatch.delenv("OOMGUARD_DEBUG", raising=False)
    code = main(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB"])
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err and "internal error: ZeroDivisionError" in err
    assert len(err.strip().splitlines()) == 1


def test_many_unknown_flags_stay_linear(tmp_path):
    """20,000 unknown flags: difflib suggestions are capped and check --fix's edits are indexed (was 121 s)."""
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve Qwen/Qwen3-8B \\\n" + "".join(f"  --k{i} x \\\n" for i in range(20000)) + "  --max-num-seqs 8\n")
    rc, _out, err, took = cli("check", script, "--gpu", "A100-80GB")
    assert "Traceback" not in err and rc in (1, 2, 3)
    assert took < TIME_LIMIT


def test_yaml_with_thousands_of_keys_is_refused(capsys, tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("model: Qwen/Qwen3-8B\n" + "".join(f"k{i}: x\n" for i in range(3000)))
    rc, _out, err = run_main(capsys, "plan", cfg, "--gpu", "A100-80GB")
    assert_one_line_error(rc, err, 2, "3,001 keys")
