"""The generic path: a model_type no adapter is checked on gets a plan, marked, with assumptions and
ranges, through every command that plans; what it cannot read is refused with the reason (exit 3)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

MARK = "generic: acme_lm is not checked against vLLM's code for this architecture"
ACME = {
    "model_type": "acme_lm", "architectures": ["AcmeForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 50304, "intermediate_size": 5632,
    "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}


@pytest.fixture
def acme(tmp_path):
    d = tmp_path / "acme"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(ACME))
    return d


def _describe(config: dict, **kw):
    from oomguard.inputs.model_config import describe_config

    return describe_config(config, source="test.json", **kw)


def test_standard_fields_become_a_generic_description_with_its_assumptions():
    m = _describe(ACME)
    assert m.family == "generic" and m.coverage == "generic"
    assert (m.hidden_size, m.num_layers, m.num_attention_heads, m.num_kv_heads, m.head_size) == (2048, 24, 16, 4, 128)
    assert len(m.layers) == 24 and all(layer.kind.value == "full" for layer in m.layers)
    assert any("4 KV heads of size 128" in a for a in m.assumptions)
    assert any("gated, 3 matrices" in a for a in m.assumptions)
    assert (m.coverage_detail or {}).get("level") == "generic"


def test_generic_reads_experts_windows_and_multi_query():
    moe = _describe(dict(ACME, num_experts=64, num_experts_per_tok=6, moe_intermediate_size=1024, first_k_dense_replace=1,
                         sliding_window=4096))
    assert moe.moe.num_experts == 64 and moe.moe.top_k == 6 and moe.moe.num_moe_layers == 23
    assert all(layer.kind.value == "sliding_window" and layer.sliding_window == 4096 for layer in moe.layers)
    mqa = _describe(dict(ACME, multi_query=True, num_key_value_heads=None))
    assert mqa.num_kv_heads == 1
    relu2 = _describe(dict(ACME, hidden_act="relu2"))
    assert any("not gated (relu2), 2" in a for a in relu2.assumptions)


@pytest.mark.parametrize("extra,needle", [
    ({"state_size": 16, "conv_kernel": 4}, "state-space"),
    ({"is_encoder_decoder": True, "encoder_layers": 6}, "encoder-decoder"),
    ({"num_key_value_heads": [4] * 24}, "per-layer list"),
    ({"layer_types": ["mamba"] * 24}, "not standard attention"),
])
def test_what_generic_cannot_read_is_refused_with_the_reason(tmp_path, extra, needle):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(ACME, **extra)))
    out = run_cli("plan", "--model", str(d), "--gpu", "H100")
    assert out.returncode == 3, out.stderr
    line = out.stderr.strip()
    assert "\n" not in line and needle in line and "Traceback" not in line


def test_a_bidirectional_encoder_gets_a_generic_plan_without_a_kv_cache(tmp_path):
    # token-type embeddings mark a BERT-style encoder: vLLM serves it with the pooling runner and
    # no KV cache; the generic path plans it so, with its mark (it was refused before plan19)
    from oomguard.inputs.model_config import describe_config

    m = describe_config(dict(ACME, type_vocab_size=2, model_type="acme_bert"), source="t", name="t")
    assert m.coverage == "generic" and m.pooling and all(layer.kind.value == "none" for layer in m.layers)
    assert any("no KV cache" in a for a in m.assumptions) and any("token-type" in a for a in m.assumptions)
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(ACME, type_vocab_size=2)))
    out = run_cli("plan", "--model", str(d), "--gpu", "H100")
    assert out.returncode == 0, out.stderr
    assert "generic: " in out.stdout and "Traceback" not in out.stderr


def test_missing_standard_size_is_refused_not_guessed():
    from oomguard.errors import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match="none of hidden_size"):
        _describe({k: v for k, v in ACME.items() if k != "hidden_size"})


def test_plan_text_and_json_carry_the_mark_assumptions_and_ranges(acme):
    out = run_cli("plan", "--model", str(acme), "--gpu", "H100", "--max-model-len", "8192")
    assert out.returncode == 0, out.stderr
    assert MARK in out.stdout and "assumptions:" in out.stdout and "ranges:" in out.stdout
    js = run_cli("plan", "--model", str(acme), "--gpu", "H100", "--max-model-len", "8192", "--json")
    assert js.returncode == 0
    plan = json.loads(js.stdout)
    cov = plan["coverage"]
    assert cov["level"] == "generic" and cov["mark"] == MARK and cov["assumptions"]
    rg = cov["ranges"]
    assert rg["kv_cache_tokens"][0] <= plan["kv_cache_tokens"] <= rg["kv_cache_tokens"][1]
    assert rg["weights_gib"][0] <= plan["per_gpu"]["weights_gib"] <= rg["weights_gib"][1]
    weights = next(t for t in plan["per_gpu"]["terms"] if t["name"] == "weights")
    assert weights["estimate"] is True  # a generic weight count is never presented as exact


def test_check_fit_and_diagnose_show_the_mark(acme, tmp_path):
    chk = run_cli("check", "--model", str(acme), "--gpu", "H100", "--format", "json", "--", "vllm", "serve", str(acme),
                  "--max-model-len", "8192")
    assert chk.returncode in (0, 1), chk.stderr
    report = json.loads(chk.stdout)
    assert report["coverage"]["mark"] == MARK
    assert any(n.startswith(MARK) for n in report["notes"])
    txt = run_cli("check", "--model", str(acme), "--gpu", "H100", "--", "vllm", "serve", str(acme), "--max-model-len", "8192")
    assert MARK in txt.stdout + txt.stderr
    fit = run_cli("fit", "--model", str(acme), "--gpu", "H100", "--context", "8192", "--format", "json")
    assert fit.returncode in (0, 1), fit.stderr
    assert any(MARK in n for n in json.loads(fit.stdout)["notes"])
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': '%s', 'max_model_len': 8192}\n"
        "ERROR 01-01 00:00:05 [core.py:1] ValueError: To serve at least one request with the models's max seq len "
        "(8192), (0.38 GiB KV cache is needed, which is larger than the available KV cache memory (0.10 GiB). "
        "Based on the available memory, the estimated maximum model length is 2048. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n" % acme)
    diag = run_cli("diagnose", str(log), "--model", str(acme), "--gpu", "H100", "--format", "json")
    assert diag.returncode in (0, 1), diag.stderr
    assert MARK in diag.stdout


def test_the_generic_path_on_a_native_architecture_is_close_to_the_adapter():
    """force_generic: what the sweep measures on every architecture. On a Llama-shaped model the
    generic reading and the adapter agree on the KV cache."""
    from oomguard.inputs.model_config import load_model
    from oomguard.model.kv_spec import layer_kv_specs, per_token_bytes

    native = load_model("Qwen/Qwen3-8B", allow_hub=False)
    import json as _json
    from pathlib import Path

    cfg = _json.loads((Path(__file__).resolve().parents[3] / "src/oomguard/data/models/Qwen__Qwen3-8B/config.json").read_text())
    generic = _describe(cfg, force_generic=True)
    assert generic.coverage == "generic" and native.coverage == "native"
    assert per_token_bytes(layer_kv_specs(generic)) == per_token_bytes(layer_kv_specs(native))


def test_real_config_shapes_the_generic_path_reads_instead_of_refusing():
    """Shapes published configs have that the generic path refused before plan19: per-layer MLP widths
    (Gemma-3n), DSA "indexed_attention" layers (GLM-5, HY-V4), per-modality expert lists and
    mlp_layer_types (ERNIE-4.5-VL), the last layers sharing KV caches."""
    from oomguard.inputs.model_config import describe_config

    widths = dict(ACME, intermediate_size=[4096] * 12 + [8192] * 12)
    m = describe_config(widths, source="t", name="t")
    assert m.coverage == "generic" and m.intermediate_size == 6144  # the mean: the layers' MLP params exactly
    idx = describe_config(dict(ACME, layer_types=["full_attention", "indexed_attention"] * 12), source="t", name="t")
    assert all(layer.kind.value == "full" for layer in idx.layers) and any("indexed" in a for a in idx.assumptions)
    moe = describe_config(dict(ACME, moe_num_experts=[64, 64], moe_intermediate_size=[1536, 512], moe_k=6,
                               mlp_layer_types=["dense"] + ["sparse"] * 23), source="t", name="t")
    assert moe.moe.num_experts == 64 and moe.moe.expert_intermediate_size == 1536 and moe.moe.num_moe_layers == 23
    assert not moe.layers[0].moe and moe.layers[1].moe
    shared = describe_config(dict(ACME, num_kv_shared_layers=8), source="t", name="t")
    assert sum(layer.kv_shared for layer in shared.layers) == 8 and not shared.layers[15].kv_shared


def test_kda_linear_attention_with_mla_is_a_hybrid_generic_plan():
    # Kimi-Linear (transformers 5 config shape): KDA layers from layer_types with one head count and
    # size, MLA full-attention layers, experts under their common aliases
    from oomguard.inputs.model_config import describe_config

    cfg = {"model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"], "hidden_size": 2304,
           "num_hidden_layers": 4, "num_attention_heads": 32, "vocab_size": 163840, "intermediate_size": 9216,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
           "layer_types": ["linear_attention"] * 3 + ["full_attention"], "linear_num_heads": 32, "linear_head_dim": 128,
           "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1, "moe_intermediate_size": 1024,
           "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"], "torch_dtype": "bfloat16"}
    m = describe_config(cfg, source="t", name="t")
    assert m.coverage == "generic" and [layer.kind.value for layer in m.layers] == ["mamba"] * 3 + ["mla"]
    st = m.layers[0].mamba
    assert st.conv_dim == 3 * 32 * 128 and st.num_heads == 32 and st.head_k_dim == st.head_v_dim == 128
    assert m.moe.num_experts == 256 and m.moe.num_moe_layers == 3 and not m.layers[0].moe
