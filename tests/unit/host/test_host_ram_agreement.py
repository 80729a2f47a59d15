"""check and host print the same host_ram object for the same launch (one model: host.ram_model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomguard.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
S3 = ROOT / "tests" / "scenarios" / "s3"
HOST_ROOT = ROOT / "tests" / "fixtures" / "host" / "roots" / "two_numa_4x4090"


def _json(capsys, *argv) -> dict:
    try:
        main([str(a) for a in argv])
    except SystemExit:
        pass
    return json.loads(capsys.readouterr().out)


def _both(capsys, script: Path, *check_args) -> tuple[dict, dict]:
    checked = _json(capsys, "check", script, "--format", "json", *check_args)
    hosted = _json(capsys, "host", "--root", HOST_ROOT, "--launch", script, "--format", "json")
    return checked["host_ram"], hosted["host_ram"]


def test_s3_200_gib_cpu_tier_same_in_check_and_host(capsys):
    c, h = _both(capsys, S3 / "start_api.sh", "--model", S3 / "model", "--gpu", "RTX-4090", "--num-gpus", "4")
    assert c == h
    assert c["parts"]["kv_cpu_tier"] == 200.0 and c["shm_gib"] == 200.0
    assert c["needed_gib"] == 216.07 and c["range_gib"] == [211.07, 221.07]


@pytest.mark.parametrize("tp", [1, 2])
def test_cpu_offload_80_same_in_check_and_host(capsys, tmp_path, tp):
    script = tmp_path / "start_api.sh"
    script.write_text(f"#!/bin/bash\nvllm serve Qwen/Qwen3-8B --tensor-parallel-size {tp} --cpu-offload-gb 80 --max-model-len 8192\n")
    c, h = _both(capsys, script, "--gpu", "A100-80GB", "--num-gpus", str(tp))
    assert c == h
    # 80 GiB per GPU x 1.9 measured (vllm#56410), range 1.0-2.0
    assert c["parts"]["cpu_offload"] == round(80 * tp * 1.9, 2)
    assert c["range_gib"][0] < c["needed_gib"] < c["range_gib"][1]


def test_pinned_tier_of_0_26_same_in_check_and_host_with_the_model_config(capsys, tmp_path):
    # Before 0.27 the pinned size depends on the KV tensors per worker: both commands read them
    # from the same model config (S3's: 64 attention layers, K and V apart = 128 per worker).
    script = tmp_path / "start_api.sh"
    script.write_text(
        f"#!/bin/bash\nvllm serve {S3 / 'model'} --tensor-parallel-size 4 --max-model-len 32768 --kv-cache-dtype fp8_e4m3 "
        "--kv-transfer-config '{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":\"kv_both\","
        "\"kv_connector_extra_config\":{\"cpu_bytes_to_use\":214748364800}}'\n"
    )
    checked = _json(capsys, "check", script, "--format", "json", "--gpu", "RTX-4090", "--num-gpus", "4", "--vllm-version", "0.26.0")
    hosted = _json(capsys, "host", "--root", HOST_ROOT, "--launch", script, "--format", "json", "--vllm-version", "0.26.0")
    assert checked["host_ram"] == hosted["host_ram"]
    # 50 GiB per worker as 128 tensors of 0.39 GiB, each pinned as 0.5 GiB: 64 GiB per worker
    assert checked["host_ram"]["parts"]["kv_cpu_tier"] == 256.0 and checked["host_ram"]["shm_gib"] == 0.0
