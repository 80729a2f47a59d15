"""--dtype reaches weights, the auto KV dtype, Mamba states and the activation element size."""


import pytest

from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.engine import resolve_dtype
from oomguard.model.planner import plan_launch


def _dtypes(cc: tuple[int, int]) -> tuple[str, ...]:
    """The GPU catalog's dtypes for a CUDA card of that compute capability (the one place they live)."""
    from oomguard.inputs.hardware import catalog_rows

    row = next(r for r in catalog_rows() if r["platform"] == "cuda" and r["cc"] == f"{cc[0]}.{cc[1]}")
    return tuple(row["dtypes"])


@pytest.fixture(scope="module")
def qwen8b():
    return load_model("Qwen/Qwen3-8B")


def test_float32_doubles_weights_kv_and_element_size(qwen8b):
    gpu = lookup_gpu("H100")
    base = plan_launch(qwen8b, gpu, {"max_model_len": 8192})
    fp32 = plan_launch(qwen8b, gpu, {"max_model_len": 8192, "dtype": "float32"})
    assert base.settings.act_dtype_bytes == 2 and fp32.settings.act_dtype_bytes == 4
    assert fp32.tight_rank.weights.bytes == pytest.approx(2 * base.tight_rank.weights.bytes, rel=1e-6)
    assert fp32.kv_bytes_per_token == 2 * base.kv_bytes_per_token
    assert fp32.layout.bytes_per_block == 2 * base.layout.bytes_per_block
    assert fp32.kv_cache_tokens < base.kv_cache_tokens / 2  # less pool, each token twice the size
    assert any("served as float32" in m for m in fp32.messages)


def test_explicit_kv_dtype_is_not_doubled(qwen8b):
    fp32 = plan_launch(qwen8b, lookup_gpu("H100"), {"max_model_len": 8192, "dtype": "float32", "kv_cache_dtype": "fp8"})
    base = plan_launch(qwen8b, lookup_gpu("H100"), {"max_model_len": 8192, "kv_cache_dtype": "fp8"})
    assert fp32.kv_bytes_per_token == base.kv_bytes_per_token


def test_hybrid_states_follow_the_served_dtype():
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    kw = dict(num_gpus=4)
    base = plan_launch(m, lookup_gpu("H200"), {"max_model_len": 8192, "tensor_parallel_size": 4}, **kw)
    fp32 = plan_launch(m, lookup_gpu("H200"), {"max_model_len": 8192, "tensor_parallel_size": 4, "dtype": "float32"}, **kw)
    assert fp32.layout.bytes_per_block == 2 * base.layout.bytes_per_block


@pytest.mark.parametrize(
    "cfg, model_type, flag, version, cc, want",
    [
        ("float32", "llama", "auto", "0.8.5", (9, 0), "float16"),  # before PR #18751: fp32 -> fp16
        ("float32", "gemma2", "auto", "0.8.5", (9, 0), "bfloat16"),  # ... except Gemma 2/3
        ("float32", "llama", "auto", "0.9.1", (9, 0), "bfloat16"),  # platform's first dtype on sm80+
        ("float32", "llama", "auto", "0.33.0", (7, 5), "float16"),  # T4: no bf16
        ("bfloat16", "llama", "auto", "0.33.0", (7, 0), "float16"),  # V100 falls back to fp16
        ("bfloat16", "gemma3", "auto", "0.33.0", (7, 5), "float32"),  # fp16 refused for Gemma 3: fp32 on T4
        ("bfloat16", "llama", "float", "0.33.0", (9, 0), "float32"),
        ("float16", "llama", "auto", "0.33.0", (9, 0), "float16"),
    ],
)
def test_auto_dtype_rules_per_release(qwen8b, cfg, model_type, flag, version, cc, want):
    from oomguard.model.engine import parse_version

    m = qwen8b._replace(dtype=cfg, model_type=model_type)
    got, _, err = resolve_dtype(m, flag, parse_version(version), _dtypes(cc), gpu_cc=cc)
    assert got == want and err is None


def test_refused_dtypes_fail_the_plan(qwen8b):
    p = plan_launch(qwen8b, lookup_gpu("T4"), {"max_model_len": 4096, "dtype": "bfloat16"})
    assert not p.starts and p.failure.value == "config-error" and "--dtype=half" in p.error
    old = plan_launch(qwen8b, lookup_gpu("T4"), {"max_model_len": 4096}, version="0.8.5")
    assert not old.starts and "Bfloat16" in old.error  # a bf16 config on sm75 before 0.9.1
    g = qwen8b._replace(model_type="gemma3")
    p = plan_launch(g, lookup_gpu("H100"), {"max_model_len": 4096, "dtype": "half"})
    assert p.failure.value == "config-error" and "does not support float16" in p.error


def test_unknown_dtype_is_an_input_error(qwen8b):
    from oomguard.errors import InputError

    with pytest.raises(InputError, match="--dtype 'fp64'"):
        plan_launch(qwen8b, lookup_gpu("H100"), {"dtype": "fp64"})


def test_matches_vllms_own_dtype_resolution(qwen8b):
    """Oracle: vLLM 0.32's _resolve_auto_dtype / _check_valid_dtype on CUDA dtype lists
    (regenerate with tests/unit/model/gen_dtype_oracle.py under an installed vLLM)."""
    import json
    from pathlib import Path

    from oomguard.model.engine import parse_version

    data = json.loads((Path(__file__).parent / "data" / "dtype_oracle_vllm-0.32.0.json").read_text())
    assert len(data["cases"]) >= 300
    for c in data["cases"]:
        m = qwen8b._replace(dtype=c["config_dtype"], model_type=c["model_type"])
        cc = tuple(c["cc"])
        got, _, err = resolve_dtype(m, c["flag"], parse_version(data["vllm"]), _dtypes(cc), gpu_cc=cc)
        assert got == c["dtype"], c
        if c["refused"]:
            assert err and c["refused"].split(".")[0] in err, c
        elif c["dtype"] == "bfloat16" and tuple(c["cc"]) < (8, 0):
            assert err and "Bfloat16" in err  # vLLM refuses it later, in check_if_supports_dtype
        else:
            assert err is None, c


def test_float32_raises_the_activation_peak(qwen8b):
    # the forward phase doubles; the sampler phase (which dominates at max_num_seqs 1024 on an
    # H100) only gains its logits' element size, since the sampler works in fp32 either way
    base = plan_launch(qwen8b, lookup_gpu("H100"), {"max_model_len": 8192})
    fp32 = plan_launch(qwen8b, lookup_gpu("H100"), {"max_model_len": 8192, "dtype": "float32"})
    assert fp32.tight_rank.activation.bytes > 1.15 * base.tight_rank.activation.bytes
