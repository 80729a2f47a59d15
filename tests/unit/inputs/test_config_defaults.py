"""Configs are read as vLLM reads them: through the config class's defaults (AutoConfig).

The defaults are data (src/oomguard/data/config_defaults.json, scripts/gen_config_defaults.py);
these tests use real model_types of that file and the real loader on real files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oomguard.inputs import config_defaults as cd
from oomguard.inputs.model_config import describe_config, load_model

ROOT = Path(__file__).resolve().parents[3]
ARCH_DIR = ROOT / "src" / "oomguard" / "model" / "architectures"


@pytest.fixture(autouse=True)
def _data_only(monkeypatch):
    """The committed data, not a transformers that may happen to be importable here."""
    monkeypatch.setenv("OOMGUARD_NO_TRANSFORMERS", "1")
    cd._installed_transformers.cache_clear()
    yield
    cd._installed_transformers.cache_clear()


def test_nested_text_config_missing_heads_takes_the_sub_config_class_defaults():
    # A Gemma-3 checkpoint's nested text_config as save_pretrained writes it: a diff against
    # Gemma3TextConfig, so the fields equal to its defaults are absent.
    entry, _ = cd.entry("gemma3_text")
    heads = entry["defaults"]["num_attention_heads"]
    config = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
              "text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "num_hidden_layers": 34,
                              "intermediate_size": 10240, "sliding_window": 1024, "vocab_size": 262208},
              "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "num_hidden_layers": 27,
                                "image_size": 896, "patch_size": 14, "intermediate_size": 4304}}
    filled, applied = cd.with_defaults(config)
    assert filled["text_config"]["num_attention_heads"] == heads
    assert any(line.startswith("text_config.num_attention_heads = ") and "Gemma3TextConfig default" in line for line in applied)
    m = describe_config(config, source="gemma3.json")
    assert m.num_attention_heads == heads and m.hidden_size == 2560
    assert m.head_size == entry["defaults"]["head_dim"]  # not hidden / heads: the class declares head_dim
    assert m.coverage == "native"
    assert any("num_attention_heads" in line for line in m.defaults_applied)


def test_text_config_without_model_type_takes_the_wrappers_default_sub_type():
    # LLaVA-style: text_config names no model_type; LlavaConfig builds a LlamaConfig from it.
    config = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
              "text_config": {"hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 32064,
                              "num_attention_heads": 32},
              "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24, "image_size": 336, "patch_size": 14,
                                "intermediate_size": 4096}}
    filled, applied = cd.with_defaults(config)
    sub = filled["text_config"]
    assert sub["model_type"] == cd.entry("llava")[0]["sub_configs"]["text_config"] == "llama"
    assert sub["intermediate_size"] == cd.entry("llama")[0]["defaults"]["intermediate_size"]
    assert "text_config.model_type = 'llama' (LlavaConfig default, transformers" in " ".join(applied)


def test_fields_the_class_derives_are_left_to_the_adapters():
    # LlamaConfig declares num_key_value_heads = None and derives it from the heads in __post_init__:
    # a class default of 32 would be wrong for a 64-head config.
    assert "num_key_value_heads" not in cd.entry("llama")[0]["defaults"]
    m = describe_config({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 8192,
                         "num_hidden_layers": 4, "num_attention_heads": 64, "vocab_size": 32000,
                         "intermediate_size": 28672}, source="llama.json")
    assert m.num_kv_heads == 64


def test_aliases_are_readable_under_both_names():
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 1600, "n_layer": 48, "n_head": 25,
              "vocab_size": 50257}
    filled, _ = cd.with_defaults(config)
    assert filled["hidden_size"] == 1600 and filled["num_hidden_layers"] == 48 and filled["num_attention_heads"] == 25
    assert filled["max_position_embeddings"] == filled["n_positions"] == cd.entry("gpt2")[0]["defaults"]["max_position_embeddings"]


def test_a_legacy_top_level_language_model_gets_no_invented_text_config():
    # Qwen2-VL checkpoints keep the LM's fields at the top level; its class builds text_config from
    # them, so no default text_config may be filled in beside them.
    m = load_model("Qwen/Qwen2-VL-2B-Instruct-AWQ", allow_hub=False)
    raw = json.loads((ROOT / "src/oomguard/data/models/Qwen__Qwen2-VL-2B-Instruct-AWQ/config.json").read_text())
    assert "text_config" not in raw or raw["text_config"].get("hidden_size") == m.hidden_size
    assert m.hidden_size == raw.get("hidden_size", m.hidden_size)


def test_an_explicit_value_is_never_replaced():
    config = {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
              "num_hidden_layers": 2, "num_attention_heads": 32, "vocab_size": 32000, "sliding_window": None}
    filled, applied = cd.with_defaults(config)
    assert filled["sliding_window"] is None
    assert not any(line.startswith("sliding_window") for line in applied)
    # absent, the class default applies, as AutoConfig gives vLLM (MistralConfig: 4096)
    del config["sliding_window"]
    filled, _ = cd.with_defaults(config)
    assert filled["sliding_window"] == cd.entry("mistral")[0]["defaults"]["sliding_window"]


def test_unknown_model_type_is_left_alone():
    config = {"model_type": "no_such_type_xyz", "hidden_size": 8}
    assert cd.with_defaults(config) == (config, [])


def test_data_is_small_and_names_its_release():
    doc = json.loads(Path(cd.DATA_FILE).read_text())
    assert Path(cd.DATA_FILE).stat().st_size < 200_000
    assert doc["releases"] and all(re.fullmatch(r"\d+\.\d+\.\d+", r) for r in doc["releases"])
    rel = doc["releases"][cd.data_release()]
    assert {"llama", "qwen3", "gemma3", "gemma3_text", "mistral", "llava"} <= set(rel["model_types"])
    for entry in rel["model_types"].values():
        assert set(entry["defaults"]) <= set(cd.PLAN_FIELDS) | {"rope_scaling", "rope_parameters"}


def test_every_field_an_adapter_reads_is_a_plan_field():
    """Validation and defaults cover PLAN_FIELDS; an adapter reading a field outside it would get
    neither (a new adapter must add its fields there)."""
    read: set[str] = set()
    for path in ARCH_DIR.glob("*.py"):
        text = path.read_text()
        read |= set(re.findall(r"\bcfg\.get\(\"([a-z_0-9]+)\"", text))
        read |= set(re.findall(r"\bcfg\[\"([a-z_0-9]+)\"\]", text))
        for args in re.findall(r"need\(cfg((?:, \"[a-z_0-9]+\")+)", text):
            read |= set(re.findall(r"\"([a-z_0-9]+)\"", args))
    structures = {"layer_types", "mlp_only_layers", "rope_scaling", "rope_parameters", "quantization_config",
                  "model_type", "architectures", "text_config", "vision_config", "audio_config", "layers_block_type",
                  "hybrid_override_pattern", "ssm_cfg", "new_decoder_architecture", "type_vocab_size",
                  "global_attn_every_n_layers", "is_causal", "compress_ratios", "per_layer_config", "mlp_layer_types"}
    missing = sorted(read - set(cd.PLAN_FIELDS) - structures)
    assert not missing, f"adapter fields outside config_defaults.PLAN_FIELDS: {missing}"
