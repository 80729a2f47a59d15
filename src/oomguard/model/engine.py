"""Resolve the engine settings vLLM will actually use, per version and GPU.

Flags the user set win; otherwise vLLM's defaults apply, several of which
depend on the release, the GPU's memory and the usage context (``vllm serve``
vs the ``LLM`` class). Sources: docs/memory-model.md#engine-defaults
(``engine/arg_utils.py::_set_default_max_num_seqs_and_batched_tokens_args``,
``config/cache.py``, ``config/vllm.py``).
"""

from __future__ import annotations

import json
import math

from oomguard.errors import InputError
from oomguard.numbers import MAX_GPUS, NumberError, as_int, parse_int
from oomguard.model.description import DTYPE_BYTES, LayerKind, ModelDescription
from oomguard.records import NamedTuple
from oomguard.units import GiB

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

NEWEST = "0.33.0"


def parse_version(v: str | None) -> tuple[int, int, int]:
    if not v or v in ("latest", "newest"):
        v = NEWEST
    parts = str(v).lstrip("v").split("+")[0].split(".")
    nums = []
    for p in parts[:3]:
        digits = "".join(ch for ch in p if "0" <= ch <= "9")[:9]  # ASCII, bounded: no release number is longer
        nums.append(int(digits) if digits else 0)
    while len(nums) < 3:
        nums.append(0)
    return (nums[0], nums[1], nums[2])


class EngineSettings(NamedTuple):
    """The engine settings vLLM derives from a launch for one release: the inputs of every memory term."""
    version: tuple[int, int, int]
    engine: str  # "V0" | "V1"
    gpu_memory_utilization: float
    max_model_len: int
    max_model_len_source: str
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    enforce_eager: bool
    cudagraph_mode: str
    kv_cache_dtype: str
    block_size: int | None  # None = default (16 / backend / hybrid)
    kv_cache_memory_bytes: int | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    expert_parallel: bool
    num_speculative_tokens: int
    speculative_method: str | None
    cpu_offload_gb: float
    swap_space_gib: float
    estimate_cudagraphs: bool  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS in effect
    model_runner_v2: bool
    async_scheduling: bool
    disable_hybrid_kv_cache_manager: bool
    num_gpu_blocks_override: int | None
    max_cudagraph_capture_size: int
    num_capture_sizes: int
    allow_long_max_model_len: bool
    dtype: str = "bfloat16"  # the dtype vLLM runs the model in (--dtype, auto rules per release)
    act_dtype_bytes: int = 2  # element size of weights, activations and the auto KV cache
    dtype_error: str | None = None  # vLLM refuses this dtype on this GPU / model type
    mm_profile: bool = True  # multimodal encoder profiled (off with --limit-mm-per-prompt all 0 / --language-model-only)
    runner: str = ""  # "pooling" (or a pooling --task / --convert) when asked; architectures decide otherwise
    notes: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def max_concurrent_batches(self) -> int:
        """Batches whose tokens a sliding-window / chunked-local cache keeps reserved per request
        (``max_in_flight_tokens = max_concurrent_batches × T``, config/vllm.py @0.32: async
        scheduling keeps 2 in flight on the V1 runner at PP 1 and PP + 1 on MRV2; else PP).
        Before PR #47728 (free on the processed-token basis) the reservation was one batch
        (``sliding_window − 1 + max_num_batched_tokens``)."""
        if self.version < IN_FLIGHT_RESERVATION_SINCE:
            return 1
        pp = self.pipeline_parallel_size
        if self.async_scheduling:
            if self.model_runner_v2:
                return pp + 1
            if pp <= 1:
                return 2
        return pp


# PR #47728 (merged 2026-07-06) made sliding-window caches reserve every in-flight batch. First
# release ASSUMED from the records: 0.25.1 reserves one batch (S018, pinned tokens exact), 0.27.1
# two (S072: DeepSeek-V4-Flash at TP 2, 7.66x logged = 54,113 blocks / 7,066 per request);
# 0.26 is not pinned by a record.
IN_FLIGHT_RESERVATION_SINCE = (0, 27, 0)
MAMBA2_CHECKPOINT_BLOCK_SINCE = (0, 32, 0)
# async_scheduling defaults to None ("on unless incompatible") from 0.14 (flag tables).
ASYNC_SCHEDULING_AUTO_SINCE = (0, 14, 0)
# Speculative methods with which config/vllm.py keeps async scheduling on (EagleModelTypes,
# NgramGPUTypes, draft_model, dspark, dflash); any other method turns it off.
ASYNC_SPEC_METHODS = ("eagle", "eagle3", "mtp", "deepseek_mtp", "qwen3_next_mtp", "ernie_mtp", "glm4_moe_mtp",
                      "longcat_flash_mtp", "ngram_gpu", "draft_model", "draft", "dspark", "dflash")


def async_scheduling_on(v: tuple[int, int, int], flags: dict, spec_method: str | None, pp: int, mrv2: bool,
                        pooling: bool = False) -> bool:
    """config/vllm.py::VllmConfig.__post_init__ (0.32): async scheduling on unless asked off,
    a pooling runner, a speculative method it does not support, or PP on the V1 runner."""
    flag = flags.get("async_scheduling")
    if flag is not None:
        return bool(flag)
    if v < ASYNC_SCHEDULING_AUTO_SINCE or pooling:
        return False
    if spec_method and spec_method not in ASYNC_SPEC_METHODS:
        return False
    return not (pp > 1 and not mrv2)


def _pooling_run(model, flags: dict) -> bool:
    """The pooling runner: asked for, or the architecture's default (--runner generate overrides it)."""
    if str(flags.get("runner") or "").lower() == "generate":
        return False
    return bool(model.pooling) or _runner(flags) == "pooling"


def _runner(flags: dict) -> str:
    """--runner pooling, or the older --task embed|score|classify|reward / --convert embed|classify spellings."""
    for key in ("runner", "task", "convert"):
        v = str(flags.get(key) or "").lower()
        if v in ("pooling", "embed", "embedding", "score", "classify", "reward"):
            return "pooling"
    return ""


def default_utilization(version: tuple[int, ...]) -> float:
    """vLLM's --gpu-memory-utilization default, from the release's flag table (0.9 → 0.92 in 0.20)."""
    from oomguard.versions import get_release

    v = tuple(version) + (0,) * (3 - len(version))
    try:
        default = get_release(".".join(map(str, v[:3]))).flags["gpu_memory_utilization"].default
    except Exception:  # noqa: BLE001 - a version outside the tables: fall back to the documented rule
        default = None
    if isinstance(default, (int, float)):
        return float(default)
    return 0.92 if v >= (0, 20, 0) else 0.9


def default_batch_limits(version: tuple[int, int, int], total_bytes: int, gpu_name: str, *, usage: str = "serve", chunked: bool = True) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) defaults before the S·L cap (docs/memory-model.md#engine-defaults;
    engine/arg_utils.py::_set_default_max_num_seqs_and_batched_tokens_args)."""
    gib = total_bytes / GiB
    serve = usage == "serve"
    if version < (0, 8, 0):
        return (512 if version < (0, 7, 0) else 2048) if chunked else 2048, 256
    if version >= (0, 28, 0) and gib >= 160:
        return 16384, 1024
    a100_excluded = version >= (0, 10, 0) and gpu_name.startswith("A100")
    if gib >= 70 and not a100_excluded and "GB10" not in gpu_name:
        return (8192 if serve else 16384), 1024
    return (2048 if serve else 8192), 256


# vLLM's CUDAGraphMode names (config/compilation.py), the values --compilation-config cudagraph_mode takes.
CUDAGRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")


def capture_sizes(max_size: int, num_seqs: int, tokens: int) -> list[int]:
    """``[1,2,4] + range(8, min(M+1,256), 8) + range(256, M+1, 16)`` (config/vllm.py)."""
    sizes = [s for s in (1, 2, 4) if s <= max_size]
    sizes += list(range(8, min(max_size + 1, 256), 8))
    sizes += list(range(256, max_size + 1, 16))
    if tokens <= max_size and tokens not in sizes:
        sizes.append(tokens)
    return sorted(set(sizes))


def num_capture_sizes(max_size: int, tokens: int) -> int:
    """``len(capture_sizes(max_size, _, tokens))`` in closed form: a size from a flag or a JSON config
    may be 2**53, and the list itself would not fit in memory."""
    m = max(0, int(max_size))
    n = sum(1 for s in (1, 2, 4) if s <= m)
    n += min(m, 255) // 8 if m >= 8 else 0  # 8, 16, ..., up to 248
    n += (m - 256) // 16 + 1 if m >= 256 else 0  # 256, 272, ..., up to m
    listed = (tokens in (1, 2, 4) and tokens <= m) or (8 <= tokens <= min(m, 255) and tokens % 8 == 0) \
        or (256 <= tokens <= m and (tokens - 256) % 16 == 0)
    return n + (1 if tokens <= m and not listed else 0)


# A CUDA-graph capture size is a batch size: vLLM's defaults stop at 512-1024; a list of sizes is
# built up to the largest, so it is bounded (a max of 10^12 would build 6 * 10^10 sizes).
MAX_CAPTURE_SIZE = 1 << 20
MAX_CAPTURE_SIZES = 4096
MAX_SPECULATIVE_TOKENS = 1024


def _config_int(value: Any, where: str, *, lo: int, hi: int) -> int:
    """A number from a JSON-valued flag (the launch reader types the JSON, not its fields)."""
    try:
        return as_int(value, lo=lo, hi=hi, strings=True)
    except NumberError as exc:
        raise InputError(f"{where}: {exc}") from None


def _int_list(value: Any) -> list[int] | None:
    """A size list as argparse, JSON or a shell string gives it ("1 2 4", "1,2,4", [1, 2, 4])."""
    if value in (None, "", [], ()):
        return None
    items = value if isinstance(value, (list, tuple)) else str(value).replace(",", " ").replace("[", " ").replace("]", " ").split()
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "…"
    if len(items) > MAX_CAPTURE_SIZES:
        raise InputError(f"CUDA-graph capture sizes {shown}: more than {MAX_CAPTURE_SIZES} sizes")
    try:
        out = sorted({as_int(x, lo=1, hi=MAX_CAPTURE_SIZE, strings=True) for x in items})
    except (TypeError, NumberError) as exc:
        raise InputError(f"CUDA-graph capture sizes {shown}: not a list of integers from 1 to "
                         f"{MAX_CAPTURE_SIZE:,} ({exc})") from None
    return out or None


def _json(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            out = json.loads(value)
        except ValueError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def check_world(model: ModelDescription, tp: int, pp: int, dp: int, partition: str | None = None) -> None:
    """Refuse, before any per-stage work, a parallel layout no deployment has: more than
    ``MAX_GPUS`` GPUs in all, more pipeline stages than layers, or a VLLM_PP_LAYER_PARTITION
    that vLLM itself rejects (distributed/utils.py::get_pp_indices)."""
    world = tp * pp * max(1, dp)
    if world > MAX_GPUS:
        raise InputError(f"--tensor-parallel-size {tp} × --pipeline-parallel-size {pp} × --data-parallel-size {dp} "
                         f"= {world:,} GPUs, more than the {MAX_GPUS:,} oomguard plans for "
                         "(vLLM's largest deployments use a few thousand)")
    if pp > model.num_layers:
        raise InputError(f"--pipeline-parallel-size {pp} is more than the model's {model.num_layers} layers "
                         "(vLLM gives each pipeline stage a share of the layers: distributed/utils.py::get_pp_indices)")
    if partition:
        try:
            parts = [parse_int(x, lo=0, hi=model.num_layers) for x in partition.split(",")]
        except NumberError as exc:
            raise InputError(f"VLLM_PP_LAYER_PARTITION={partition[:60]!r}: invalid partition string ({exc})") from None
        if len(parts) != pp:
            raise InputError(f"VLLM_PP_LAYER_PARTITION has {len(parts)} entries but --pipeline-parallel-size is {pp} "
                             "(vLLM: len(partitions) does not match pp_size)")
        if sum(parts) != model.num_layers:
            raise InputError(f"VLLM_PP_LAYER_PARTITION sums to {sum(parts)} layers but the model has {model.num_layers} "
                             "(vLLM: sum(partitions) does not match num_hidden_layers)")


def engine_for(v: tuple[int, int, int], env, *, gpu_cc: tuple[int, int] | None = None, quantization: str | None = None) -> tuple[str, str | None]:
    """("V0" | "V1", why it fell back) for a release: V0 before 0.8; from 0.8 V1 unless VLLM_USE_V1=0,
    or (0.8-0.9) a CUDA GPU below compute capability 8.0, or (0.8) bitsandbytes weights; V1 only
    from 0.11 (the V0 code is gone). ``gpu_cc`` None: a GPU V1 runs on (sm80+, or not CUDA).
    The one rule the planner and the host-RAM model (swap space is V0's) share."""
    if v < (0, 8, 0):
        if str((env or {}).get("VLLM_USE_V1", "0")) == "1":
            # the opt-in V1 alpha of 0.7.x is not modelled; saying so beats planning it silently as V0
            # (whose baseline leaves other processes out, where V1 then charged them to the budget)
            return "V0", ("VLLM_USE_V1=1 before vLLM 0.8 (the opt-in V1 alpha) is not modelled: planned with V0's "
                          "accounting; --vllm-version 0.8.0 plans V1's early accounting")
        return "V0", None
    if v >= (0, 11, 0):
        return "V1", None
    if str((env or {}).get("VLLM_USE_V1", "1")) == "0":
        return "V0", None
    if gpu_cc is not None and gpu_cc < (8, 0) and v < (0, 10, 0):
        return "V0", "compute capability < 8.0: vLLM 0.8-0.9 falls back to the V0 engine"
    if quantization == "bitsandbytes" and v < (0, 9, 0):
        return "V0", None
    return "V1", None


def resolve(
    model: ModelDescription,
    flags: dict,
    env: dict,
    *,
    version: str | None,
    gpu=None,
    gpu_total_bytes: int | None = None,
    gpu_name: str | None = None,
    gpu_cc: tuple[int, int] = (9, 0),
    usage: str = "serve",
) -> EngineSettings:
    """vLLM's resolved settings for a launch. ``gpu`` is a catalog GPU (``inputs.hardware.GPU``):
    its total, name, capability and dtypes; the loose ``gpu_*`` keywords serve callers that
    have no catalog card (the dtypes are then the platform interface's default)."""
    if gpu is not None:
        gpu_total_bytes, gpu_name, gpu_cc = gpu.total_bytes, gpu.name, gpu.cc_major_minor
    if gpu_total_bytes is None or gpu_name is None:
        raise TypeError("resolve() needs gpu= or gpu_total_bytes= and gpu_name=")
    dtypes = tuple(getattr(gpu, "dtypes", None) or PLATFORM_DEFAULT_DTYPES)
    v = parse_version(version)
    notes: list[str] = []
    tp = int(flags.get("tensor_parallel_size") or 1)
    pp = int(flags.get("pipeline_parallel_size") or 1)
    dp = int(flags.get("data_parallel_size") or 1)
    if tp < 1 or pp < 1:
        raise InputError("--tensor-parallel-size and --pipeline-parallel-size must be >= 1")
    if model.served_until is not None and v > model.served_until[0]:
        from oomguard.errors import UnsupportedModelError

        # vLLM itself refuses the architecture at this release: its reason, not a plan
        raise UnsupportedModelError(f"{model.source}: vLLM {'.'.join(map(str, v))}: {model.served_until[1]}")
    check_world(model, tp, pp, dp, env.get("VLLM_PP_LAYER_PARTITION"))
    engine, why = engine_for(v, env, gpu_cc=gpu_cc if getattr(gpu, "platform", "cuda") == "cuda" else None,
                             quantization=model.quantization.method)
    if model.v0_only and engine != "V0":
        engine, why = "V0", (f"{model.architecture or model.model_type} runs on the V0 encoder-decoder runner only "
                             "(V1 takes no encoder-decoder models before 0.11): planned with V0")
    if why:
        notes.append(why)
    util = flags.get("gpu_memory_utilization")
    if util is None:
        util = default_utilization(v)
    util = float(util)
    if not 0 < util <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")

    # max_model_len (config/model.py::_get_and_verify_max_len)
    derived = derive_len(model, v)
    allow_long = str(env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0")) in ("1", "true", "True")
    raw_len = flags.get("max_model_len")
    if raw_len in (None, -1, "-1", "auto"):
        max_len, len_src = derived, "derived from the model config"
        short = longrope_default_len(model, v)
        if short is not None:
            max_len, len_src = short, "LongRoPE default: original_max_position_embeddings"
        if raw_len in (-1, "-1", "auto"):
            len_src = "auto-fit (-1/auto)"
    else:
        max_len, len_src = int(raw_len), "--max-model-len"

    spec = _json(flags.get("speculative_config"))
    num_spec = _config_int(spec.get("num_speculative_tokens") or 0, "--speculative-config num_speculative_tokens",
                           lo=0, hi=MAX_SPECULATIVE_TOKENS)
    spec_method = spec.get("method") or (spec.get("model") and "draft") or None

    chunked_flag = flags.get("enable_chunked_prefill")
    if engine == "V0":
        chunked = bool(chunked_flag) if chunked_flag is not None else max_len > 32768
    else:
        chunked = True if chunked_flag is None else bool(chunked_flag)
    t_default, s_default = default_batch_limits(v, gpu_total_bytes, gpu_name, usage=usage, chunked=chunked)
    S = flags.get("max_num_seqs")
    S = int(S) if S is not None else s_default
    T = flags.get("max_num_batched_tokens")
    if T is None:
        T = t_default
        if not chunked:
            T = max(max_len, t_default)
        if engine == "V1":
            T = min(T, S * max_len)
    T = int(T)
    if flags.get("max_num_seqs") is None:
        S = min(S, T) if engine == "V1" else S

    prefix = flags.get("enable_prefix_caching")
    if prefix is None:
        if engine == "V0":
            prefix = False
        elif model.is_hybrid:
            prefix = v >= (0, 25, 0)
        else:
            prefix = True
    eager = bool(flags.get("enforce_eager") or False)
    comp = _json(flags.get("compilation_config"))
    mode = str(comp.get("cudagraph_mode") or ("NONE" if eager else ("PIECEWISE" if v < (0, 11, 0) else "FULL_AND_PIECEWISE"))).upper()
    if engine != "V0" and mode not in CUDAGRAPH_MODES:
        # vLLM takes the enum's names only (config/compilation.py::CUDAGraphMode); any other value is
        # refused at start-up, and no graph estimate exists for it
        raise InputError(f"--compilation-config cudagraph_mode {str(comp.get('cudagraph_mode'))[:40]!r}: not one of "
                         f"{', '.join(CUDAGRAPH_MODES)} (vLLM rejects it)")
    if eager:
        mode = "NONE"
    elif engine == "V0":
        # V0 has no cudagraph modes: its model runner captures whole decode-step graphs
        # (worker/model_runner.py::capture_model, batch sizes up to max_num_seqs)
        mode = V0_GRAPHS
    q = 1 + num_spec
    max_cap = comp.get("max_cudagraph_capture_size") or flags.get("max_cudagraph_capture_size")
    # An explicit size list (--cudagraph-capture-sizes, 0.10-0.11 --cuda-graph-sizes, or the
    # compilation config's cudagraph_capture_sizes) replaces the default pattern; vLLM drops sizes
    # above max_num_batched_tokens (config/vllm.py::_set_cudagraph_sizes).
    explicit = _int_list(comp.get("cudagraph_capture_sizes") or flags.get("cudagraph_capture_sizes") or flags.get("cuda_graph_sizes"))
    if explicit and len(explicit) == 1 and not comp.get("cudagraph_capture_sizes") and flags.get("cuda_graph_sizes") and not flags.get("cudagraph_capture_sizes"):
        max_cap, explicit = explicit[0], None  # one --cuda-graph-sizes value: the default pattern up to it
    if explicit:
        explicit = [x for x in explicit if x <= T] or explicit[:1]
        max_cap = max(explicit)
    if not max_cap:
        cap_limit = 1024 if gpu_cc[0] == 10 else 512
        max_cap = min(T, min(S * q * 2, cap_limit)) if v >= (0, 11, 0) else min(S, 512)
    max_cap = _config_int(max_cap, "max_cudagraph_capture_size", lo=1, hi=MAX_CAPTURE_SIZE)
    if v >= (0, 11, 0):
        # vLLM caps the largest capture size at the token budget, an explicit one too
        # (config/vllm.py::_set_cudagraph_sizes: min(max_num_batched_tokens, max_cudagraph_capture_size))
        max_cap = max(1, min(max_cap, T))
    n_sizes = 0 if mode == "NONE" else (len(explicit) if explicit else num_capture_sizes(max_cap, T))
    est_env = env.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS")
    estimate = v >= (0, 20, 0) if est_env is None else str(est_env) == "1" and v >= (0, 18, 0)
    mrv2_env = env.get("VLLM_USE_V2_MODEL_RUNNER")
    if mrv2_env is not None:
        mrv2 = str(mrv2_env) == "1"
    elif v >= (0, 29, 0):
        mrv2 = spec_method not in ("suffix", "ngram") or True
    elif v >= (0, 25, 0):
        mrv2 = model.moe is None and not model.is_hybrid
    else:
        mrv2 = False
    dtype, dtype_note, dtype_error = resolve_dtype(model, flags.get("dtype"), v, dtypes, gpu_name=gpu_name, gpu_cc=gpu_cc)
    if dtype_note:
        notes.append(dtype_note)
    kv_bytes = flags.get("kv_cache_memory_bytes")
    swap = flags.get("swap_space")
    if swap is None:
        swap = 4.0 if v < (0, 18, 0) else 0.0
    return EngineSettings(
        version=v,
        engine=engine,
        gpu_memory_utilization=util,
        max_model_len=max_len,
        max_model_len_source=len_src,
        max_num_seqs=S,
        max_num_batched_tokens=T,
        enable_chunked_prefill=chunked,
        enable_prefix_caching=bool(prefix),
        enforce_eager=eager,
        cudagraph_mode=mode,
        kv_cache_dtype=str(flags.get("kv_cache_dtype") or _auto_kv_dtype(model, v)),
        block_size=int(flags["block_size"]) if flags.get("block_size") else None,
        kv_cache_memory_bytes=int(kv_bytes) if kv_bytes is not None else None,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        expert_parallel=bool(flags.get("enable_expert_parallel") or False),
        num_speculative_tokens=num_spec,
        speculative_method=spec_method,
        cpu_offload_gb=float(flags.get("cpu_offload_gb") or 0.0),
        swap_space_gib=float(swap),
        estimate_cudagraphs=bool(estimate),
        model_runner_v2=bool(mrv2),
        async_scheduling=async_scheduling_on(v, flags, spec_method, pp, bool(mrv2), pooling=_pooling_run(model, flags)),
        runner=_runner(flags),
        disable_hybrid_kv_cache_manager=bool(flags.get("disable_hybrid_kv_cache_manager") or False),
        num_gpu_blocks_override=flags.get("num_gpu_blocks_override"),
        max_cudagraph_capture_size=max_cap,
        num_capture_sizes=n_sizes,
        allow_long_max_model_len=allow_long,
        dtype=dtype,
        act_dtype_bytes=DTYPE_BYTES[dtype],
        dtype_error=dtype_error,
        mm_profile=_mm_profiled(flags),
        notes=tuple(notes),
    )


_DTYPE_NAMES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32", "float32": "float32"}
# config/model.py::_FLOAT16_NOT_SUPPORTED_MODELS @0.32: float16 is refused for these model types.
NO_FLOAT16_TYPES = ("gemma2", "gemma3", "gemma3_text", "glm4")
# PR #18751 (merged 2025-05-30, first in 0.9.1) replaced "float32 → float16" with the
# platform's first supported dtype (_resolve_auto_dtype).
AUTO_DTYPE_BY_PLATFORM = (0, 9, 1)


V0_GRAPHS = "V0_DECODE"  # the V0 engine's whole decode-step graphs (no piecewise/FULL modes)


def graphs_label(mode: str) -> str:
    """How a plan names its CUDA graphs: V1's cudagraph_mode, or V0's decode-step graphs."""
    return "V0 decode-step graphs" if mode == V0_GRAPHS else mode

# platforms/interface.py::Platform.supported_dtypes: the default every platform starts from
# (CUDA narrows it by compute capability; the GPU catalog lists each target's own).
PLATFORM_DEFAULT_DTYPES = ("bfloat16", "float16", "float32")


def resolve_dtype(model: ModelDescription, flag: Any, v: tuple[int, int, int], dtypes: tuple[str, ...] = PLATFORM_DEFAULT_DTYPES, *,
                  gpu_name: str = "", gpu_cc: tuple[int, int] | None = None) -> tuple[str, str | None, str | None]:
    """(dtype vLLM runs the model in, a note when it is not the checkpoint's, the error vLLM
    raises when it refuses the dtype).

    ``config/model.py::_get_and_verify_dtype``: an explicit ``--dtype`` wins; ``auto`` takes
    the config's torch_dtype. From 0.9.1 (``_resolve_auto_dtype``) a float32 config, or one the
    GPU cannot run, becomes the platform's first supported dtype that the model type allows
    (``dtypes``, the GPU catalog's list for the card: bf16 on sm80+ and every ROCm target, fp16
    before sm80, float32 for Gemma 2/3 and GLM-4 where bf16 is missing). Before, float32 became
    float16 (bfloat16 for Gemma 2/3) and a bf16 config on a card without bf16 failed.
    """
    raw = str(flag or "auto").lower()
    cfg = model.dtype if model.dtype in DTYPE_BYTES else "bfloat16"
    new = v >= AUTO_DTYPE_BY_PLATFORM
    if raw != "auto":
        name = _DTYPE_NAMES.get(raw)
        if name is None:
            raise InputError(f"--dtype {flag!r}: not one of auto, half, float16, bfloat16, float, float32")
        chosen = name
    elif new:
        allowed = [d for d in dtypes if not (d == "float16" and model.model_type in NO_FLOAT16_TYPES)]
        preferred = allowed[0]
        chosen = cfg if cfg != "float32" and cfg in allowed else preferred
    elif cfg == "float32":
        chosen = "bfloat16" if model.model_type in ("gemma2", "gemma3", "gemma3_text") else "float16"
    else:
        chosen = cfg
    note = error = None
    if chosen == "bfloat16" and "bfloat16" not in dtypes:
        # worker/worker.py::_check_if_gpu_supports_dtype (V0), platforms/cuda.py::check_if_supports_dtype (V1)
        cc = f"has compute capability {gpu_cc[0]}.{gpu_cc[1]}" if gpu_cc and gpu_cc > (0, 0) else "does not have a compute capability"
        error = ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
                 f"Your {gpu_name + ' ' if gpu_name else ''}GPU {cc}. "
                 "You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.")
    elif chosen == "float16" and new and model.model_type in NO_FLOAT16_TYPES:
        error = f"The model type {model.model_type!r} does not support float16. Reason: Numerical instability. Please use bfloat16 or float32 instead."
    if chosen != cfg:
        how = f"--dtype {raw}" if raw != "auto" else "--dtype auto"
        note = f"checkpoint dtype {cfg}, served as {chosen} ({how}): weights, activations and the auto KV cache take {DTYPE_BYTES[chosen]} bytes per element"
    return chosen, note, error


def _auto_kv_dtype(model: ModelDescription, v: tuple[int, int, int]) -> str:
    return "auto"


# vLLM PR #27431 (merged 2025-10-23, first in 0.11.1): a LongRoPE model's default max_model_len
# is original_max_position_embeddings (the short factors), while the derived limit a user's
# --max-model-len is checked against stays the scaled one (config/model.py::_get_and_verify_max_len).
LONGROPE_SHORT_DEFAULT_SINCE = (0, 11, 1)


def longrope_default_len(model: ModelDescription, v: tuple[int, int, int]) -> int | None:
    """The default max_model_len of a LongRoPE ("longrope", legacy "su") model, or None."""
    rope = model.rope_scaling or {}
    if v < LONGROPE_SHORT_DEFAULT_SINCE or str(rope.get("rope_type") or rope.get("type") or "") not in ("longrope", "su"):
        return None
    original = model.original_max_position_embeddings or rope.get("original_max_position_embeddings")
    return int(original) if original else None


def derive_len(model: ModelDescription, v: tuple[int, int, int]) -> int:
    from oomguard.model.architectures.common import derive_max_model_len

    return derive_max_model_len(model.max_position_embeddings, model.rope_scaling, model.model_type, new_rules=v >= (0, 30, 0))


def has_sliding(model: ModelDescription) -> bool:
    return any(l.kind is LayerKind.SLIDING_WINDOW for l in model.layers)


def ceil_requested(total_bytes: int, util: float, v: tuple[int, int, int]) -> int:
    """requested = total × util (float through 0.13, ceil from 0.14)."""
    x = total_bytes * util
    return math.ceil(x) if v >= (0, 14, 0) else int(x)


def _mm_profiled(flags: dict) -> bool:
    if flags.get("language_model_only") or flags.get("skip_mm_profiling"):
        return False
    limits = _json(flags.get("limit_mm_per_prompt"))
    if limits and all(isinstance(v, (int, float)) and v == 0 for v in limits.values()):
        return False
    return True


def mamba_blocks_per_request(model: ModelDescription, s: EngineSettings) -> int:
    """Mamba/GDN state blocks one request holds per group (docs/memory-model.md §KV): one, plus
    one per speculative token, plus one in "align" mode, which vLLM selects whenever prefix
    caching is on for a hybrid model (model_executor/models/config.py sets
    ``mamba_cache_mode = "align"``), whether the user asked for it or the release defaults it on."""
    from oomguard.model.kv_spec import is_attention_free

    k = 1 + (s.num_speculative_tokens if model.is_hybrid else 0)
    if model.is_hybrid and s.enable_prefix_caching and not is_attention_free(model):
        k += 1  # attention-free (Mamba-only) models run without prefix caching
        # Mamba2 mixers export the block-boundary state inside one forward in align mode: one
        # prefill-checkpoint block more (mamba_mixer2.py::get_kv_cache_spec,
        # num_prefill_checkpoint_blocks=1; read in 0.32, earlier releases ASSUMED without it).
        if s.version >= MAMBA2_CHECKPOINT_BLOCK_SINCE and any(
                l.mamba is not None and l.mamba.variant == "mamba2" for l in model.layers):
            k += 1
    return k


def tokens_logged_by_groups(s: EngineSettings, num_groups: int) -> bool:
    """Whether ``GPU KV cache size`` is ``num_blocks // num_groups × block_size`` (V0, and
    multi-group models before 0.21: S059 at 0.11) rather than ``int(concurrency × L)`` (S028, 0.21)."""
    return s.engine == "V0" or (s.version < (0, 21, 0) and num_groups > 1)
