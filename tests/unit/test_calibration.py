"""The calibration records are well-formed and honest; the calibration benchmark runs.

Deliberately no pass/fail threshold on the model's errors: those are measured and reported by
benchmarks/calibration.py (issue 10 item 8), not tuned to here.
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "calibration"
RECORDS = [json.loads(line) for line in (DATA / "startup.jsonl").read_text().splitlines() if line.strip()]
EVIDENCE_FORMS = {"verbatim_log_lines", "verbatim_log_lines_without_prefix", "table_or_prose_quoting_log_values"}
REQUIRED = ("id", "source", "source_type", "raw_excerpt", "evidence_form", "startup_outcome")
# figure -> how it may be printed in a log or a table (GiB with two decimals, tokens with commas, ...)
FIGURES = ("weights_gib", "weights_gb_as_logged", "activation_peak_gib", "non_torch_gib", "cuda_graph_gib",
           "kv_cache_gib", "num_gpu_blocks", "kv_cache_tokens", "max_concurrency")


def _bench():
    spec = importlib.util.spec_from_file_location("calibration", ROOT / "benchmarks" / "calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _numbers(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(r"-?\d[\d,]*\.?\d*", text)}


def _spellings(value) -> set[float]:
    """A figure as a source may print it: as stored, or rounded to 2 or 1 decimals."""
    v = float(value)
    return {v, round(v, 2), round(v, 1)}


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_schema(r):
    for key in REQUIRED:
        assert r.get(key) not in (None, ""), f"{r['id']}: {key} missing"
    assert "model" in r, f"{r['id']}: model key missing (null when the source does not name it)"
    assert r["evidence_form"] in EVIDENCE_FORMS, r["evidence_form"]
    assert r.get("url") or r["source"], "no provenance"
    assert isinstance(r.get("extra") or {}, dict)
    assert isinstance(r.get("inferred") or {}, dict)
    for key in ("tp", "pp", "num_gpus", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens"):
        if r.get(key) is not None:
            assert isinstance(r[key], int) and r[key] > 0, f"{r['id']}: {key}={r[key]!r}"
    if r.get("num_gpu_blocks") is not None:  # 0 on a failed start ("# cuda blocks: 0")
        assert isinstance(r["num_gpu_blocks"], int) and r["num_gpu_blocks"] >= 0
    if r.get("gpu_memory_utilization") is not None:
        assert 0 < r["gpu_memory_utilization"] <= 1
    if r.get("max_concurrency") is not None and r.get("concurrency_for_len") is not None:
        assert isinstance(r["concurrency_for_len"], int)


def test_ids_unique():
    ids = [r["id"] for r in RECORDS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_evidence_contains_the_figures(r):
    """Every logged figure stored in a record appears in its quoted evidence."""
    found = _numbers(r["raw_excerpt"])
    for key in FIGURES:
        if r.get(key) is None:
            continue
        assert _spellings(r[key]) & found, f"{r['id']}: {key}={r[key]} not in its raw_excerpt"


@pytest.mark.parametrize("r", [r for r in RECORDS if r.get("config")], ids=lambda r: r["id"])
def test_named_config_exists(r):
    bench = _bench()
    assert bench.config_dir(r["config"]) is not None, f"{r['id']}: config {r['config']} not under configs/ nor the catalog"


@pytest.mark.parametrize("r", [r for r in RECORDS if r["id"] >= "S100"], ids=lambda r: r["id"])
def test_new_records_say_what_is_inferred(r):
    """Records added in the issue-10 round mark every inferred input with its reason."""
    if r.get("vllm_version_estimate"):
        assert "vllm_version" in r["inferred"], r["id"]
    if r.get("gpu_model_estimate") or (r.get("gpu_model") and "gpu_model" not in r["inferred"] and r["evidence_form"] != "verbatim_log_lines"):
        assert "gpu_model" in r["inferred"], r["id"]


def test_configs_are_indexed():
    index = (DATA / "INDEX.tsv").read_text()
    for d in (DATA / "configs").iterdir():
        if d.is_dir():
            assert d.name in index, f"configs/{d.name} has no INDEX.tsv row (source and doubts)"
            json.loads((d / "config.json").read_text())


def test_benchmark_runs_and_reports_every_term():
    res = _bench().evaluate(loro=False)
    # 42 usable at the issue-10 round (the issue asks for >= 40); a floor, so a
    # record that silently stops being plannable (config moved, GPU lookup broken) fails here.
    assert res["usable"] >= 42
    assert res["usable"] + len(res["skipped"]) == res["records"]
    overall = res["summary"]["overall"]
    for term in ("weights", "activation", "non_torch", "cuda_graph", "kv_pool", "tokens", "concurrency"):
        assert overall[term] and overall[term]["n"] > 0, term
    assert res["summary"]["pinned_tokens"]["n"] >= 10
    assert len(res["summary"]["by_family"]) >= 4
    for rid, why in res["skipped"]:
        assert why, rid


def test_pinned_pool_comes_from_the_kv_layout():
    """Feeding the logged pool back in must move the token count by the layout, not the terms."""
    bench = _bench()
    models: dict = {}
    r = next(x for x in RECORDS if x["id"] == "S101")  # Qwen2-7B, 0.10.1.1, A100 80GB: verbatim log
    inp, why = bench.prepare(r, models)
    assert inp is not None, why
    row = bench.compare(r, inp)
    lo, hi, logged = row["pinned_tokens"]
    assert lo <= logged <= hi
    assert hi - lo < 0.001 * logged


def test_leave_one_release_out_restores_constants():
    bench = _bench()
    consts, _ = bench.fitted_constants()
    before = {c: getattr(__import__(c[0], fromlist=["x"]), c[1]) for c in consts}
    with bench.patched({c: v * 2 for c, v in before.items()}):
        pass
    after = {c: getattr(__import__(c[0], fromlist=["x"]), c[1]) for c in consts}
    assert before == after


def test_markdown_and_json_render():
    bench = _bench()
    res = bench.evaluate(loro=False)
    md = bench.markdown(res, show_records=True)
    assert md.startswith("# Calibration:") and "| **all** |" in md
    json.dumps(res, default=str)


def test_fitted_constants_are_declared_with_their_records():
    """Every FITTED_CONSTANTS entry names a numeric attribute of its module and the records it came
    from; every S-record it names exists. The calibration benchmark re-fits exactly these."""
    import importlib
    import pkgutil

    import oomguard.model as pkg

    ids = {r["id"] for r in RECORDS}
    declared = 0
    for info in pkgutil.walk_packages(pkg.__path__, "oomguard.model."):
        mod = importlib.import_module(info.name)
        for name, where in (getattr(mod, "FITTED_CONSTANTS", None) or {}).items():
            declared += 1
            assert isinstance(getattr(mod, name, None), (int, float)), f"{info.name}.{name} is not a numeric constant"
            assert isinstance(where, str) and where.strip(), f"{info.name}.{name}: no records named"
            for lo, hi in re.findall(r"\bS(\d{3})(?:-S(\d{3}))?\b", where):
                for n in range(int(lo), int(hi or lo) + 1):
                    assert f"S{n:03d}" in ids, f"{info.name}.{name} names S{n:03d}, which is not a record"
    consts, origin = _bench().fitted_constants()
    assert declared and len(consts) == declared and "FITTED_CONSTANTS" in origin
