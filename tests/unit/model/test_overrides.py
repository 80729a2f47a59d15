"""--hf-overrides gives one answer: plan, check and fit apply it to the model config the way vLLM
does (one function, ``model.overrides.apply_overrides``), checked against vLLM 0.32 itself."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from oomguard.inputs.model_config import load_model
from oomguard.model.engine import derive_len, parse_version
from oomguard.model.overrides import apply_overrides, hf_overrides_of
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[3]
ORACLE = ROOT / "tests" / "data" / "oracle" / "maxlen_overrides_vllm-0.32.0.json"
YARN4 = '{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}'


def _oracle() -> dict:
    return json.loads(ORACLE.read_text())


@pytest.mark.parametrize("case", _oracle()["cases"], ids=lambda c: f"{c['model']}:{json.dumps(c['hf_overrides'])[:60]}")
def test_derived_length_matches_vllm(case):
    """Recorded with scripts/vllm_maxlen_oracle.py (vLLM's own ModelConfig on the catalog config)."""
    model = load_model(case["model"].replace("__", "/"))
    v = parse_version(_oracle()["vllm"])
    for given in (case["hf_overrides"], json.dumps(case["hf_overrides"])):  # a dict, or the JSON text a reader hands over
        m = apply_overrides(model, {"hf_overrides": given}, v)
        assert derive_len(m, v) == case["derived"]
    assert (case["max_model_len"] > case["derived"]) == bool(case["refused"])


def test_apply_is_idempotent_and_folds_the_old_rope_scaling_flag():
    model = load_model("Qwen/Qwen3-8B")
    flags = {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    once = apply_overrides(model, flags, (0, 11, 0))
    assert apply_overrides(once, flags, (0, 11, 0)) == once and derive_len(once, (0, 11, 0)) == 81920
    assert hf_overrides_of({"hf_overrides": {"rope_scaling": {"factor": 3}}, "rope_scaling": {"factor": 2}}) == {"rope_scaling": {"factor": 3}}


def test_bad_override_json_is_bad_input():
    from oomguard.errors import InputError

    with pytest.raises(InputError, match="--hf-overrides: not valid JSON"):
        hf_overrides_of({"hf_overrides": "{rope"})
    with pytest.raises(InputError, match="max_position_embeddings must be a positive integer"):
        apply_overrides(load_model("Qwen/Qwen3-8B"), {"hf_overrides": {"max_position_embeddings": "lots"}})


def _script(tmp_path: Path, line: str) -> Path:
    p = tmp_path / "start_api.sh"
    p.write_text("#!/bin/bash\n" + line + "\n")
    return p


def _answers(script: Path, version: str) -> tuple[dict, dict, dict, int]:
    env = {"HF_HUB_OFFLINE": "1"}
    plan = run_cli("plan", str(script), "--gpu", "H100", "--vllm-version", version, "--json", env=env)
    check = run_cli("check", str(script), "--gpu", "H100", "--vllm-version", version, "--format", "json", env=env)
    fit = run_cli("fit", "--from", str(script), "--gpu", "H100", "--vllm-version", version, "--format", "json", env=env)
    assert "internal error" not in plan.stderr + check.stderr + fit.stderr
    return json.loads(plan.stdout), json.loads(check.stdout), json.loads(fit.stdout), fit.returncode


@pytest.mark.parametrize("version,starts", [("0.11.0", True), ("0.33.0", False)])
def test_one_yarn_launch_one_answer_in_plan_check_and_fit(tmp_path, version, starts):
    # The Qwen3 model card's recipe: before 0.30 vLLM multiplies original × factor (131,072);
    # from 0.30 it takes max_position_embeddings (40,960) as already scaled and refuses 131,072.
    s = _script(tmp_path, f"vllm serve Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides '{YARN4}'")
    plan, check, fit, rc = _answers(s, version)
    assert plan["starts"] is starts
    assert fit["launch"]["starts"] is starts
    assert check["plan"]["starts"] is starts
    og501 = [f for f in check["findings"] if f["rule"] == "OG501"]
    assert bool(og501) is (not starts)
    if not starts:
        # all three name the same way out: the variable next to the launch's own scaling
        assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in m for m in plan["messages"])
        assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in json.dumps(og501[0]["fix"])
        first = fit["candidates"][0]
        assert first["env"].get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1" and first["flags"]["max_model_len"] == 131072
    assert rc in (0, 1)


def test_a_dynamic_scaling_override_raises_the_derived_length_everywhere(tmp_path):
    s = _script(tmp_path, "vllm serve Qwen/Qwen3-8B --max-model-len 81920 --hf-overrides '{\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2.0}}'")
    plan, check, fit, _ = _answers(s, "0.33.0")
    assert plan["starts"] and fit["launch"]["starts"]
    assert not [f for f in check["findings"] if f["rule"] == "OG501"]


def test_fit_max_context_tries_the_model_cards_recipe_as_context_does():
    p = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-context", "--format", "json", env={"HF_HUB_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr
    first = json.loads(p.stdout)["candidates"][0]
    assert first["flags"]["max_model_len"] == 131072 and "rope_scaling" in json.dumps(first["flags"].get("hf_overrides"))
    q = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--context", "131072", "--format", "json", env={"HF_HUB_OFFLINE": "1"})
    assert json.loads(q.stdout)["candidates"][0]["flags"].get("hf_overrides") == first["flags"].get("hf_overrides")


def test_fit_max_context_drops_the_recipe_when_the_gpu_holds_less_than_the_native_context():
    small = ("--gpu", "RTX-4090", "--gpu-memory-gib", "17.5", "--max-context", "--format", "json")
    first = json.loads(run_cli("fit", "--model", "Qwen/Qwen3-8B", *small, env={"HF_HUB_OFFLINE": "1"}).stdout)["candidates"][0]
    assert first["flags"]["max_model_len"] <= 40960 and "hf_overrides" not in first["flags"]
    # a card that holds more than the native context but less than the recipe's reach gets the factor it needs
    mid = json.loads(run_cli("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "RTX-4090", "--max-context", "--format", "json",
                             env={"HF_HUB_OFFLINE": "1"}).stdout)["candidates"][0]
    L, rope = mid["flags"]["max_model_len"], mid["flags"]["hf_overrides"]["rope_scaling"]
    assert 40960 < L < 131072 and rope["factor"] * 32768 >= L and (rope["factor"] - 0.5) * 32768 < L


@pytest.mark.vllm
def test_oracle_reproduces_committed_json(tmp_path):
    python = Path(os.environ.get("OOMGUARD_VLLM_VENV", str(ROOT / ".venv-vllm"))) / "bin" / "python"
    if not python.exists():
        pytest.skip(f"vLLM CPU venv unavailable: {python}")
    out = tmp_path / "fresh.json"
    proc = subprocess.run([str(python), str(ROOT / "scripts" / "vllm_maxlen_oracle.py"), "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text()) == _oracle()
