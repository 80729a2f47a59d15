"""The sampler warm-up at the end of the profile run, per release family and kernel path.

Pure arithmetic. Every byte below is a tensor the named vLLM code allocates over the N =
min(max_num_seqs, max_num_batched_tokens) dummy rows of V-wide logits (docs/memory-model.md,
"Sampler warm-up"). Element sizes: ``b`` is the logits dtype (the model / activation dtype), fp32
is 4, int64 indices 8, bool masks 1. The PyTorch sort path and the MRV2 profile pass are checked
against vLLM 0.32 itself on the CPU build (scripts/vllm_activation_oracle.py,
tests/unit/test_activation_oracle.py); the Triton and FlashInfer paths are derived from source
(CUDA only) and measured by benchmarks/gpu_activation_check.py where a GPU is lent.
"""

from __future__ import annotations

from oomguard.records import NamedTuple

# ParallelLMHead pads the vocabulary to a multiple of 64 (DEFAULT_VOCAB_PADDING_SIZE); logits are
# a view of the padded [N, V_pad] storage (logits_processor.py::_get_logits slices it).
VOCAB_PAD = 64
# Triton top-k/top-p kernels (v1/sample/ops/topk_topp_triton.py, PR #33538, merged Feb 2026):
# the first release carrying them is inferred from the merge date, not read from the tag.
TRITON_TOPK_TOPP_SINCE = (0, 16, 0)
# MRV2 _dummy_sampler_run samples the for_sampler_warmup() parameters in the profile from 0.33
# (PR #57926); through 0.32 that pass runs in warmup_kernels, after the KV cache is allocated.
MRV2_WARM_PROFILE_SINCE = (0, 33, 0)
# V0 sampler (0.6-0.7, or VLLM_USE_V1=0): a constant FITTED from one log, PR #10511
# (Llama-3-8B, H100, S=256: "PyTorch activation peak memory 1.26GiB" at TP1 and TP2, i.e.
# 1.26 GiB / (256 x 128,256) = 41.2 bytes per logit element), not derived.
V0_FITTED_BYTES_PER_ELEMENT = 41.2
# The fitted constants of this module and their sources (benchmarks/calibration.py re-fits them).
FITTED_CONSTANTS = {"V0_FITTED_BYTES_PER_ELEMENT": "vllm PR #10511 log (Llama-3-8B, H100; no calibration record)"}
DEFAULT_SMS = 132  # H100 SXM; the Triton buffer is min(next_pow2(N), SMs) rows
# MRV1 _dummy_sampler_run's second pass, with a torch.Generator so that forward_native is warmed
# too, came with PR #41375 (merged 2026-04-30, a follow-up to #40376 that turned the FlashInfer
# sampler on by default, first in 0.21's flag table). Before it the profile ran the sampler once
# with generators={}: where FlashInfer is on, forward_cuda -> flashinfer_sample is the only path
# profiled (v1/sample/ops/topk_topp_sampler.py::forward_cuda falls back to forward_native only
# for per-request generators). The release carrying #41375 is ASSUMED to be 0.21 (its merge date,
# next to #40376); not read from the tag.
FORWARD_NATIVE_WARM_SINCE = (0, 21, 0)


class SamplerPeak(NamedTuple):
    """The sampler's peak memory in the profile run."""
    path: str  # "sort" | "triton" | "flashinfer" | "mrv2" | "mrv2-warm" | "v0"
    bytes: int  # live bytes of the sampler phase: logits + the sampler's own tensors
    low: int
    high: int
    formula: str
    assumption: str


def padded_vocab(V: int) -> int:
    return -(-V // VOCAB_PAD) * VOCAB_PAD


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# Earlier forms of the same function, as public copies of vLLM's V1 sampler show them: the
# re-sort was an out-of-place ``logits_sort.scatter(...)`` (one more fp32 [N, V]) and, earlier
# still, ``cumsum`` had no ``out=`` (one more). The releases where each form changed were not
# read from the tags: ASSUMED boundaries, so those releases carry the neighbouring form as range.
SORT_SCATTER_INPLACE_SINCE = (0, 12, 0)  # assumed
SORT_CUMSUM_OUT_SINCE = (0, 9, 0)  # assumed


# torch.sort on CUDA for rows of 1,024 < V < 1,000,000 values, several rows
# (aten/src/ATen/native/cuda/Sort.cu, segmented_sort_pairs): an int64 "reverse indices" buffer
# of N·V (8 bytes per value) and cub's DeviceSegmentedRadixSort::SortPairs temp storage holding
# the alternate key (fp32, 4) and value (int64, 8) buffers, all alive while the sort runs, beside
# the fp32 input and the sorted values and indices. Read from the PyTorch source, not measured
# here; it matches the H100 0.11 records (S110-S119: 37 bytes per logit logged, 38 modelled).
CUDA_SORT_TEMP_BYTES = 8 + 4 + 8


def sort_path_bytes(N: int, V: int, b: int, version: tuple[int, int, int] = (0, 32, 0), platform: str = "cpu") -> int:
    """MRV1 Sampler.forward -> TopKTopPSampler.forward_native -> apply_top_k_top_p_pytorch.

    logits.to(float32) (a copy unless the logits are fp32 already) + logits.sort(): values fp32
    and int64 indices + the top-k mask (bool, kept alive to the end of the function) + softmax of
    the sorted values (fp32; cumsum writes into it) + the top-p mask (bool). The softmax/q pair
    that follows (8 bytes) is smaller than the 18 it replaces. Older forms add the out-of-place
    re-sort (4) and the cumsum output (4). On CUDA the sort itself peaks higher: the fp32 input,
    its outputs (4 + 8) and the segmented sort's temporaries (CUDA_SORT_TEMP_BYTES); the CPU
    build's sort keeps no such buffers (what scripts/vllm_activation_oracle.py measures)."""
    copy = 0 if b == 4 else 4
    older = (4 if version < SORT_SCATTER_INPLACE_SINCE else 0) + (4 if version < SORT_CUMSUM_OUT_SINCE else 0)
    after_sort = copy + 4 + 8 + 1 + 4 + 1 + older
    during_sort = copy + 4 + 8 + (CUDA_SORT_TEMP_BYTES if platform == "cuda" else 0)
    return N * V * max(after_sort, during_sort)


def triton_path_bytes(N: int, V: int, b: int, sms: int) -> int:
    """forward_native with apply_top_k_top_p_triton: masking in place on the fp32 logits, a cached
    [min(next_pow2(N), SMs), V] fp32 buffer, then softmax probs (fp32) + the exponential noise q."""
    copy = 0 if b == 4 else 4
    return N * V * (copy + 4 + 4) + min(_next_pow2(N), sms) * V * 4


def flashinfer_path_bytes(N: int, V: int, b: int) -> int:
    """forward_cuda -> flashinfer top_k_top_p_sampling_from_logits: top_k_mask_logits output and
    its softmax, both fp32, beside the fp32 copy."""
    copy = 0 if b == 4 else 4
    return N * V * (copy + 4 + 4)


def mrv2_profile_bytes(N: int, V: int) -> int:
    """MRV2 _dummy_sampler_run through 0.32: a dummy batch with no request state, so
    apply_sampling_params returns the logits untouched, top-k/top-p are off (SamplingStates fills
    top_k = V, top_p = 1) and gumbel_sample writes two [N, ceil(V/1024)] buffers (int64, fp32),
    then the block argmax [N, 1] and the gathered token ids [N] (int64 each)."""
    return N * (-(-V // 1024)) * (8 + 4) + N * 16


def mrv2_warm_bytes(N: int, V: int, *, flashinfer: bool) -> int:
    """MRV2 >= 0.33 profiles the for_sampler_warmup() pass: the fp32 copy in apply_sampling_params
    (penalties, bias, bad words, temperature, min-p in place), then FlashInfer's masked logits and
    probs (8) or, with Triton, in-place masking; logprobs=5 takes a fp32 log_softmax (4)."""
    return N * V * (4 + (8 if flashinfer else 4))


def sampler_peak(
    N: int,
    V: int,
    b: int,
    *,
    version: tuple[int, int, int],
    engine: str,
    mrv2: bool,
    tp: int = 1,
    env: dict | None = None,
    sms: int | None = None,
    flashinfer_default: bool | None = None,
) -> SamplerPeak:
    """The sampler phase's live bytes: [N, V_pad] logits (plus the TP shard while it is gathered)
    and the path's own tensors, for the path this release and environment take."""
    env = env or {}
    Vp = padded_vocab(V)
    logits = N * Vp * b
    gather = N * Vp * b // tp if tp > 1 else 0  # the [N, V_pad/TP] shard, alive during the gather
    sm = sms or DEFAULT_SMS
    fi_env = env.get("VLLM_USE_FLASHINFER_SAMPLER")
    fi_on = (str(fi_env) == "1") if fi_env is not None else bool(flashinfer_default)

    def out(path, work, lo_work, hi_work, formula, assumption):
        base = logits + max(gather, work)
        return SamplerPeak(path, int(base), int(logits + max(gather, lo_work)), int(logits + max(gather, hi_work)),
                           f"logits {N}·{Vp}·{b}" + (f" (+ TP shard {N}·{Vp}/{tp}·{b} while gathered)" if gather else "")
                           + f" + {formula}", assumption)

    if engine == "V0":
        work = int(N * V * V0_FITTED_BYTES_PER_ELEMENT) - logits
        return out("v0", work, int(work * 0.75), int(work * 1.1),
                   f"V0 sampler {N}·{V}·{V0_FITTED_BYTES_PER_ELEMENT} B − logits (FITTED, PR #10511)",
                   "V0 sampler (sort + logprobs): a constant fitted from one logged record, not derived")
    if mrv2:
        if version >= MRV2_WARM_PROFILE_SINCE:
            # FlashInfer on (the release's default, or the env var): the fused top-k/top-p kernel
            # adds no [N, V] tensor in current FlashInfer (PR #57926 logged ≈ 7.1 B per element
            # for the whole pass, i.e. the fp32 copy and the fp32 logprobs only); its older
            # Python path (masked logits + probs) is the range top. Off: Triton masks in place
            # beside its cached [min(pow2(N), SMs), V] buffer.
            base_work = N * V * (4 + 4)
            if fi_on:
                work, hi = base_work, mrv2_warm_bytes(N, V, flashinfer=True)
                how = "FlashInfer (fused masking)"
            else:
                work = base_work + min(_next_pow2(N), sm) * V * 4
                hi = work
                how = "Triton masking in place + its buffer"
            return out("mrv2-warm", work, N * V * 4, max(hi, work),
                       f"warm-up pass {N}·{V}·(4 fp32 copy + 4 fp32 logprobs)" + ("" if fi_on else f" + Triton buffer min(pow2({N}), {sm})·{V}·4"),
                       f"MRV2 profiles the for_sampler_warmup() pass (0.33+): {how}; "
                       "VLLM_USE_FLASHINFER_SAMPLER settles the path, else the release's default")
        work = mrv2_profile_bytes(N, V)
        return out("mrv2", work, work, work, f"gumbel buffers {N}·⌈{V}/1024⌉·12",
                   "MRV2 profile pass through 0.32: no logits processing, no top-k/top-p (v1/worker/gpu/sample/sampler.py)")
    # MRV1 before the forward_native warm pass (FORWARD_NATIVE_WARM_SINCE): one sampler pass with
    # no generators, so FlashInfer, where it is on, is the only path the profile sees. Through 0.11.0
    # the release default (None) meant "on when FlashInfer is installed", which a launch does not
    # show (the 0.10.1 logs of S100-S105 print "Using FlashInfer for top-p & top-k sampling", the
    # 0.10.2 / 0.11.0 peaks of S015 / S059 are the native path's): only VLLM_USE_FLASHINFER_SAMPLER=1
    # settles it; unset, the native path stays the estimate and FlashInfer its range bottom.
    if fi_env is not None and str(fi_env) == "1" and version < FORWARD_NATIVE_WARM_SINCE:
        work = flashinfer_path_bytes(N, V, b)
        native = (triton_path_bytes(N, V, b, sm) if version >= TRITON_TOPK_TOPP_SINCE
                  else sort_path_bytes(N, V, b, version, platform="cuda"))
        return out("flashinfer", work, work, max(native, work),
                   f"{N}·{V}·({0 if b == 4 else 4} fp32 copy + 4 top-k masked logits + 4 probs)",
                   "MRV1 forward_cuda -> flashinfer top_k_top_p_sampling_from_logits (top_k_first: "
                   "top_k_mask_logits, softmax, top_p_sampling_from_probs); one profile pass with no "
                   f"generators before {'.'.join(map(str, FORWARD_NATIVE_WARM_SINCE))} (PR #41375, assumed "
                   "boundary); the PyTorch-native path, taken if FlashInfer is missing, is the range top")
    # From then on the first pass may take FlashInfer (forward_cuda) and the second (with a
    # torch.Generator) falls back to forward_native, which sets the peak.
    if version >= TRITON_TOPK_TOPP_SINCE:
        work = triton_path_bytes(N, V, b, sm)
        lo = flashinfer_path_bytes(N, V, b)
        # The boundary is inferred from the merge date: next to it the sort path is the range top.
        hi = sort_path_bytes(N, V, b, platform="cuda") if version < (0, 18, 0) else work
        return out("triton", work, lo, max(hi, work),
                   f"{N}·{V}·({0 if b == 4 else 4} fp32 copy + 4 probs + 4 noise) + Triton buffer min(pow2({N}), {sm} SMs)·{V}·4",
                   f"MRV1 forward_native with Triton top-k/top-p (>= {'.'.join(map(str, TRITON_TOPK_TOPP_SINCE))}, "
                   "PR #33538; the sort path is the range top for releases next to that boundary)")
    work = sort_path_bytes(N, V, b, version, platform="cuda")
    lo = flashinfer_path_bytes(N, V, b) if (fi_on or version < (0, 11, 1)) else work
    if version >= (0, 14, 0):  # next to the inferred Triton boundary: Triton is the range bottom
        lo = min(lo, triton_path_bytes(N, V, b, sm))
    hi = max(work, sort_path_bytes(N, V, b, (0, 8, 0), platform="cuda") if version < (0, 14, 0) else work)
    return out("sort", work, lo, hi,
               f"{N}·{V}·max(during the sort: {0 if b == 4 else 4} fp32 copy + 4 sorted + 8 int64 idx + "
               f"{CUDA_SORT_TEMP_BYTES} CUDA segmented-sort temporaries; after it: {0 if b == 4 else 4} + 4 + 8 + 1 top-k mask + 4 probs + 1 top-p mask"
               + (" + 4 out-of-place re-sort" if version < SORT_SCATTER_INPLACE_SINCE else "")
               + (" + 4 cumsum" if version < SORT_CUMSUM_OUT_SINCE else "") + ")",
               "MRV1 forward_native, PyTorch sort path (v1/sample/ops/topk_topp_sampler.py::apply_top_k_top_p_pytorch); "
               "FlashInfer's first pass is the range bottom where it may be on")
