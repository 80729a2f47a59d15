"""`oomguard host` end to end: exit codes, the JSON contract, text output, and no writes."""

from __future__ import annotations

import json
import sys

import pytest

from oomguard.cli.main import main

from host_paths import GPUS, ROOTS, TOPO


def run(capsys, *argv):
    code = main(["host", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract_and_error_exit(capsys):
    code, out, err = run(capsys, "--root", ROOTS / "bad_kernel_settings", "--nvidia-smi", GPUS / "a100_shared.csv", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert set(doc) == {"findings", "host_ram", "facts"} and doc["host_ram"] is None  # no launch
    for f in doc["findings"]:
        assert set(f) == {"id", "severity", "message", "fix_command"}
        assert f["severity"] in ("error", "warning", "info")
        assert f["id"].startswith("HOST") and f["fix_command"]
    ids = [f["id"] for f in doc["findings"]]
    assert ids[0] == "HOST001"
    assert {"HOST002", "HOST003", "HOST004", "HOST005", "HOST020", "HOST040"} <= set(ids)
    facts = doc["facts"]
    assert facts["vm"] == {"overcommit_memory": 2, "overcommit_ratio": 50, "max_map_count": 65530}
    assert facts["gpus"]["processes"][0]["pid"] == 3187
    assert facts["launch"] is None
    assert "sk-secret" not in out


def test_clean_host_exits_zero(capsys):
    code, out, _ = run(capsys, "--root", ROOTS / "two_numa_4x4090", "--topo", TOPO / "rtx4090_4x_two_sockets.txt", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert [f["id"] for f in doc["findings"]] == ["HOST031"]
    assert doc["facts"]["topology"]["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]


def test_text_output_has_facts_and_fixes(capsys):
    code, out, err = run(capsys, "--root", ROOTS / "bad_kernel_settings")
    assert code == 1
    assert "host facts" in out and "vm.overcommit_memory" in out
    assert "HOST001 overcommit-strict" in out
    assert "fix: sysctl -w vm.overcommit_memory=1" in out
    assert "oomguard changes nothing" in out
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--topo", str(TOPO / "missing.txt")], "cannot read"),
        (["--nvidia-smi", str(ROOTS / "bad_kernel_settings/proc/meminfo")], "no CSV header line"),
    ],
)
def test_bad_input_exits_two_with_one_line(capsys, extra, words):
    code, out, err = run(capsys, "--root", ROOTS / "two_numa_4x4090", *extra)
    assert code == 2
    assert err.startswith("oomguard host: error: ") and words in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_root(capsys, tmp_path):
    code, _, err = run(capsys, "--root", tmp_path / "nowhere")
    assert code == 2 and "--root is not a directory" in err


def test_garbled_topology_names_the_line(capsys, tmp_path):
    bad = tmp_path / "topo.txt"
    bad.write_text("\tGPU0\tGPU1\nGPU0\t X \tWAT\nGPU1\tWAT\t X \n")
    code, _, err = run(capsys, "--root", ROOTS / "two_numa_4x4090", "--topo", bad)
    assert code == 2 and f"{bad}:2: unknown link kind 'WAT'" in err


S3_SCRIPT = """#!/bin/bash
vllm serve /data/models/qwen3-27b-w4a16 \\
  --served-model-name qwen3-27b \\
  --tensor-parallel-size 4 \\
  --max-model-len 750000 \\
  --gpu-memory-utilization 0.85 \\
  --max-num-seqs 96 \\
  --kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":214748364800}}'
"""


def _launch_reader_ready(tmp_path) -> bool:
    script = tmp_path / "probe.sh"
    script.write_text(S3_SCRIPT)
    try:
        from oomguard.inputs.reader import read_launch

        read_launch(script)
    except ImportError:
        return False
    return True


def test_s3_launch_script(capsys, tmp_path, fake_root):
    if not _launch_reader_ready(tmp_path):
        pytest.skip("oomguard.inputs.launch is not complete in this build")
    root = fake_root("two_numa_4x4090")
    model = root.path / "data/models/qwen3-27b-w4a16"
    model.mkdir(parents=True)
    for i in range(4):  # sparse files: sizes without disk use
        with open(model / f"model-0000{i + 1}-of-00004.safetensors", "wb") as fh:
            fh.truncate(5 * 2**30)
    script = tmp_path / "start_api.sh"
    script.write_text(S3_SCRIPT)
    code, out, _ = run(
        capsys, "--root", root, "--launch", script, "--topo", TOPO / "rtx4090_4x_two_sockets.txt",
        "--nvidia-smi", GPUS / "rtx4090_4x_idle.csv", "--format", "json",
    )
    doc = json.loads(out)
    assert code == 1
    ids = [f["id"] for f in doc["findings"]]
    # The newest release keeps the 200 GiB tier in one /dev/shm file: /dev/shm (half of RAM) is too small.
    assert ids[:1] == ["HOST013"] and "HOST011" in ids and "HOST030" in ids and "HOST012" not in ids
    ram = doc["facts"]["launch"]["host_ram"]
    assert ram["page_cache_bytes"] == 20 * 2**30
    kv = next(c for c in ram["components"] if c["name"] == "kv offload (CPU tier)")
    assert kv["expected_bytes"] == 200 * 2**30 and kv["kind"] == "shmem"
    assert doc["host_ram"]["parts"]["kv_cpu_tier"] == 200.0
    assert doc["host_ram"]["needed_gib"] == 216.07 and doc["host_ram"]["shm_gib"] == 200.0


def test_launch_after_double_dash(capsys):
    try:
        code, out, err = run(
            capsys, "--root", ROOTS / "docker_cgroup_v2_limited", "--format", "json", "--",
            "vllm", "serve", "m", "--tensor-parallel-size", "2", "--cpu-offload-gb", "40",
        )
    except ImportError:
        pytest.skip("oomguard.inputs.launch is not complete in this build")
    if code == 2 and "launch reader is incomplete" in err:
        pytest.skip("oomguard.inputs.launch is not complete in this build")
    doc = json.loads(out)
    assert code == 1
    assert "HOST010" in [f["id"] for f in doc["findings"]]
    assert doc["facts"]["launch"]["tensor_parallel_size"] == 2


class _Audit:
    """Records file writes, deletions and process starts while armed (audit hooks cannot be removed)."""

    armed = False
    events: list = []
    installed = False

    @classmethod
    def hook(cls, event, args):
        if not cls.armed:
            return
        if event == "open":
            mode = args[1] if len(args) > 1 else "r"
            flags = args[2] if len(args) > 2 else 0
            if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & 0o3):
                cls.events.append((event, args[0]))
        elif event in ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "shutil.rmtree", "subprocess.Popen", "os.truncate"):
            cls.events.append((event, args[0] if args else None))


def test_no_writes_anywhere(capsys, tmp_path):
    if not _Audit.installed:
        sys.addaudithook(_Audit.hook)
        _Audit.installed = True
    # The recorder itself must see a write, or the assertion below proves nothing.
    _Audit.armed = True
    (tmp_path / "probe").write_text("x")
    _Audit.armed = False
    assert _Audit.events and _Audit.events[0][0] == "open"
    _Audit.events.clear()
    _Audit.armed = True
    try:
        code = main(
            ["host", "--root", str(ROOTS / "bad_kernel_settings"), "--topo", str(TOPO / "dgx_a100_8x_nv12.txt"),
             "--nvidia-smi", str(GPUS / "a100_shared.csv"), "--format", "json"]
        )
        main(["host", "--root", str(ROOTS / "docker_cgroup_v2_limited")])
    finally:
        _Audit.armed = False
    capsys.readouterr()
    assert code == 1
    assert _Audit.events == []


def test_removed_swap_space_flag_is_still_counted(capsys, tmp_path):
    if not _launch_reader_ready(tmp_path):
        pytest.skip("oomguard.inputs.launch is not complete in this build")
    script = tmp_path / "old.sh"
    script.write_text(
        "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=2,3\n"
        "numactl --cpunodebind=1 --membind=1 vllm serve m --tensor-parallel-size 2 --swap-space 8 --max-model-len 4096\n"
    )
    code, out, err = run(capsys, "--root", ROOTS / "two_numa_4x4090", "--launch", script, "--format", "json")
    assert code == 0, err
    launch = json.loads(out)["facts"]["launch"]
    swap = next(c for c in launch["host_ram"]["components"] if c["name"] == "swap space (--swap-space)")
    assert swap["expected_bytes"] == 16 * 2**30
    assert launch["visible_devices"] == ["2", "3"] and launch["numa_bound"] is True
    assert any("--swap-space counted" in n for n in launch["notes"])
