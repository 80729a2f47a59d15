"""Model input: files, directories, HF cache, catalog; refusals with one clear line."""

import json
from pathlib import Path

import pytest

from oomguard.errors import InputError, UnsupportedModelError
from oomguard.inputs.model_config import load_model


def test_catalog_id_case_insensitive():
    assert load_model("qwen/qwen3-8b").num_layers == 36


def test_config_json_path(tmp_path):
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
           "max_position_embeddings": 2048}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = load_model(str(p))
    assert m.head_size == 16 and m.num_kv_heads == 2


def test_explicit_head_dim_wins(tmp_path):
    cfg = {"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 128, "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 2048}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(tmp_path)).head_size == 128


def test_hf_cache_respects_hf_home(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (tmp_path / "hub" / "models--acme--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny" / "refs" / "main").write_text("abc123")
    (snap / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
                                                  "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 512}))
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    assert load_model("acme/tiny", allow_hub=False).num_layers == 3


def test_safetensors_header_gives_exact_bytes(tmp_path):
    import struct

    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
           "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 512, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "F32", "shape": [100, 64], "data_offsets": [0, 25600]},
                         "model.layers.0.mlp.gate_proj.weight": {"dtype": "BF16", "shape": [128, 64], "data_offsets": [25600, 41984]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    m = load_model(str(tmp_path))
    assert m.checkpoint_bytes == (100 * 64 + 128 * 64) * 2  # fp32 tensors load in the model dtype


def test_malformed_json_names_line(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{\n  "model_type": "llama",\n  "hidden_size": ,\n}\n')
    with pytest.raises(InputError) as e:
        load_model(str(p))
    assert f"{p}:3:" in str(e.value)


def test_huge_binary_file_as_config(tmp_path):
    p = tmp_path / "weights.bin"
    with open(p, "wb") as fh:
        fh.truncate(2 * 1024**3)  # sparse: 2 GB of nothing on disk
    with pytest.raises(InputError, match="not a config file"):
        load_model(str(p))


def test_unknown_architecture_is_refused_not_guessed(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mystery", "hidden_size": 64, "num_hidden_layers": 2}))
    with pytest.raises(UnsupportedModelError, match="mystery"):
        load_model(str(tmp_path))


def test_missing_model_lists_close_matches():
    with pytest.raises(InputError, match="Qwen/Qwen3-8B"):
        load_model("Qwen/Qwen3-8", allow_hub=False)


def test_hub_not_used_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="not found"):
        load_model("someone/not-in-catalog")


def test_a_bad_typed_field_an_adapter_reads_is_one_line_naming_it(tmp_path, capsys):
    """A field only one family reads (DeepSeek-V4's o_groups) given as a list reaches the adapter, whose int()
    raises: through `oomguard plan`, one line naming the file and the field, exit 2, no traceback."""
    from oomguard.cli.main import main
    from oomguard.inputs.model_config import CATALOG_DIR

    cfg = json.loads((Path(CATALOG_DIR) / "deepseek-ai__DeepSeek-V4-Flash" / "config.json").read_text())
    cfg["o_groups"] = [8]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rc = main(["plan", "--model", str(tmp_path), "--gpu", "H100-80GB", "--num-gpus", "8"])
    _, err = capsys.readouterr()
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "internal error" not in err
    assert "config.json" in err and "config field o_groups" in err


def test_a_type_error_outside_the_adapters_is_not_called_a_bad_config(tmp_path, monkeypatch):
    """The catch is narrowed to the adapters reading the config: the same TypeError from oomguard's own code after
    them (here the coverage table) is a bug, and is not reported as the user's file."""
    import oomguard.inputs.coverage_data as coverage_data

    def broken(desc):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")

    monkeypatch.setattr(coverage_data, "attach", broken)
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
           "max_position_embeddings": 2048}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(TypeError):
        load_model(str(tmp_path))


def test_every_catalog_folder_holds_a_config_json_and_mistral_7b_its_32k_window():
    # vLLM reads config.json only; the catalog once fell back to another JSON and planned Mistral-7B-v0.2 at 512
    from oomguard.inputs.model_config import CATALOG_DIR

    folders = [d for d in Path(CATALOG_DIR).iterdir() if d.is_dir()]
    assert folders and [d.name for d in folders if not (d / "config.json").is_file()] == []
    assert load_model("mistralai/Mistral-7B-Instruct-v0.2").max_position_embeddings == 32768


def test_a_directory_without_config_json_is_refused_naming_what_it_holds(tmp_path):
    (tmp_path / "params.json").write_text('{"dim": 4096}')  # Mistral's own format: not a transformers config
    with pytest.raises(InputError, match=r"no config.json in the model directory \(it holds params.json\)"):
        load_model(str(tmp_path))

def _sweep_config(arch: str) -> dict:
    """A class-default config of the registry sweep (transformers' own defaults for that architecture)."""
    data = json.loads((Path(__file__).resolve().parents[2] / "data" / "oracle" / "sweep_vllm-0.32.0.json").read_text())
    return next(c["config"] for c in data["cases"] if c["id"] == arch)


@pytest.mark.parametrize("arch, field, value, needle", [
    # more heads than hidden channels: hidden // heads is a head size of 0 (Falcon-H1 divided by it in the
    # hybrid block size: ZeroDivisionError; Llama planned a model with 0 B of KV per token)
    ("FalconH1ForCausalLM", "num_attention_heads", 320000, "config fields hidden_size, num_attention_heads"),
    ("LlamaForCausalLM", "num_attention_heads", 320000, "config fields hidden_size, num_attention_heads"),
    # the MLA adapter passed q_lora_rank on unread; the weights' arithmetic raised TypeError on a list
    ("Glm4MoeLiteForCausalLM", "q_lora_rank", [1], "config field q_lora_rank"),
    # CLIP's projections: int(1e308) reached a float division (OverflowError)
    ("CLIPModel", "projection_dim", 1e308, "config field projection_dim"),
    ("FalconH1ForCausalLM", "mamba_d_state", -1, "config field mamba_d_state"),
    ("WhisperForConditionalGeneration", "decoder_layers", 2.5, "config field decoder_layers"),
    # int(1e308) reached a float conversion in the weights (OverflowError)
    ("SiglipModel", "text_config.projection_size", 1e308, "config field text_config.projection_size"),
    # a negative merge left the vision profile 0 tokens an item, then divided by them (ZeroDivisionError)
    ("Ernie4_5_VLMoeForConditionalGeneration", "vision_config.spatial_merge_size", -1000000,
     "config field vision_config.spatial_merge_size"),
])
def test_hostile_sizes_of_the_new_adapters_are_one_line_naming_the_field(tmp_path, capsys, arch, field, value, needle):
    from oomguard.cli.main import main

    cfg = _sweep_config(arch)
    scope, _, name = field.rpartition(".")
    (cfg[scope] if scope else cfg)[name] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rc = main(["plan", "--model", str(tmp_path), "--gpu", "H100", "--format", "json"])
    _, err = capsys.readouterr()
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "internal error" not in err
    assert "config.json" in err and needle in err


def test_a_deep_pure_mamba_model_plans_in_linear_time(tmp_path, capsys):
    """Each Mamba layer looked for the model's first attention layer over all layers: n^2 on a pure-Mamba
    model (8,000 layers took ~16 s of CPU, 20,000 six minutes of wall time at load 8)."""
    import time

    from oomguard.cli.main import main

    cfg = _sweep_config("FalconMambaForCausalLM")
    cfg["num_hidden_layers"] = 8000
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    t0 = time.process_time()
    rc = main(["plan", "--model", str(tmp_path), "--gpu", "H100", "--format", "json"])
    took = time.process_time() - t0
    capsys.readouterr()
    assert rc in (0, 1) and took < 3.0, took


@pytest.mark.parametrize("cross", [[-5, 3], [3, 40], [3, 3], [1.5], "3,8", [[3]]])
def test_mllama_cross_attention_layers_outside_the_decoder_are_refused(tmp_path, capsys, cross):
    """Indices outside the 40 decoder layers (or repeated) were counted as cross-attention layers and planned."""
    from oomguard.cli.main import main
    from oomguard.inputs.model_config import CATALOG_DIR

    cfg = json.loads((Path(CATALOG_DIR) / "meta-llama__Llama-3.2-11B-Vision-Instruct" / "config.json").read_text())
    cfg["text_config"]["cross_attention_layers"] = cross
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rc = main(["plan", "--model", str(tmp_path), "--gpu", "H100", "--vllm-version", "0.8.5"])
    _, err = capsys.readouterr()
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err
    assert "config.json" in err and "config field text_config.cross_attention_layers" in err


def test_a_vision_merge_wider_than_the_image_is_planned_as_one_token_an_item(tmp_path, capsys):
    """ERNIE-4.5-VL with a spatial merge past the patch grid: 0 tokens an item, divided by (ZeroDivisionError)."""
    from oomguard.cli.main import main

    cfg = _sweep_config("Ernie4_5_VLMoeForConditionalGeneration")
    cfg["vision_config"]["spatial_merge_size"] = 1000000
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rc = main(["plan", "--model", str(tmp_path), "--gpu", "H100", "--format", "json"])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    assert "internal error" not in err and json.loads(out)
