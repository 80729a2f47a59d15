"""What diagnose knows beyond the logs: the launch, the model, the GPU, the exit status.

``Context`` merges the arguments vLLM printed with those of ``--launch`` (the
log wins: it is what actually ran), the GPU size from the OOM message,
vLLM's profile lines, nvidia-smi or ``--gpu``, and a rough weights estimate
from the model name when nothing better is known.

The estimate is deliberately crude (parameters read from the name, bytes per
parameter from the quantization words in it); it only decides between "the
weights cannot fit" and "they fit" when a log gives no phase. When the memory
model is connected (see ``planning``), its numbers replace these.
"""

from __future__ import annotations

import re
from typing import Any

from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.numbers import BadNumber, integer, num
from oomguard.numbers import MAX_GPUS, NumberError, as_float, as_int
import oomguard.lazy_re as lazy_re
from oomguard.records import field, record

# GPUs the catalog (src/oomguard/data/gpus.json) does not list, in GiB as PyTorch reports them;
# catalog GPUs are looked up there (one place for each card's memory).
_GPU_GIB: tuple[tuple[re.Pattern[str], float], ...] = tuple(
    (lazy_re.compile(p, re.IGNORECASE), gib)
    for p, gib in (
        (r"GB200", 184.0), (r"H800", 79.2), (r"A800", 79.2),
        (r"RTX ?5070 ?Ti|RTX ?5080", 15.6), (r"RTX ?3080 ?Ti|RTX ?3060|RTX ?4070", 11.7), (r"RTX ?2080(?! ?Ti)|RTX ?3070", 7.9),
        (r"MI210", 63.9), (r"RX ?7900 ?XTX", 23.98), (r"RX ?7900 ?XT\b", 19.98),
    )
)
_EXPLICIT_GB = lazy_re.compile(r"(\d+(?:\.\d+)?)\s*(GiB|GB|G)\b", re.IGNORECASE)
_COUNT = lazy_re.compile(r"(\d+)\s*[x×]\s*\S|\bTP\s*=?\s*(\d+)|\(TP(\d+)|\b(\d{1,4})\s+(?:GPU|NPU|card)s\b",
                         re.IGNORECASE)
_PARAMS = lazy_re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")
# Only when no config.json can be read (the config decides otherwise); "-V3" (DeepSeek-V3) is a version, not vision.
_MULTIMODAL = lazy_re.compile(r"VL\b|-V\b|-V-|Vision|vision|llava|LLaVA|Omni|Pixtral|InternVL|MiniCPM-V|Phi-3\.5-vision|"
                         r"Qwen2-VL|Qwen2\.5-VL|Qwen3-VL|gemma-3|Gemma-3|Llama-4|Idefics|paligemma|Molmo", re.IGNORECASE)


def gpu_total_gib_from_name(name: str) -> float | None:
    """GPU memory from a name or a free-form description ("1x A100 80GB", "RTX 4090 24GB")."""
    m = _EXPLICIT_GB.search(name)
    value = _safe(num, m.group(1)) if m else None
    if value is not None:
        if 4 <= value <= 300:
            # Marketing GB: the usable total PyTorch reports is about 1% lower.
            return round(value * 0.99, 2)
    from oomguard.inputs.hardware import find_gpu_in_text

    gpu = find_gpu_in_text(name)
    if gpu is not None:
        return round(gpu.total_bytes / 2**30, 2)
    for rx, gib in _GPU_GIB:
        if rx.search(name):
            return gib
    return None


def gpu_count_from_text(text: str) -> int | None:
    m = _COUNT.search(text)
    if not m:
        return None
    return _safe(integer, next(g for g in m.groups() if g), lo=1, hi=1 << 20)


def _safe(convert, text: str, **limits):  # noqa: ANN001, ANN003, ANN202 - tiny local helper
    try:
        return convert(text, **limits)
    except BadNumber:
        return None


def params_from_name(model: str) -> float | None:
    """Billions of parameters read from a model name ("Llama-3-70B" -> 70, "Mixtral-8x7B" -> 56)."""
    best = None
    for m in _PARAMS.finditer(model):
        experts = _safe(integer, m.group(1), lo=1, hi=4096) if m.group(1) else 1
        value = _safe(num, m.group(2), lo=0, hi=1e6)
        if experts is not None and value is not None and value * experts > 0.05:
            value *= experts
            # "Qwen3-30B-A3B": the first count is the total, the A-count is active parameters.
            best = value if best is None else best
    return best


_BPW = lazy_re.compile(r"(?<![\d.])(\d(?:\.\d{1,2})?)\s?bpw\b", re.IGNORECASE)


def bytes_per_param_from_name(model: str) -> float:
    name = model.lower()
    m = _BPW.search(name)
    if m:
        return float(m.group(1)) / 8  # exllama's bits per weight ("5.5bpw")
    if re.search(r"awq|gptq|int4|4bit|4-bit|w4a16|bnb|nf4|mxfp4|nvfp4|fp4|q4", name):
        return 0.6
    if re.search(r"fp8|int8|8bit|8-bit|w8a8|w8a16|q8", name):
        return 1.05
    return 2.0


def is_multimodal(model: str | None) -> bool:
    return bool(model and _MULTIMODAL.search(model))


@record
class Context:
    args: dict[str, Any] = field(default_factory=dict)
    launch_flags: list[str] = field(default_factory=list)
    version: str | None = None
    engine: str | None = None
    platform: str | None = None
    model: str | None = None
    gpu_name: str | None = None
    gpu_total_gib: float | None = None
    num_gpus: int | None = None
    gpus_given: int | None = None  # the GPU count --gpu / --num-gpus state (not the GPUs a log happens to name)
    exit_code: int | None = None
    config_multimodal: bool | None = None  # from the model's config.json when it could be read
    config_heads: int | None = None  # attention heads, from the model's config.json when it could be read
    config_max_len: int | None = None  # vLLM's derived max_model_len for the config (no user value)
    # from the model's config.json when it could be read: the whole model's weight bytes as loaded (TP 1,
    # oomguard.model.weights) and its largest single weight tensor (TP 1), both in GiB
    config_weights_gib: float | None = None
    config_largest_tensor_gib: float | None = None
    log_multimodal: bool = False  # the log shows a multimodal encoder being set up or profiled
    # The model and the GPU the reporter names in words (parsers/cues.py's mention: cues), for the weights estimate
    # only: never a --model / --gpu (the planner and the fixes do not take a sentence for a model id).
    mentioned_model: str | None = None
    mentioned_gpu_gib: float | None = None
    # The GPU words themselves ("RTX 4090", "Tesla V100-SXM2-32GB") with their place and how many lines name a GPU:
    # the planner may take them for its GPU, saying so (planning.resolve_gpu), never silently.
    mentioned_gpu: str | None = None
    mentioned_gpu_at: str | None = None
    mentioned_gpu_lines: int = 0
    # per (file, run): traceback functions and the furthest phase anywhere in the paste (Collector's)
    paste_frames: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    paste_phase: dict[tuple[str, int], Any] = field(default_factory=dict)
    paste_hints: dict[tuple[str, int], set[str]] = field(default_factory=dict)

    # --- arguments -----------------------------------------------------
    def arg(self, name: str, default: Any = None) -> Any:
        return self.args.get(name, default)

    @property
    def tensor_parallel_size(self) -> int:
        value = self.arg("tensor_parallel_size") or self.arg("tp") or 1
        try:  # a logged value: 1e999, 'abc' or 10**30 are not a TP size
            return as_int(value, lo=1, hi=MAX_GPUS, strings=True)
        except NumberError:
            return 1

    @property
    def pipeline_parallel_size(self) -> int:
        try:
            return as_int(self.arg("pipeline_parallel_size") or 1, lo=1, hi=MAX_GPUS, strings=True)
        except NumberError:
            return 1

    @property
    def enforce_eager(self) -> bool | None:
        value = self.arg("enforce_eager")
        return None if value is None else bool(value)

    @property
    def gpu_memory_utilization(self) -> float | None:
        value = self.arg("gpu_memory_utilization")
        try:  # NaN or 1e999 from a log are not a utilization
            return as_float(value, lo=0, hi=1, strings=True) if value is not None else None
        except NumberError:
            return None

    def version_tuple(self) -> tuple[int, int] | None:
        if not self.version:
            return None
        m = re.match(r"v?(\d{1,4})\.(\d{1,4})", self.version)
        return (int(m.group(1)), int(m.group(2))) if m else None

    def default_util(self) -> float:
        """The release's --gpu-memory-utilization default (0.9 when the release is not known): a fact of the
        launch, read by the cues (a setting above or below it) and the fixes (what to lower from)."""
        from oomguard.model.engine import default_utilization

        v = self.version_tuple()
        return default_utilization(v) if v else 0.9

    # --- model / GPU ---------------------------------------------------
    @property
    def multimodal(self) -> bool:
        """Multimodal from the config when known; else from the log or the launch; the name only as a last resort."""
        if self.config_multimodal is not None:
            return self.config_multimodal
        if self.log_multimodal or any(k in self.args for k in ("limit_mm_per_prompt", "mm_processor_kwargs")):
            return True
        return is_multimodal(self.model)

    @property
    def text_only(self) -> bool:
        """True only when the config says so: multimodal fixes are never offered then."""
        return self.config_multimodal is False

    def weights_per_gpu_gib(self, collector: Collector | None = None) -> tuple[float, str] | None:
        """Weights per GPU: vLLM's own figure when logged, else an estimate from the model name."""
        if collector is not None:
            fact = collector.latest("weights")
            if fact is not None:
                return fact.value, "logged"
        gpus = self.tensor_parallel_size * self.pipeline_parallel_size
        if self.config_weights_gib:
            return self.config_weights_gib / gpus, f"from the model's config, / {gpus} GPUs" if gpus > 1 else (
                "from the model's config")
        name = self.model or self.mentioned_model
        if not name:
            return None
        params = params_from_name(name)
        if params is None:
            return None
        per_param = bytes_per_param_from_name(name)
        how = "estimated from the model name" if self.model else f"estimated from the model the report names ({name})"
        quant = str(self.arg("quantization") or "").lower()
        dtype = str(self.arg("dtype") or "").lower().removeprefix("torch.")
        if per_param == 2.0 and quant:
            # a quantization the launch names (the name says nothing): 4-bit methods or 8-bit ones
            per_param = 1.05 if re.search(r"fp8|int8|w8|8bit|experts_int8", quant) else 0.6
            how += f" and --quantization {quant}"
        elif per_param == 2.0 and dtype in ("float", "float32"):
            per_param = 4.0  # --dtype float: an unquantized checkpoint in fp32, twice the bytes
            how += " and --dtype float32"
        gib = params * 1e9 * per_param / (1 << 30) / gpus
        return gib, how


def build_context(
    collector: Collector,
    launch_args: dict[str, Any] | None = None,
    launch_flags: list[str] | None = None,
    *,
    model: str | None = None,
    gpu: str | None = None,
    num_gpus: int | None = None,
    vllm_version: str | None = None,
    exit_code: int | None = None,
) -> Context:
    args = dict(launch_args or {})
    args.update({k: v for k, v in collector.args.items() if v is not None})
    ctx = Context(
        args=args,
        launch_flags=list(launch_flags or []),
        version=collector.version or vllm_version,
        engine=collector.engine,
        platform=collector.platform,
        model=collector.model or model or (args.get("model") if isinstance(args.get("model"), str) else None),
        exit_code=exit_code,
    )
    if model and not collector.model:
        ctx.model = model
    if vllm_version and not collector.version:
        ctx.version = vllm_version
    # GPU size: the OOM message / vLLM's own lines, then nvidia-smi, then --gpu.
    for gpu_info in collector.gpus.values():
        if gpu_info.get("total_bytes"):
            ctx.gpu_total_gib = gpu_info["total_bytes"] / (1 << 30)
            ctx.gpu_name = gpu_info.get("name") or ctx.gpu_name
            break
    fact = collector.latest("total_gpu")
    if ctx.gpu_total_gib is None and fact is not None:
        ctx.gpu_total_gib = fact.value
    if gpu:
        ctx.gpu_name = ctx.gpu_name or gpu
        if ctx.gpu_total_gib is None:
            ctx.gpu_total_gib = gpu_total_gib_from_name(gpu)
        ctx.num_gpus = gpu_count_from_text(gpu)
    if num_gpus:
        ctx.num_gpus = num_gpus
    ctx.gpus_given = ctx.num_gpus
    if ctx.num_gpus is None and collector.gpus:
        ctx.num_gpus = len(collector.gpus)
    _read_mentions(ctx, collector)
    ctx.log_multimodal = bool(collector.multimodal_seen)
    ctx.paste_frames = collector.paste_frames
    ctx.paste_phase = collector.paste_phase
    ctx.paste_hints = collector.paste_hints
    return ctx


def _read_mentions(ctx: Context, collector: Collector) -> None:
    """The model and GPU the report names in words, when nothing better says so (see Context.mentioned_model)."""
    from oomguard.diagnose.parsers.cues import MENTION_PREFIX, TABLE

    rules = {r.feature: r for r in TABLE if r.feature.startswith(MENTION_PREFIX)}
    gpu_hit, model_hit = collector.cues.get(MENTION_PREFIX + "gpu"), collector.cues.get(MENTION_PREFIX + "model")
    if gpu_hit is not None:
        m = rules[gpu_hit.feature].pattern.search(gpu_hit.text)
        if m:
            ctx.mentioned_gpu, ctx.mentioned_gpu_at = m.group(0).strip(), f"{gpu_hit.file}:{gpu_hit.line}"
            ctx.mentioned_gpu_lines = gpu_hit.count
        if ctx.gpu_total_gib is None:
            ctx.mentioned_gpu_gib = gpu_total_gib_from_name(m.group(0)) if m else None
    if model_hit is not None and not ctx.model:
        m = rules[model_hit.feature].pattern.search(model_hit.text)
        ctx.mentioned_model = m.group(0) if m else None
