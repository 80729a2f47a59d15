"""Issue 17 item 4: what `oomguard export launch --fix` writes passes `oomguard check`.

Every founding scenario (tests/scenarios/s1-s3) is exported to every target that holds a
launch (the env target holds only the environment) with --fix, and `oomguard check` is run on
the written file: it finds no error, and no warning that check does not also leave on its own
corrected script (`check --fix`'s NAME.fixed.sh). The limits come from the plan: a Kubernetes
export of a 240 GiB CPU KV tier gets a memory request covering it and a /dev/shm that holds it
(it used to get sizeLimit 16Gi, no memory request, and OG405 from check).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from oomguard.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
SCEN = ROOT / "tests" / "scenarios"
PLAN_ARGS = {
    "s1": ["--gpu", "A100-80GB", "--model", str(SCEN / "s1" / "model")],
    "s2": ["--gpu", "RTX-3090"],
    "s3": ["--gpu", "RTX-4090", "--model", str(SCEN / "s3" / "model"), "--vllm-version", "0.33.0"],
}
TARGETS = ["systemd", "docker", "compose", "kubernetes", "yaml"]


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _findings(capsys, *argv: str) -> list[tuple[str, str]]:
    rc, out, err = _cli(capsys, "check", "--format", "json", *argv)
    assert out.strip(), err
    report = json.loads(out)
    return [(f["rule"], f["severity"]) for f in report["findings"]]


def _serious(findings):
    return {(rule, sev) for rule, sev in findings if sev in ("error", "warning")}


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """check's findings on its own corrected script, per scenario."""
    import contextlib
    import io

    out: dict[str, tuple[set, Path]] = {}
    d = tmp_path_factory.mktemp("baseline")
    for name, args in PLAN_ARGS.items():
        script = d / f"{name}.sh"
        shutil.copy(SCEN / name / "start_api.sh", script)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(["check", str(script), *args, "--fix"])
        fixed = d / f"{name}.fixed.sh"
        target = fixed if fixed.exists() else script
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            main(["check", str(target), *args, "--format", "json"])
        out[name] = ({(f["rule"], f["severity"]) for f in json.loads(buf.getvalue())["findings"]
                      if f["severity"] in ("error", "warning")}, target)
    return out


@pytest.mark.parametrize("name", sorted(PLAN_ARGS))
@pytest.mark.parametrize("target", TARGETS)
def test_scenario_exports_pass_check(name, target, tmp_path, capsys, baselines):
    args = PLAN_ARGS[name]
    out = tmp_path / f"{name}.{target}"
    rc, _, err = _cli(capsys, "export", "launch", str(SCEN / name / "start_api.sh"), "--to", target, "--fix", *args,
                      "-o", str(out))
    assert rc == 0, err
    text = out.read_text()
    assert "`oomguard check --fix` corrected and checked" in text.split("\n")[1]  # the header says it was checked
    if target == "yaml":
        # a --config file holds no environment: check it the way its `# run:` line runs it
        from oomguard.inputs.reader import read_launch

        env = read_launch(baselines[name][1], version=args[-1] if name == "s3" else None).env
        findings = _findings(capsys, *args, "--", *[f"{k}={v}" for k, v in env.items()],
                             "vllm", "serve", "--config", str(out))
    else:
        findings = _findings(capsys, str(out), *args)
    serious = _serious(findings)
    assert not {f for f in serious if f[1] == "error"}, (target, findings)
    assert serious <= baselines[name][0], (target, serious, baselines[name][0])
    assert not {rule for rule, _ in serious} & {"OG401", "OG405"}, findings


def test_unexported_header_says_unchecked(capsys):
    rc, out, _ = _cli(capsys, "export", "launch", str(SCEN / "s2" / "start_api.sh"), "--to", "docker")
    assert rc == 0 and "not run through `oomguard check`" in out and "corrected and checked" not in out


TIER = ('{"kv_connector":"OffloadingConnector","kv_role":"kv_both",'
        '"kv_connector_extra_config":{"cpu_bytes_to_use":257698037760}}')  # 240 GiB


def test_a_240_gib_cpu_tier_gets_memory_and_dev_shm_that_hold_it(tmp_path, capsys):
    out = tmp_path / "deploy.yaml"
    rc, _, err = _cli(capsys, "export", "launch", "--to", "kubernetes", "--vllm-version", "0.33.0", "-o", str(out),
                      "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32768", "--kv-transfer-config", TIER)
    assert rc == 0, err
    doc = yaml.safe_load(out.read_text())
    spec = doc["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    gib = {k: int(v.rstrip("Gi")) for k, v in ((k, c["resources"][k]["memory"]) for k in ("requests", "limits"))}
    assert gib["requests"] >= 240 and gib["limits"] >= gib["requests"]
    (shm,) = [v for v in spec["volumes"] if v["name"] == "dshm"]
    assert int(shm["emptyDir"]["sizeLimit"].rstrip("Gi")) >= 241  # the tier's one file + 1 GiB for NCCL
    findings = _findings(capsys, str(out), "--gpu", "H100", "--vllm-version", "0.33.0")
    assert not {rule for rule, sev in findings if sev in ("error", "warning")} & {"OG401", "OG405"}, findings
    # the same launch exported before the plan sized it (16Gi, no memory) is what check flags
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                       *[v for v in spec["volumes"] if v["name"] != "dshm"]]
    del c["resources"]["requests"]["memory"], c["resources"]["limits"]["memory"]
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(doc))
    assert ("OG405", "error") in _findings(capsys, str(old), "--gpu", "H100", "--vllm-version", "0.33.0")


def test_the_systemd_unit_carries_limits_from_the_plan(tmp_path, capsys):
    from oomguard.export.systemd import parse_unit

    rc, out, err = _cli(capsys, "export", "launch", "--to", "systemd", "--vllm-version", "0.33.0", "--gpu", "H100",
                        "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32768", "--kv-transfer-config", TIER)
    assert rc == 0, err
    settings = {e.key: e.value for e in parse_unit(out) if e.kind == "setting"}
    assert settings["User"] == "vllm" and settings["Restart"] == "on-failure"
    assert int(settings["MemoryMax"]) >= 240 * 2**30 and settings["OOMScoreAdjust"] == "-900"
    assert int(settings["TimeoutStartSec"]) >= 1200 and int(settings["StartLimitBurst"]) >= 1
    assert int(settings["StartLimitIntervalSec"]) >= int(settings["StartLimitBurst"]) * int(settings["TimeoutStartSec"])
    assert settings["EnvironmentFile"] == "-/etc/vllm/vllm.env"  # optional: this launch has no secrets
    unit = tmp_path / "vllm.service"
    unit.write_text(out)
    findings = _findings(capsys, str(unit), "--gpu", "H100", "--vllm-version", "0.33.0")
    assert not {rule for rule, sev in findings if sev in ("error", "warning")} & {"OG401"}, findings


def _as_033(tmp_path: Path, name: str) -> Path:
    """The scenario's script as vLLM 0.33 accepts it (S3's --rope-scaling and --kv-cache-memory are refused
    there, so its unfixed export would be bad input); S3's CPU tier raised to the 240 GiB the issue walked."""
    text = (SCEN / name / "start_api.sh").read_text()
    if name == "s3":
        rope = '{"rope_type":"yarn","factor":3.0,"original_max_position_embeddings":262144}'
        text = (text.replace(f"--rope-scaling '{rope}'", "--hf-overrides '{\"rope_scaling\":" + rope + "}'")
                .replace("--kv-cache-memory ", "--kv-cache-memory-bytes ")
                .replace("214748364800", "257698037760"))
        assert "--rope-scaling" not in text
    path = tmp_path / f"{name}.sh"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", sorted(PLAN_ARGS))
@pytest.mark.parametrize("target", TARGETS)
def test_scenario_exports_without_fix_add_no_finding(name, target, tmp_path, capsys):
    """Without --fix the export keeps the launch's own flags (and its own problems): check on it finds what check
    finds on the script and nothing the export added (host RAM, /dev/shm: OG401/OG405), and the header does not
    claim a check that did not run."""
    args = PLAN_ARGS[name]
    script = _as_033(tmp_path, name)
    out = tmp_path / f"{name}.{target}"
    rc, _, err = _cli(capsys, "export", "launch", str(script), "--to", target, *args, "-o", str(out))
    assert rc == 0, err
    text = out.read_text()
    assert "not run through `oomguard check`" in text.split("\n")[1] and "corrected and checked" not in text
    own = _serious(_findings(capsys, str(script), *args))
    if target == "yaml":
        from oomguard.inputs.reader import read_launch

        env = read_launch(script, version=args[-1] if name == "s3" else None).env
        findings = _findings(capsys, *args, "--", *[f"{k}={v}" for k, v in env.items()], "vllm", "serve", "--config",
                             str(out))
    else:
        findings = _findings(capsys, str(out), *args)
    serious = _serious(findings)
    assert not {rule for rule, _ in serious} & {"OG401", "OG405"}, (target, findings)
    assert {rule for rule, _ in serious} <= {rule for rule, _ in own}, (target, serious, own)
