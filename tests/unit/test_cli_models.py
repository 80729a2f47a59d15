"""`oomguard models` lists the catalog; unknown model ids get a did-you-mean from it."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def test_models_json_lists_every_catalog_entry_and_says_which_are_not_modelled():
    from oomguard.inputs.model_config import catalog_ids

    out = run_cli("models", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["count"] == len(catalog_ids()) == len(data["catalog"])
    by_id = {r["id"]: r for r in data["catalog"]}
    assert by_id["Qwen/Qwen3-8B"]["supported"] and by_id["Qwen/Qwen3-8B"]["layers"] == 36
    assert by_id["deepseek-ai/DeepSeek-V4-Flash"]["supported"] and by_id["deepseek-ai/DeepSeek-V4-Flash"]["layers"] == 43
    # modelled for the releases that serve it, and the entry says which
    mllama = by_id["meta-llama/Llama-3.2-11B-Vision-Instruct"]
    assert mllama["supported"] and mllama["family"] == "mllama" and mllama["served_until"] == "0.10.2"


def test_models_gives_each_entry_its_coverage_level_from_the_sweep_data():
    """The same data as docs/models.md (src/oomguard/data/coverage.json)."""
    from oomguard.inputs.coverage_data import coverage_table

    out = run_cli("models", "--format", "json")
    data = json.loads(out.stdout)
    levels = {"native-exact", "native", "generic", "refused"}
    assert all(r["coverage"] in levels for r in data["catalog"])
    by_id = {r["id"]: r for r in data["catalog"]}
    archs = coverage_table()["architectures"]
    qwen = by_id["Qwen/Qwen3-8B"]
    assert qwen["coverage"] == archs[qwen["architecture"]]["level"] == "native-exact"
    assert "registry sweep" in qwen["coverage_checked"]
    assert by_id["deepseek-ai/DeepSeek-V4-Flash"]["coverage"] in ("native", "native-exact")
    reg = data["registry"]
    assert reg["architectures"] == len(archs) and sum(reg["levels"].values()) == len(archs)
    text = run_cli("models", "qwen3-8b")
    assert "native-exact" in text.stdout and "docs/models.md" in text.stdout


def test_models_filter_and_no_match_exit():
    out = run_cli("models", "70b")
    assert out.returncode == 0
    assert "meta-llama/Meta-Llama-3.1-70B" in out.stdout and "Qwen/Qwen3-8B" not in out.stdout
    miss = run_cli("models", "no-such-model-xyz")
    assert miss.returncode == 1 and "no catalog id contains" in miss.stderr


def test_unknown_hub_id_without_hub_extra_suggests_catalog_entries_of_the_same_size(monkeypatch):
    out = run_cli("plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM-80GB",
                  env={"HF_HUB_OFFLINE": "1"})
    assert out.returncode == 2
    line = out.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "did you mean meta-llama/Meta-Llama-3.1-70B" in line
    assert "oomguard models" in line


def test_close_catalog_ids_prefers_the_same_size():
    from oomguard.inputs.model_config import close_catalog_ids

    assert close_catalog_ids("Qwen/Qwen3-32B-AWQ")[0] == "Qwen/Qwen3-32B"
    assert close_catalog_ids("gpt-oss-120")[0] == "openai/gpt-oss-120b"
    assert close_catalog_ids("completely/unrelated") == []
