"""``oomguard check`` through the real CLI (in-process): exit codes, bad input, --explain, --ignore."""

from __future__ import annotations

import json

import pytest

from tests.unit.check.conftest import FIXTURES


def run(capsys, *args):
    from oomguard.cli.main import main

    rc = main(["check", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_exit_0_clean(capsys):
    rc, out, _ = run(capsys, str(FIXTURES / "clean_h100.sh"), "--gpu", "H100")
    assert rc == 0 and "no findings" in out


def test_exit_1_only_with_strict(capsys):
    args = ["--gpu", "A100-80GB", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.99"]
    rc, _, _ = run(capsys, *args)
    assert rc == 0
    rc, _, _ = run(capsys, "--strict", *args)
    assert rc == 1


def test_exit_1_errors(capsys):
    rc, out, _ = run(capsys, str(FIXTURES / "long_context.sh"), "--gpu", "A100-80GB", "--format", "json")
    assert rc == 1
    assert json.loads(out)["summary"]["errors"] == 2


@pytest.mark.parametrize(
    "target,needle",
    [
        ("missing.sh", "no such file"),
        ("list.yaml", "must be a mapping"),
        ("no_vllm.sh", "no vLLM command found"),
    ],
)
def test_exit_3_bad_input(capsys, target, needle):
    rc, out, err = run(capsys, str(FIXTURES / target), "--gpu", "A100-80GB")
    assert rc == 2 and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_exit_3_binary_and_unreadable(capsys, tmp_path):
    b = tmp_path / "blob.sh"
    b.write_bytes(b"\x7fELF\x00\x00\x01")
    rc, _, err = run(capsys, str(b), "--gpu", "A100-80GB")
    assert rc == 2 and "binary file" in err
    d = tmp_path / "dir.sh"
    d.mkdir()
    rc, _, err = run(capsys, str(d), "--gpu", "A100-80GB")
    assert rc == 2 and "directory" in err


def test_exit_3_bad_options(capsys):
    rc, _, err = run(capsys, str(FIXTURES / "clean_h100.sh"), "--gpu", "H999")
    assert rc == 2 and "unknown GPU" in err
    rc, _, err = run(capsys, str(FIXTURES / "clean_h100.sh"), "--gpu", "H100", "--host-ram-gib", "lots")
    assert rc == 2 and "--host-ram-gib" in err
    rc, _, err = run(capsys, "--explain", "OG999")
    assert rc == 2 and "no rule" in err


def test_explain(capsys):
    rc, out, _ = run(capsys, "--explain", "OG101")
    assert rc == 0
    assert out.startswith("OG101 batched-tokens-at-long-context (error)")
    assert "Why:" in out and "Fix:" in out and "Use instead:" in out
    rc, out, _ = run(capsys, "--explain", "removed-flag")
    assert out.startswith("OG602 removed-flag")
    rc, out, _ = run(capsys, "--explain")
    assert out.count("\n") >= 30 and "OG904" in out


def test_ignore_option_and_inline_directives(capsys):
    rc, out, _ = run(capsys, str(FIXTURES / "ignored.sh"), "--gpu", "A100-80GB", "--format", "json")
    d = json.loads(out)
    assert rc == 0
    assert sorted(d["ignored"]) == ["OG602", "OG902"]  # inline (line) and file-wide directives
    assert [f["rule"] for f in d["findings"]] == ["OG901"]
    rc, out, _ = run(capsys, str(FIXTURES / "ignored.sh"), "--gpu", "A100-80GB", "--format", "json", "--ignore", "OG901,prefix-caching-first-request")
    assert json.loads(out)["findings"] == []


def test_vllm_flags_next_to_our_options(capsys):
    rc, out, _ = run(capsys, "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "A100-80GB", "--max-model-len", "8192", "--swap-space", "4", "--format", "json")
    d = json.loads(out)
    assert rc == 1 and d["findings"][0]["rule"] == "OG602"
    assert d["fixed_command"] == "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192"


def test_github_and_sarif_formats(capsys):
    rc, out, _ = run(capsys, str(FIXTURES / "long_context.sh"), "--gpu", "A100-80GB", "--format", "github")
    assert rc == 1 and out.startswith("::error file=")
    rc, out, _ = run(capsys, str(FIXTURES / "long_context.sh"), "--gpu", "A100-80GB", "--format", "sarif")
    assert json.loads(out)["version"] == "2.1.0"


def test_docker_image_tag_selects_the_release(capsys):
    rc, out, _ = run(capsys, str(FIXTURES / "docker_run.sh"), "--gpu", "A100-80GB", "--format", "json")
    d = json.loads(out)
    assert d["vllm_version"] == "0.11.0"
    assert any("image tag" in n for n in d["notes"])


def test_evidence_files_are_parsed_once_however_many_fixes_check_tries(tmp_path, monkeypatch, capsys):
    """check rebuilds its context for each fix it tries; the --nvidia-smi and --topo files are read
    and parsed once (a 31 MB `nvidia-smi -l` series was parsed three times: 40 s instead of 11)."""
    from oomguard.cli.main import main
    from oomguard.inputs import nvidia_smi

    smi = tmp_path / "smi.csv"
    smi.write_text("index, name, memory.total [MiB], memory.used [MiB]\n0, NVIDIA H100 80GB HBM3, 81559 MiB, 30000 MiB\n")
    calls = []
    real = nvidia_smi.parse_nvidia_smi
    monkeypatch.setattr(nvidia_smi, "parse_nvidia_smi", lambda *a, **k: calls.append(1) or real(*a, **k))
    rc = main(["check", "--gpu", "H100", "--nvidia-smi", str(smi), "--", "vllm", "serve", "Qwen/Qwen3-8B"])
    out = capsys.readouterr().out
    assert rc == 1 and "--gpu-memory-utilization" in out  # another process holds 30 GB: a fix was tried
    assert len(calls) == 1
    smi.write_text(smi.read_text().replace("30000 MiB", "1000 MiB"))  # a rewritten file is read again
    main(["check", "--gpu", "H100", "--nvidia-smi", str(smi), "--", "vllm", "serve", "Qwen/Qwen3-8B"])
    assert len(calls) == 2


@pytest.mark.parametrize("command, code", [("check", 3), ("plan", 2), ("fit", 2)])
def test_an_unknown_cudagraph_mode_is_refused_not_a_crash(capsys, command, code):
    """Found by the fuzz campaign (benchmarks/fuzz.py --seed 11, check-json-flags): a cudagraph_mode
    that is no CUDAGraphMode name left no graph mode to estimate: `internal error: ValueError`."""
    from oomguard.cli.main import main

    rc = main([command, "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-8B",
               "--compilation-config", '{"cudagraph_mode": "-1.2483149135344848e+16"}'])
    out, err = capsys.readouterr()
    assert rc == code and "internal error" not in err
    assert "not one of NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE" in " ".join((out + err).split())
