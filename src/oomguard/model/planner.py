"""The start-up ledger: what vLLM will allocate on each GPU, and whether it starts.

``plan_launch`` is pure: it takes a ``ModelDescription``, a GPU, the launch's
flags and environment, and returns a ``Plan``. The arithmetic follows
docs/memory-model.md#the-ledger-per-rank:

    requested = ceil(total × gpu_memory_utilization)
    KV        = requested − weights − non-torch − activation peak [− CUDA graphs, ≥ 0.20]
              (or --kv-cache-memory-bytes)
    blocks    = KV // bytes_per_block   (minimum over ranks)
    tokens    = int(blocks / blocks_per_request × max_model_len)
"""

from __future__ import annotations

from oomguard.model import activation as act
from oomguard.model.coverage import coverage_dict, widen_terms
from oomguard.model.cudagraph import cudagraph_estimate
from oomguard.model.engine import EngineSettings, ceil_requested, derive_len, mamba_blocks_per_request, resolve, tokens_logged_by_groups
from oomguard.model.estimate import Term
from oomguard.model.failures import FailureClass
from oomguard.model.flag_effects import unmodelled_notes
from oomguard.model.kv_spec import KVLayout, blocks_per_request, kv_layout, layer_kv_specs, per_token_bytes, project_layout
from oomguard.model.non_torch import CUDA_CONTEXT_BYTES, non_torch, startup_free_check  # noqa: F401  (re-exported: check, fit, host read it here)
from oomguard.model.quantization import WeightCosts, override_quantization, weight_costs
from oomguard.model.weights import pp_layer_ranges, weight_split
from oomguard.records import field, record
from oomguard.units import GiB

SCHEMA_VERSION = 1


@record
class RankLedger:
    """The start-up memory ledger of one GPU (one rank)."""
    stage: int
    total_bytes: int
    requested_bytes: int
    weights: Term
    activation: Term
    non_torch: Term
    cuda_graph: Term
    kv_bytes: int
    kv_source: str
    layout: KVLayout
    num_blocks: int
    other_use_bytes: int = 0
    reserved_bytes: int = 0  # taken from the pool after profiling (--mm-ipc-gpu-memory-gb)

    @property
    def graphs_in_budget(self) -> bool:
        return self.cuda_graph.bytes > 0 and self.kv_source == "profiled" and self._est

    _est: bool = False

    def to_dict(self) -> dict:
        return {
            "stage": self.stage,
            "total_gib": round(self.total_bytes / GiB, 2),
            "requested_gib": round(self.requested_bytes / GiB, 2),
            "weights_gib": round(self.weights.bytes / GiB, 2),
            "activation_peak_gib": round(self.activation.bytes / GiB, 2),
            "non_torch_gib": round(self.non_torch.bytes / GiB, 2),
            "cuda_graph_gib": round(self.cuda_graph.bytes / GiB, 2),
            "kv_cache_gib": round(self.kv_bytes / GiB, 2),
            "reserved_gib": round(self.reserved_bytes / GiB, 2),
            "kv_cache_source": self.kv_source,
            "num_blocks": self.num_blocks,
            "bytes_per_block": self.layout.bytes_per_block,
            "terms": [t.to_dict() for t in (self.weights, self.non_torch, self.activation, self.cuda_graph)],
        }


@record
class Plan:
    """The start-up plan of a launch: per-GPU ledgers, KV pool, and whether it starts."""
    model: object
    gpu: object
    settings: EngineSettings
    ranks: list[RankLedger]
    layout: KVLayout
    block_size: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    blocks_per_request: int
    kv_bytes_per_token: float
    starts: bool
    failure: FailureClass | None
    error: str | None
    messages: list[str] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    max_fitting_len: int | None = None
    one_request_bytes: int = 0
    num_gpus: int = 1
    baseline_bytes: int = 0  # on each GPU before vLLM's snapshot (context, other processes, early communicators)
    outside_bytes: int = 0  # on each GPU but outside every term (the part of the baseline the release does not charge)

    @property
    def tight_rank(self) -> RankLedger:
        return min(self.ranks, key=lambda r: r.num_blocks)

    def to_dict(self) -> dict:
        s = self.settings
        r = self.tight_rank
        return {
            "schema_version": SCHEMA_VERSION,
            "vllm_version": ".".join(map(str, s.version)),
            "engine": s.engine,
            "model": getattr(self.model, "name", None),
            "model_source": getattr(self.model, "source", None),
            "coverage": coverage_dict(self),
            "gpu": {"name": self.gpu.name, "total_gib": round(self.gpu.total_bytes / GiB, 2), "count": self.num_gpus, "total_source": self.gpu.total_source},
            "tensor_parallel_size": s.tensor_parallel_size,
            "pipeline_parallel_size": s.pipeline_parallel_size,
            "max_model_len": s.max_model_len,
            "max_num_seqs": s.max_num_seqs,
            "max_num_batched_tokens": s.max_num_batched_tokens,
            "gpu_memory_utilization": s.gpu_memory_utilization,
            "kv_cache_dtype": s.kv_cache_dtype,
            "dtype": s.dtype,
            "baseline_gib": round(self.baseline_bytes / GiB, 2),
            "block_size": self.block_size,
            "per_gpu": r.to_dict(),
            "per_stage": [x.to_dict() for x in self.ranks],
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_cache_tokens": self.kv_cache_tokens,
            "num_gpu_blocks": self.num_gpu_blocks,
            "blocks_per_request": self.blocks_per_request,
            "max_concurrency": round(self.max_concurrency, 2),
            "max_fitting_model_len": self.max_fitting_len,  # the KV limit: the longest one request the pool holds
            "derived_max_model_len": derive_len(self.model, self.settings.version),  # the position limit
            "one_request_kv_gib": round(self.one_request_bytes / GiB, 2),
            "kv_groups": [{"kind": g.kind, "layers": len(g.specs), "group_size": g.group_size, "page_size_bytes": g.page_size_bytes, "block_size": g.block_size} for g in self.layout.groups],
            "starts": self.starts,
            "failure": self.failure.value if self.failure else None,
            "error": self.error,
            "messages": list(self.messages),
            "log_lines": list(self.log_lines),
            "settings": {
                "enable_chunked_prefill": s.enable_chunked_prefill,
                "enable_prefix_caching": s.enable_prefix_caching,
                "enforce_eager": s.enforce_eager,
                "cudagraph_mode": s.cudagraph_mode,
                "kv_cache_memory_bytes": s.kv_cache_memory_bytes,
                "num_speculative_tokens": s.num_speculative_tokens,
                "model_runner_v2": s.model_runner_v2,
                "cuda_graph_estimate_in_budget": s.estimate_cudagraphs,
                "max_model_len_source": s.max_model_len_source,
            },
        }


def _fmt_gib(b: float) -> str:
    return str(round(b / GiB, 2))


def _max_fitting_len(layout: KVLayout, avail: int, s: EngineSettings, mamba_blocks: int, upper: int) -> int:
    """vLLM's binary search for the largest L whose one request fits (kv_cache_planning.py)."""
    budget = avail - layout.bytes_per_block
    if budget <= 0 or layout.bytes_per_block == 0:
        return 0
    lo, hi = 0, max(upper, 1)
    kw = dict(max_num_batched_tokens=s.max_num_batched_tokens, max_concurrent_batches=s.max_concurrent_batches, mamba_blocks=mamba_blocks)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout.bytes_per_block * blocks_per_request(layout, mid, **kw) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan_launch(
    model,
    gpu,
    flags: dict | None = None,
    env: dict | None = None,
    *,
    version: str | None = None,
    num_gpus: int | None = None,
    other_gpu_use_bytes: int = 0,
    usage: str = "serve",
    nvlink: bool | None = None,
    calibration=None,
) -> Plan:
    flags = dict(flags or {})
    env = dict(env or {})
    from oomguard.model.engine import parse_version
    from oomguard.model.overrides import apply_overrides as apply_hf_overrides

    # --hf-overrides / --rope-scaling change the config vLLM reads, before anything is derived from it
    model = apply_hf_overrides(model, flags, parse_version(version))
    s = resolve(model, flags, env, version=version, gpu=gpu, usage=usage)
    messages: list[str] = list(s.notes) + unmodelled_notes(flags) + platform_notes(gpu) + override_notes(flags)
    # The adapter's caveats for speculative decoding (DeepSeek-V4's MTP / dspark draft caches).
    if s.num_speculative_tokens:
        messages += [n for n in model.notes if "speculative" in n]
    cal_use: dict = {}
    if calibration is not None:  # a profile from `oomguard calibrate` (model/calibration.py): never applied silently
        from oomguard.model.calibration import apply_terms, group_key

        cal_key = group_key(gpu, s.version, model)
        cal_use, cal_notes = calibration.lookup(cal_key)
        messages += cal_notes
    failure: FailureClass | None = None
    error: str | None = None
    tp, pp = s.tensor_parallel_size, s.pipeline_parallel_size
    world = tp * pp
    gpus = num_gpus or world

    def fail(cls: FailureClass, text: str) -> None:
        nonlocal failure, error
        if failure is None:
            failure, error = cls, text

    # --- configuration errors vLLM raises before touching memory
    if world > gpus:
        fail(FailureClass.CONFIG_ERROR, f"tensor_parallel_size × pipeline_parallel_size = {world} but only {gpus} GPU(s) are available")
    # Data-parallel ranks on this node each need their own TP × PP GPUs (data_parallel_size_local
    # defaults to data_parallel_size); checked against the GPUs the user said there are.
    dp_local = int(flags.get("data_parallel_size_local") or s.data_parallel_size or 1)
    if num_gpus and dp_local > 1 and world * dp_local > num_gpus:
        fail(FailureClass.CONFIG_ERROR, f"tensor_parallel_size × pipeline_parallel_size × data_parallel_size = "
                                        f"{world * dp_local} but only {num_gpus} GPU(s) are available")
    if model.family != "mla" and model.num_attention_heads % tp:
        fail(FailureClass.CONFIG_ERROR, f"Total number of attention heads ({model.num_attention_heads}) must be divisible by tensor parallel size ({tp}).")
    if model.family != "mla" and tp > model.num_kv_heads and tp % model.num_kv_heads:
        fail(FailureClass.CONFIG_ERROR, f"Total number of KV heads ({model.num_kv_heads}) must divide tensor parallel size ({tp}) when TP exceeds it.")
    if s.dtype_error:
        fail(FailureClass.CONFIG_ERROR, s.dtype_error)
    derived = derive_len(model, s.version)
    if s.max_model_len > derived and not s.allow_long_max_model_len:
        fail(
            FailureClass.MAX_LEN_EXCEEDS_MODEL,
            f"User-specified max_model_len ({s.max_model_len}) is greater than the derived max_model_len ({derived}) from the model's config.json. "
            "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
        )
        from oomguard.model.overrides import rope_reach

        reach = rope_reach(model)
        if reach is not None and reach >= s.max_model_len:
            messages.append(
                f"the {model.rope_scaling.get('rope_type')} RoPE scaling covers {reach:,} positions ≥ {s.max_model_len:,}, but vLLM "
                f"{'.'.join(map(str, s.version))} derives {derived:,} from the config (from 0.30 YaRN's max_position_embeddings "
                "counts as already scaled): VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is what it needs next to the scaling")

    q = override_quantization(model.quantization, flags.get("quantization"))
    if q is model.quantization and model.category_bytes:
        costs = WeightCosts(dict(model.category_bytes))
    else:
        costs = weight_costs(q, model.dtype_bytes, {}, None)
    with_mtp = s.speculative_method in ("mtp", "deepseek_mtp", "qwen3_next_mtp") and model.num_mtp_layers > 0
    total = gpu.total_bytes
    requested = ceil_requested(total, s.gpu_memory_utilization, s.version)
    specs_all = layer_kv_specs(model, tp, s.kv_cache_dtype, s.block_size, num_spec=s.num_speculative_tokens if model.is_hybrid else 0, disable_hybrid=s.disable_hybrid_kv_cache_manager or s.engine == "V0", mla_fp8_block_size=getattr(gpu, "mla_fp8_block_size", 64), platform_block_size=getattr(gpu, "default_block_size", None), dtype_bytes=s.act_dtype_bytes, max_model_len=s.max_model_len)
    layout_all = kv_layout(specs_all)
    block_size = layout_all.block_size
    mamba_blocks = mamba_blocks_per_request(model, s)
    ranges = pp_layer_ranges(model.num_layers, pp, env.get("VLLM_PP_LAYER_PARTITION"))
    ranks: list[RankLedger] = []
    cpu_off = int(s.cpu_offload_gb * GiB)
    # multimodal/gpu_ipc_memory.py::reserve_mm_ipc_gpu_memory: subtracted after the profile, on
    # both the profiled and the --kv-cache-memory-bytes paths.
    mm_ipc = int(float(flags.get("mm_ipc_gpu_memory_gb") or 0) * GiB)
    if mm_ipc:
        messages.append(f"--mm-ipc-gpu-memory-gb {float(flags['mm_ipc_gpu_memory_gb']):g}: {_fmt_gib(mm_ipc)} GiB reserved for multimodal IPC, taken from the KV pool")
    moe_kernel = None
    if q.method == "mxfp4" and model.moe is not None:
        from oomguard.model.mxfp4 import mxfp4_backend

        moe_kernel, why = mxfp4_backend(s.version, gpu.cc_major_minor, vendor=getattr(gpu, "vendor", "nvidia"),
                                        moe_backend=flags.get("moe_backend"), env=env)
    nnodes = int(flags.get("nnodes") or 1)
    ntr = non_torch(model, s, gpu, custom_all_reduce=not flags.get("disable_custom_all_reduce"), nnodes=nnodes,
                    gpus_per_node=(gpus // nnodes) if nnodes > 1 else None, other_gpu_use_bytes=other_gpu_use_bytes, nvlink=nvlink)
    for stage in range(pp):
        last = stage == pp - 1
        split = weight_split(model, costs, tp=tp, pp=pp, pp_rank=stage, ep=tp * s.data_parallel_size if s.expert_parallel else 1, with_mtp=with_mtp, pp_partition=env.get("VLLM_PP_LAYER_PARTITION"), dtype_bytes=s.act_dtype_bytes, mxfp4_backend=moe_kernel)
        if flags.get("language_model_only") and split.vision_bytes and model.vision_params:
            # --language-model-only sets every modality's limit to 0 (config/multimodal.py
            # get_limit_per_prompt), and the vision tower is not built (_mark_tower_model). Audio
            # towers are kept: calibration S028 (Gemma-4 E2B, 0.21) loads 8.89 GiB, which the
            # language model plus the audio tower give (without it 8.58).

            keep = min(1.0, model.audio_params / model.vision_params)
            dropped = split.vision_bytes * (1 - keep)
            split = split._replace(vision_bytes=split.vision_bytes * keep)
            if dropped and stage == 0:
                messages.append(f"--language-model-only: the vision tower is not loaded ({_fmt_gib(dropped)} GiB less weights per GPU)")
        w_bytes = max(0, split.total_bytes - cpu_off)
        w_formula = (
            f"embed {_fmt_gib(split.embed_bytes)} + {split.num_layers} layers {_fmt_gib(split.layers_bytes)} + lm_head {_fmt_gib(split.lm_head_bytes)}"
            + (f" + vision {_fmt_gib(split.vision_bytes)}" if split.vision_bytes else "")
            + (f" + MTP {_fmt_gib(split.mtp_bytes)}" if split.mtp_bytes else "")
            + f" GiB at TP {tp}, {s.dtype}" + (f", quantization {q.method}" if q.is_quantized else "")
            + (f", MXFP4 experts padded for the {moe_kernel} kernels ({why})" if moe_kernel else "")
            + (f" − cpu_offload_gb {s.cpu_offload_gb:g}" if cpu_off else "")
        )
        exact = model.checkpoint_bytes is not None
        weights = Term(
            "weights",
            w_bytes,
            w_formula + (f" (scaled ×{split.scale:.3f} to the safetensors total)" if exact else ""),
            ("safetensors headers" if exact else "config.json × bytes per parameter")
            + "; docs/memory-model.md#weights; model_executor/layers/linear.py, vocab_parallel_embedding.py, quantization/*::create_weights"
            + ("; fused_moe/oracle/mxfp4.py::mxfp4_round_up_hidden_size_and_intermediate_size" if moe_kernel else ""),
            exact=exact,
            low=int(w_bytes * 0.98),
            high=int(w_bytes * 1.03),
        )
        a = act.activation_peak(model, s, last_stage=last, env=env)
        nt = ntr.term
        g = cudagraph_estimate(model, s)
        if cal_use:
            weights, a, nt, g = apply_terms(cal_use, cal_key, weights=weights, activation=a, non_torch=nt, cuda_graph=g)
            w_bytes = weights.bytes
        layout = project_layout(layout_all, set(ranges[stage])) if pp > 1 else layout_all
        graphs_in_budget = s.estimate_cudagraphs and g.bytes > 0
        if s.kv_cache_memory_bytes is not None:
            kv, src = s.kv_cache_memory_bytes - mm_ipc, "--kv-cache-memory-bytes"
        else:
            kv = requested - w_bytes - nt.bytes - a.bytes - (g.bytes if graphs_in_budget else 0) - mm_ipc
            src = "profiled"
        n_blocks = max(0, kv // layout.bytes_per_block) if layout.bytes_per_block else 0
        if s.num_gpu_blocks_override:
            # vLLM plans the memory for the override (kv_cache_planning.py): the pool is exactly that.
            n_blocks = int(s.num_gpu_blocks_override)
            kv = n_blocks * layout.bytes_per_block
        ranks.append(RankLedger(stage, total, requested, weights, a, nt, g, int(kv), src, layout, int(n_blocks), other_gpu_use_bytes, mm_ipc))

    tight = min(ranks, key=lambda r: r.num_blocks)
    num_blocks = tight.num_blocks
    L = s.max_model_len
    bpr_kw = dict(max_num_batched_tokens=s.max_num_batched_tokens, max_concurrent_batches=s.max_concurrent_batches, mamba_blocks=mamba_blocks)
    bpr = blocks_per_request(layout_all, L, **bpr_kw) if layout_all.groups else 1
    concurrency = num_blocks / bpr if bpr else 0.0
    if tokens_logged_by_groups(s, layout_all.num_groups):
        tokens = (num_blocks // max(1, layout_all.num_groups)) * block_size
    else:
        tokens = int(concurrency * L)
    if s.engine == "V0":
        concurrency = num_blocks * block_size / L
    # One max-length request, checked on every rank against that rank's own layout (PP stages
    # hold only their layers); the tightest rank decides.
    def _one_request(rank: RankLedger) -> int:
        return rank.layout.bytes_per_block * blocks_per_request(rank.layout, L, **bpr_kw) if rank.layout.groups else 0

    short = max(ranks, key=lambda r: _one_request(r) - (r.kv_bytes - r.layout.bytes_per_block))
    one_req = _one_request(short)
    tight_avail = short.kv_bytes - short.layout.bytes_per_block
    fit_len = min(_max_fitting_len(r.layout, r.kv_bytes, s, mamba_blocks, max(L, derived)) for r in ranks)

    if s.max_model_len_source.startswith("auto-fit") and one_req > tight_avail and fit_len > 0:
        # --max-model-len auto / -1 (>= 0.14): vLLM binary-searches the largest length that fits.
        refit = dict(flags)
        refit["max_model_len"] = fit_len
        plan = plan_launch(model, gpu, refit, env, version=version, num_gpus=num_gpus, other_gpu_use_bytes=other_gpu_use_bytes, usage=usage, nvlink=nvlink, calibration=calibration)
        plan.messages.insert(0, f"Auto-fit max_model_len: reduced from {L} to {fit_len} to fit in available KV cache memory ({_fmt_gib(tight.kv_bytes)} GiB GPU)")
        plan.log_lines.insert(0, plan.messages[0])
        return plan

    # --- memory verdicts, in the order vLLM would hit them
    # On the device but outside the non-torch term: the context and other processes (unless the
    # release charges them), and communicators built before the snapshot.
    outside = ntr.outside_bytes
    free_at_start = total - ntr.baseline_bytes
    r0 = tight
    if free_at_start < requested and startup_free_check(s):
        fail(
            FailureClass.STARTUP_FREE_MEMORY,
            f"Free memory on device cuda:0 ({_fmt_gib(free_at_start)}/{_fmt_gib(total)} GiB) on startup is less than desired GPU memory utilization "
            f"({s.gpu_memory_utilization}, {_fmt_gib(requested)} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        )
    heaviest = max(ranks, key=lambda r: r.weights.bytes)
    if heaviest.weights.bytes + ntr.baseline_bytes > total:
        fail(
            FailureClass.WEIGHTS_OOM,
            f"CUDA out of memory while loading weights: {_fmt_gib(heaviest.weights.bytes)} GiB of weights per GPU do not fit in "
            f"{_fmt_gib(total - ntr.baseline_bytes)} GiB free. Increase --tensor-parallel-size, quantize, or use --cpu-offload-gb.",
        )
    peak_rank = max(ranks, key=lambda r: r.weights.bytes + r.activation.bytes + r.non_torch.bytes)
    profile_peak = peak_rank.weights.bytes + peak_rank.activation.bytes + peak_rank.non_torch.bytes + outside
    if profile_peak > total:
        fail(
            FailureClass.PROFILE_OOM,
            f"torch.OutOfMemoryError: CUDA out of memory in the profile run: weights {_fmt_gib(peak_rank.weights.bytes)} + activation "
            f"{_fmt_gib(peak_rank.activation.bytes)} + non-torch {_fmt_gib(peak_rank.non_torch.bytes)} GiB exceed the {_fmt_gib(total)} GiB card "
            f"(max_num_batched_tokens={s.max_num_batched_tokens}, max_num_seqs={s.max_num_seqs}).",
        )
    if s.kv_cache_memory_bytes is not None:
        resident = tight.weights.bytes + tight.non_torch.bytes + s.kv_cache_memory_bytes + tight.cuda_graph.bytes + outside
        if resident + tight.activation.bytes > total:
            fail(
                FailureClass.PROFILE_OOM if resident <= total else FailureClass.NO_KV_MEMORY,
                f"--kv-cache-memory-bytes {_fmt_gib(s.kv_cache_memory_bytes)} GiB + weights {_fmt_gib(tight.weights.bytes)} GiB + graphs and activations "
                f"({_fmt_gib(tight.cuda_graph.bytes + tight.activation.bytes)} GiB) exceed the {_fmt_gib(total)} GiB card: vLLM skips its check, so this OOMs.",
            )
    if failure is None and (r0.kv_bytes - r0.layout.bytes_per_block <= 0):
        fail(
            FailureClass.NO_KV_MEMORY,
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. "
            f"(requested {_fmt_gib(requested)} GiB − weights {_fmt_gib(r0.weights.bytes)} − non-torch {_fmt_gib(r0.non_torch.bytes)} − "
            f"activation {_fmt_gib(r0.activation.bytes)}" + (f" − CUDA graphs {_fmt_gib(r0.cuda_graph.bytes)}" if s.estimate_cudagraphs and r0.cuda_graph.bytes else "") + f" = {_fmt_gib(r0.kv_bytes)} GiB)",
        )
    if failure is None and s.engine == "V0":
        cap = num_blocks * block_size
        if L > cap:
            fail(
                FailureClass.KV_TOO_SMALL,
                f"The model's max seq len ({L}) is larger than the maximum number of tokens that can be stored in KV cache ({cap}). "
                "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
            )
    elif failure is None and one_req > tight_avail:
        models = "model's" if s.version >= (0, 25, 0) else "models's"
        fail(
            FailureClass.KV_TOO_SMALL,
            f"To serve at least one request with the {models} max seq len ({L}), ({_fmt_gib(one_req)} GiB KV cache is needed, which is larger than "
            f"the available KV cache memory ({_fmt_gib(tight_avail)} GiB). Based on the available memory, the estimated "
            f"maximum model length is {fit_len}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        )
    if failure is None and model.is_hybrid and s.version >= (0, 25, 0):
        mamba_groups = sum(1 for g in layout_all.groups if g.kind == "mamba")
        if mamba_groups and num_blocks - 1 < s.max_num_seqs * mamba_blocks:
            messages.append(
                f"hybrid model: the pool holds {num_blocks} blocks; {s.max_num_seqs} sequences need {s.max_num_seqs * mamba_blocks} Mamba state blocks "
                "per group: vLLM caps concurrency by the state blocks (mamba-state-limit); lower --max-num-seqs"
            )
    # Graphs captured after the KV pool is allocated and outside the budget (< 0.20, or estimate off).
    # The graph term is an estimate: the failure is claimed only when even its low end does not
    # fit (a V0 launch on a small card that started for real was refused on the central value).
    if failure is None and tight.cuda_graph.bytes and not s.estimate_cudagraphs and s.kv_cache_memory_bytes is None:
        after = requested + outside + (tight.cuda_graph.low if tight.cuda_graph.low is not None else tight.cuda_graph.bytes)
        if after > total:
            fail(
                FailureClass.CUDAGRAPH_OOM,
                f"CUDA out of memory while capturing CUDA graphs: the budget {_fmt_gib(requested)} GiB + graphs ≈{_fmt_gib(tight.cuda_graph.bytes)} GiB + "
                f"CUDA context exceed the {_fmt_gib(total)} GiB card (graphs sit outside --gpu-memory-utilization in this version).",
            )
    starts = failure is None

    # --- the lines vLLM will log, up to the point where it fails
    logs = []
    reaches_kv = failure not in (FailureClass.CONFIG_ERROR, FailureClass.MAX_LEN_EXCEEDS_MODEL, FailureClass.STARTUP_FREE_MEMORY, FailureClass.WEIGHTS_OOM, FailureClass.PROFILE_OOM)
    loading = "Loading model weights took {} GB" if s.engine == "V0" else "Model loading took {} GiB memory"
    if failure not in (FailureClass.CONFIG_ERROR, FailureClass.MAX_LEN_EXCEEDS_MODEL, FailureClass.STARTUP_FREE_MEMORY, FailureClass.WEIGHTS_OOM):
        logs.append(loading.format(f"{tight.weights.bytes / GiB:.4f}"))
    if not reaches_kv:
        pass
    elif s.kv_cache_memory_bytes is None:
        logs.append(f"Available KV cache memory: {_fmt_gib(tight.kv_bytes)} GiB")
    else:
        logs.append(f"reserved {_fmt_gib(s.kv_cache_memory_bytes)} GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling")
    if not layout_all.groups:
        # Attention-free KV (encoder-only pooling models): get_kv_cache_groups finds no spec, the
        # engine keeps one null block and no per-token cache; nothing bounds concurrency but memory
        # for activations (kv_cache_utils.py::get_kv_cache_config_from_groups).
        messages.append("no KV cache: every layer's attention runs over the request alone (encoder-only); "
                        "the memory after weights and activations is not a token pool")
    elif not reaches_kv or failure is FailureClass.NO_KV_MEMORY:
        pass
    elif s.engine == "V0":
        logs.append(f"# GPU blocks: {num_blocks}")
        logs.append(f"Maximum concurrency for {L} tokens per request: {concurrency:.2f}x")
    elif s.version >= (0, 28, 0):
        logs.append(f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {L:,} tokens per request: {concurrency:.2f}x")
    else:
        logs.append(f"GPU KV cache size: {tokens:,} tokens")
        logs.append(f"Maximum concurrency for {L:,} tokens per request: {concurrency:.2f}x")

    if s.kv_cache_memory_bytes is not None:
        messages.append(
            "--kv-cache-memory-bytes is set: --gpu-memory-utilization no longer sizes the KV pool but still caps start-up "
            f"(free memory must be ≥ {_fmt_gib(requested)} GiB); the profile-run headroom is now yours to keep"
        )
    kv_per_token = per_token_bytes(specs_all)
    return widen_terms(Plan(
        model=model,
        gpu=gpu,
        settings=s,
        ranks=ranks,
        layout=layout_all,
        block_size=block_size,
        num_gpu_blocks=num_blocks,
        kv_cache_tokens=tokens,
        max_concurrency=concurrency,
        blocks_per_request=bpr,
        kv_bytes_per_token=kv_per_token,
        starts=starts,
        failure=failure,
        error=error,
        messages=messages,
        log_lines=logs,
        max_fitting_len=fit_len,
        one_request_bytes=one_req,
        num_gpus=gpus,
        baseline_bytes=ntr.baseline_bytes,
        outside_bytes=outside,
    ))




def override_notes(flags: dict) -> list[str]:
    from oomguard.model.overrides import unmodelled_keys

    keys = unmodelled_keys(flags)
    if not keys:
        return []
    return [f"not modelled: --hf-overrides {', '.join(keys)} (the plan reads rope_scaling / rope_parameters and "
            "max_position_embeddings, at the top level or in text_config)"]


def platform_notes(gpu) -> list[str]:
    """What the ledger does differently off CUDA, from the GPU catalog's row for the card."""
    platform = getattr(gpu, "platform", "cuda")
    if platform == "rocm":
        notes = [f"ROCm ({gpu.arch}): attention on ROCM_ATTN (block 16; MLA on TRITON_MLA, block 16 with an fp8 KV cache too), "
                 "the P2P test skipped (platforms/rocm.py)"]
        if not getattr(gpu, "custom_all_reduce", True):
            notes.append(f"ROCm {gpu.arch}: vLLM keeps its custom all-reduce off (platforms/rocm.py::use_custom_allreduce is gfx94x/gfx95x only)")
        return notes
    if platform in ("hpu", "xpu"):
        what = "Intel Gaudi (the vllm-gaudi plugin)" if platform == "hpu" else "Intel XPU"
        return [f"{what}: this plan applies vLLM's CUDA memory accounting to {gpu.name}; the {platform} platform profiles and "
                "captures graphs its own way, so every term is an estimate (the weights and KV bytes per token hold)"]
    return []


def apply_overrides(model, flags: dict, version=None):
    """Kept for callers of the old name: ``oomguard.model.overrides.apply_overrides``."""
    from oomguard.model.overrides import apply_overrides as apply

    return apply(model, flags, version)


def _typed(value):
    if isinstance(value, str):
        for conv in (int, float):
            try:
                return conv(value)
            except ValueError:
                pass
        low = value.lower()
        if low in ("true", "false"):
            return low == "true"
    return value


def predict_fix_effect(*, model, gpu, num_gpus=None, args=None, flag: str, value, vllm_version=None) -> str | None:
    """Before/after of one flag edit, for ``diagnose``'s fixes.

    ``model`` is a ModelDescription and ``gpu`` a GPU (the caller resolves names); ``args`` are
    the non-default arguments the log showed (keys as dests or options).
    """
    m, g = model, gpu
    flags = {}
    for k, v in (args or {}).items():
        dest = str(k).lstrip("-").replace("-", "_")
        if dest not in ("model", "served_model_name", "host", "port"):
            flags[dest] = _typed(v)
    before = plan_launch(m, g, flags, version=vllm_version, num_gpus=num_gpus)
    dest = flag.lstrip("-").replace("-", "_")
    after_flags = dict(flags)
    after_flags[dest] = _typed(value) if not isinstance(value, bool) else value
    after = plan_launch(m, g, after_flags, version=vllm_version, num_gpus=num_gpus)

    def state(p: Plan) -> str:
        if p.starts:
            return f"starts, {p.kv_cache_tokens:,} KV tokens ({p.max_concurrency:.2f}x at {p.settings.max_model_len:,})"
        return f"fails: {p.failure.value}"

    return (
        f"KV pool {_fmt_gib(before.tight_rank.kv_bytes)} → {_fmt_gib(after.tight_rank.kv_bytes)} GiB, "
        f"activation {_fmt_gib(before.tight_rank.activation.bytes)} → {_fmt_gib(after.tight_rank.activation.bytes)} GiB; "
        f"{state(before)} → {state(after)}"
    )
