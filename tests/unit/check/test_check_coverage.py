"""Never silently clean: rules that cannot run are a finding and a non-zero exit (issue 12 items 1, 7)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import SCENARIOS, run_cli
from tests.unit.check.conftest import check, finding, rules_of

S1 = SCENARIOS / "s1"


def test_missing_model_is_a_finding_not_a_clean_result():
    rep = check(path=S1 / "start_api.sh", gpu="A100-80GB")
    f = finding(rep, "OG001")
    assert "OG101" in f.numbers["rules_not_run"] and "OG201" in f.numbers["rules_not_run"]
    assert any("--model" in p for p in f.numbers["pass"])
    assert "/models/qwen-1m" in f.message
    assert rep.exit_code() != 0 and rep.incomplete
    assert rep.to_dict()["complete"] is False


def test_missing_gpu_is_a_finding_too():
    rep = check("vllm serve Qwen/Qwen3-8B --max-model-len 32768")
    f = finding(rep, "OG001")
    assert any("--gpu" in p for p in f.numbers["pass"]) and not any("--model" in p for p in f.numbers["pass"])
    assert rep.exit_code() == 3  # could not complete


def test_with_model_and_gpu_the_check_is_complete():
    rep = check(path=S1 / "start_api.sh", gpu="A100-80GB", model=str(S1 / "model"))
    assert "OG001" not in rules_of(rep)
    assert "OG101" in rules_of(rep)
    assert rep.to_dict()["complete"] is True


def test_cli_exit_code_and_json_without_model():
    proc = run_cli("check", str(S1 / "start_api.sh"), "--gpu", "A100-80GB", "--format", "json")
    assert proc.returncode == 3, proc.stderr
    d = json.loads(proc.stdout)
    assert d["complete"] is False and "OG001" in {f["rule"] for f in d["findings"]}
    text = run_cli("check", str(S1 / "start_api.sh"), "--gpu", "A100-80GB")
    assert text.returncode == 3 and "no findings" not in text.stdout and "OG001" in text.stdout


def test_unmodelled_architecture_still_gets_flag_rules_and_json():
    # Llama-3.2-Vision is in the catalog but vLLM 0.33 no longer serves it (and its cross-attention
    # caches are not modelled)
    proc = run_cli("check", "--gpu", "H200", "--num-gpus", "8", "--format", "json", "--",
                   "vllm", "serve", "meta-llama/Llama-3.2-11B-Vision-Instruct", "-tp", "8", "--swap-space", "4", "--max-modle-len", "8192")
    assert proc.returncode == 1, proc.stderr  # OG602/OG601 are errors
    d = json.loads(proc.stdout)
    rules = {f["rule"] for f in d["findings"]}
    assert {"OG602", "OG601", "OG001"} <= rules
    cov = next(f for f in d["findings"] if f["rule"] == "OG001")
    assert "architecture" in cov["message"] and "Llama-3.2-Vision" in cov["message"]
    assert d["plan"] is None and d["fixed_command"] and "--swap-space" not in d["fixed_command"]


def test_unmodelled_architecture_given_explicitly_is_not_bad_input():
    from oomguard.inputs.model_config import CATALOG_DIR

    cfg = Path(CATALOG_DIR) / "meta-llama__Llama-3.2-11B-Vision-Instruct" / "config.json"
    rep = check("vllm serve /srv/mllama -tp 8", gpu="H200", num_gpus=8, model=str(cfg))
    assert rep.ctx.model_unsupported and rep.exit_code() == 3
    assert rules_of(rep) == {"OG001"}


def test_a_path_not_on_this_machine_is_matched_by_name_and_says_so():
    rep = check("vllm serve /models/Qwen/Qwen3-8B --max-model-len 32768", gpu="A100-80GB")
    assert rep.ctx.model is not None and rep.ctx.model.name == "Qwen/Qwen3-8B"
    assert "OG001" not in rules_of(rep) and rep.ctx.plan.starts
    assert any("matched by the path's last two components" in n for n in rep.notes)
    rep = check("vllm serve /srv/weights/latest --served-model-name Qwen/Qwen3-8B", gpu="A100-80GB")
    assert rep.ctx.model is not None and any("--served-model-name" in n for n in rep.notes)
    # no guess without a name that matches: the finding says what to pass
    rep = check("vllm serve /srv/weights/latest", gpu="A100-80GB")
    assert rep.ctx.model is None and "OG001" in rules_of(rep)


def test_fit_from_matches_the_model_by_name_too(tmp_path):
    p = tmp_path / "start.sh"
    p.write_text("vllm serve /models/Qwen/Qwen3-8B --max-model-len 32768\n")
    proc = run_cli("fit", "--from", str(p), "--gpu", "A100-80GB", "--format", "json", env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "matched by the path's last two components" in proc.stderr
    d = json.loads(proc.stdout)
    assert d["candidates"][0]["command"].startswith("vllm serve /models/Qwen/Qwen3-8B")
