"""One host-RAM answer: check, fit and host give the same verdict and propose the same CPU tier for
the same launch and host RAM (ram_model's one policy), host takes --host-ram-gib like the others,
and every fix host prints is re-checked against host's own findings (through the real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomguard.units import GiB
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[3]
S3 = ROOT / "tests" / "scenarios" / "s3"
HOST_ROOT = ROOT / "tests" / "fixtures" / "host" / "roots" / "two_numa_4x4090"
ENV = {"HF_HUB_OFFLINE": "1"}


def _s3(tmp_path: Path, tier_bytes: int) -> Path:
    """S3's launch with the CPU tier at ``tier_bytes`` (and the 0.33 spelling of its RoPE override)."""
    text = (S3 / "start_api.sh").read_text().replace("214748364800", str(tier_bytes))
    text = text.replace("--rope-scaling '", "--hf-overrides '{\"rope_scaling\":").replace("262144}'", "262144}}'")
    text = text.replace("--kv-cache-memory ", "--kv-cache-memory-bytes ")
    p = tmp_path / f"start_api_{tier_bytes // GiB}.sh"
    p.write_text(text)
    return p


def _three(script: Path, ram: str) -> tuple[dict, dict, dict]:
    common = ("--model", str(S3 / "model"), "--gpu", "RTX-4090", "--host-ram-gib", ram)
    c = run_cli("check", str(script), *common, "--format", "json", env=ENV)
    f = run_cli("fit", "--from", str(script), *common, "--format", "json", env=ENV)
    h = run_cli("host", "--root", str(HOST_ROOT), "--launch", str(script), "--host-ram-gib", ram, "--format", "json", env=ENV)
    for p in (c, f, h):
        assert p.returncode in (0, 1), p.stderr
    return json.loads(c.stdout), json.loads(f.stdout), json.loads(h.stdout)


def _og401(check: dict) -> dict | None:
    return next((x for x in check["findings"] if x["rule"] == "OG401"), None)


def _ram_findings(host: dict) -> dict:
    return {f["id"]: f for f in host["findings"] if f["id"] in ("HOST010", "HOST011")}


def _host_tier(fix: str) -> int:
    return int(fix.split('"cpu_bytes_to_use": ')[1].split()[0])


@pytest.mark.parametrize("tier_gib,verdict", [(240, "exceeds"), (225, "tight"), (200, "fits")])
def test_check_fit_and_host_agree_on_s3s_cpu_tier_on_a_256_gib_host(tmp_path, tier_gib, verdict):
    check, fit, host = _three(_s3(tmp_path, tier_gib * GiB), "256")
    og, ram = _og401(check), _ram_findings(host)
    assert fit["cpu_tier"]["host_status"] == verdict
    expected = {"exceeds": ("error", "HOST010"), "tight": ("warning", "HOST011"), "fits": (None, None)}[verdict]
    assert (og["severity"] if og else None) == expected[0]
    assert set(ram) == ({expected[1]} if expected[1] else set())
    if verdict != "fits":
        proposed = og["numbers"]["suggested_offload_gib"] * GiB
        # the same size in all three: check's fix, fit's largest tier, host's fix
        assert fit["cpu_tier"]["largest_fit_bytes"] == proposed == _host_tier(ram[expected[1]]["fix_command"])
        assert fit["candidates"][0]["flags"]["kv_transfer_config"]["kv_connector_extra_config"]["cpu_bytes_to_use"] == proposed
        # ... and the proposed size fits in all three: no command's fix raises another's finding
        check2, fit2, host2 = _three(_s3(tmp_path, int(proposed)), "256")
        assert _og401(check2) is None and not _ram_findings(host2) and fit2["cpu_tier"]["host_status"] == "fits"


def test_host_takes_host_ram_gib_for_the_machine_the_launch_is_for(tmp_path):
    script = _s3(tmp_path, 200 * GiB)
    small = json.loads(run_cli("host", "--root", str(HOST_ROOT), "--launch", str(script), "--host-ram-gib", "128", "--format", "json", env=ENV).stdout)
    big = json.loads(run_cli("host", "--root", str(HOST_ROOT), "--launch", str(script), "--host-ram-gib", "1024", "--format", "json", env=ENV).stdout)
    assert small["facts"]["ram_budget_bytes"] == 128 * GiB and "HOST010" in _ram_findings(small)
    assert big["facts"]["ram_budget_bytes"] == 1024 * GiB and not _ram_findings(big)
    bad = run_cli("host", "--host-ram-gib", "lots", env=ENV)
    assert bad.returncode == 2 and "--host-ram-gib" in bad.stderr


@pytest.mark.parametrize("line,ram", [
    ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --cpu-offload-gb 80 --max-model-len 8192", "256"),
    ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --cpu-offload-gb 60 --max-model-len 8192", "256"),
    ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 4 --kv-offloading-size 200 --kv-offloading-backend native --max-model-len 8192", "210"),
])
def test_every_host_ram_fix_is_rechecked_and_clears_without_raising_the_next(tmp_path, line, ram):
    script = tmp_path / "start_api.sh"
    script.write_text("#!/bin/bash\n" + line + "\n")
    out = json.loads(run_cli("host", "--root", str(HOST_ROOT), "--launch", str(script), "--host-ram-gib", ram, "--format", "json", env=ENV).stdout)
    ram_f = list(_ram_findings(out).values())
    assert ram_f, out["findings"]
    f = ram_f[0]
    assert f["fix_checked"].startswith("re-checked: the edited launch clears")
    # apply the printed fix by hand and ask host again: neither HOST010 nor HOST011 remains
    fix = f["fix_command"].split("#")[0].strip()
    if fix.startswith("--cpu-offload-gb"):
        fixed = line.replace(line.split("--cpu-offload-gb ")[1].split()[0], fix.split()[1], 1)
    else:
        fixed = line.replace("--kv-offloading-size 200", fix)
    script.write_text("#!/bin/bash\n" + fixed + "\n")
    again = json.loads(run_cli("host", "--root", str(HOST_ROOT), "--launch", str(script), "--host-ram-gib", ram, "--format", "json", env=ENV).stdout)
    assert not _ram_findings(again), again["findings"]
