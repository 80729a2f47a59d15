"""MXFP4 MoE kernels: which backend vLLM picks, and how it pads the expert weights.

docs/memory-model.md#weights. Read from the 0.32 wheel:
``model_executor/layers/fused_moe/oracle/mxfp4.py`` (``_get_priority_backends_for_gpt_oss``,
``mxfp4_round_up_hidden_size_and_intermediate_size``) and ``quantization/mxfp4.py``
(``Mxfp4MoEMethod.maybe_roundup_sizes`` → ``create_weights``). The padded sizes are what
``create_weights`` allocates per rank: ``w13 [E, 2·I_p, H_p/2]``, ``w2 [E, H_p, I_p/2]`` plus
one e8m0 scale per 32 values.
"""

from __future__ import annotations

from oomguard.units import cdiv

# --moe-backend values (0.32 ``_get_requested_backends``) and the kernel family they select.
MOE_BACKEND_FLAG = {
    "marlin": "marlin", "triton": "triton", "triton_unfused": "triton",
    "flashinfer_trtllm": "flashinfer_trtllm", "flashinfer_trtllm_afp8": "flashinfer_trtllm",
    "flashinfer_cutlass": "flashinfer_cutlass", "flashinfer_cutlass_afp8": "flashinfer_cutlass",
    "aiter": "rocm", "emulation": "emulation", "cpu": "cpu",
}
# 0.32 moves Triton behind Marlin on consumer Blackwell (sm12x): 99 KB shared memory.
SM120_MARLIN_FIRST = (0, 32, 0)
# The Triton path needs the ``triton_kernels`` package (``has_triton_kernels()`` in
# get_mxfp4_backend); without it Hopper falls back to weight-only Marlin. Up to 0.11 a stock
# ``pip install vllm`` did not ship it (vllm#27370, 2025-10-22: "users have to install
# triton_kernels manually"; vllm#26582: on 0.11.0 no published triton_kernels even imported).
# vllm#28788 (merged 2025-11-15) copies it into the wheel as vllm/third_party/triton_kernels,
# first in 0.12.0 (0.11.1 was already at rc4 on 2025-10-27, vllm#27542). Calibration S132
# (0.10.1, Marlin logged, 65.97 GiB) and S133 (0.11.0, pip env) are on the Marlin side.
TRITON_KERNELS_BUNDLED = (0, 12, 0)


def mxfp4_backend(version: tuple[int, int, int], gpu_cc: tuple[int, int], *, vendor: str = "nvidia",
                  moe_backend: str | None = None, env: dict | None = None,
                  triton_kernels: bool | None = None) -> tuple[str, str]:
    """(backend family, why), following the priority list of the release for gpt-oss-style MoE.

    ``triton_kernels``: whether the ``triton_kernels`` package is importable; None = what the
    release's own wheel ships (TRITON_KERNELS_BUNDLED)."""
    env = env or {}
    flag = str(moe_backend or "auto").lower()
    if flag != "auto" and flag in MOE_BACKEND_FLAG:
        return MOE_BACKEND_FLAG[flag], f"--moe-backend {flag}"
    if str(env.get("VLLM_MXFP4_USE_MARLIN", "")).lower() in ("1", "true"):
        return "marlin", "VLLM_MXFP4_USE_MARLIN=1"
    if vendor == "amd":
        return "rocm", "ROCm (AITER / Triton)"
    if (10, 0) <= gpu_cc < (12, 0):
        return "flashinfer_trtllm", f"sm{gpu_cc[0]}{gpu_cc[1]}: FlashInfer TRT-LLM MoE first"
    has = triton_kernels if triton_kernels is not None else version >= TRITON_KERNELS_BUNDLED
    if gpu_cc >= (9, 0) and not has:
        return "marlin", f"sm{gpu_cc[0]}{gpu_cc[1]} without triton_kernels (not in the wheel before 0.12): weight-only Marlin"
    if gpu_cc >= (12, 0):
        if version >= SM120_MARLIN_FIRST:
            return "marlin", f"sm{gpu_cc[0]}{gpu_cc[1]} (consumer Blackwell): Marlin before Triton from 0.32"
        return "triton", f"sm{gpu_cc[0]}{gpu_cc[1]}: OAI Triton kernels"
    if gpu_cc >= (9, 0):
        return "triton", "sm90: OAI Triton kernels"
    return "marlin", f"sm{gpu_cc[0]}{gpu_cc[1]} < sm90: no native FP4, weight-only Marlin"


def _round_up(x: int, k: int) -> int:
    return cdiv(x, k) * k


# FITTED for the Triton path: create_weights rounds I to 64 only, but the logged "Model loading
# took 64.38 GiB" for gpt-oss-120b on one H100 (Triton backend, 0.14.1; failures F021 in
# /work/shared/calibration) equals I padded to 256 (the triton_kernels swizzled layouts pad
# after loading). Marlin's rule reproduces F020 (65.97 GiB, Marlin, ~0.10.1) to 0.1 %.
TRITON_EFFECTIVE_I_ALIGN = 256
# The fitted constants of this module and their records (benchmarks/calibration.py re-fits them).
FITTED_CONSTANTS = {"TRITON_EFFECTIVE_I_ALIGN": "F021 (failures.jsonl; vllm#33155, 0.14.1); S110 S111 agree"}


def mxfp4_padded_sizes(backend: str, hidden: int, inter_per_partition: int, *, effective: bool = True) -> tuple[int, int]:
    """(H_p, I_p) per rank, mxfp4_round_up_hidden_size_and_intermediate_size @0.32.

    ``effective=False`` gives exactly what create_weights allocates; the default adds the
    fitted post-load padding of the Triton path (TRITON_EFFECTIVE_I_ALIGN)."""
    if backend in ("marlin", "flashinfer_trtllm"):
        return _round_up(hidden, 256), _round_up(inter_per_partition, 128)
    if backend == "flashinfer_cutlass":
        return _round_up(hidden, 128), _round_up(inter_per_partition, 128)
    if backend == "rocm":
        return _round_up(hidden, 256), _round_up(inter_per_partition, 256)
    if backend in ("emulation", "cpu"):
        k = 32
        return _round_up(hidden, k), _round_up(inter_per_partition, k)
    if backend == "triton":
        return hidden, _round_up(inter_per_partition, TRITON_EFFECTIVE_I_ALIGN if effective else 64)
    return hidden, inter_per_partition  # checkpoint layout (host copy)
