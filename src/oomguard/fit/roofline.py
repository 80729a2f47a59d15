"""Rough speed figures for fit's trade-offs: a roofline on the GPU catalog's bandwidth and FLOP/s.

Every figure here is an *estimate, roofline, ±50%*: it ignores kernel
efficiency curves, communication, scheduling and speculative decoding, and
only serves to compare candidate launches with each other.

- **prefill** of an I-token prompt runs in ``ceil(I / T)`` chunks (steps);
  each chunk costs ``2·P_active·T`` FLOPs for the linear layers plus attention
  over the context already in the cache, divided by TP (pipeline stages run
  one after another for one request), at ``bf16_tflops × COMPUTE_EFFICIENCY``;
  a chunk can never be faster than reading the weights once, and every step
  pays a fixed scheduling overhead;
- **decode** at concurrency C: one step reads the weights once and every
  sequence's KV, ``(W + C·ctx·kv_bytes_per_token) / (bandwidth × BANDWIDTH_EFFICIENCY)``,
  plus the step overhead (larger without CUDA graphs); tokens/s = C / step.
"""

from __future__ import annotations

import math

from oomguard.model.description import LayerKind
from oomguard.records import NamedTuple

LABEL = "estimate, roofline, ±50%"
COMPUTE_EFFICIENCY = 0.5  # fraction of dense BF16 peak reached by prefill GEMMs + attention
BANDWIDTH_EFFICIENCY = 0.75  # fraction of HBM bandwidth reached by decode
STEP_OVERHEAD_S = 0.003  # scheduler, input preparation, sampling: per engine step
EAGER_LAUNCH_S_PER_LAYER = 40e-6  # kernel launches per layer per step without CUDA graphs


def prefill_steps(prompt_len: int, token_budget: int) -> int:
    """Forward steps chunked prefill needs for one prompt (S3: 750,000 at 8,192 → 92)."""
    return math.ceil(prompt_len / token_budget) if prompt_len > 0 else 0


def _text_layers(model) -> list:
    # Auxiliary caches (the V3.2 indexer) are listed as extra layers; they are not decoder layers.
    return [layer for layer in model.layers if layer.name != "indexer"][: model.num_layers]


def active_params(model) -> float:
    """Parameters one token passes through (MoE: top-k + shared experts), embeddings and LM head excluded."""
    H = model.hidden_size
    total = 0.0
    for layer in _text_layers(model):
        if layer.kind is LayerKind.MAMBA and layer.mamba is not None:
            st = layer.mamba
            inner = st.num_heads * st.head_v_dim
            total += H * (2 * max(1, st.n_groups) * st.head_k_dim + 2 * inner) + inner * H
        elif layer.kind is LayerKind.MLA and model.mla is not None:
            a = model.mla
            hq = model.num_attention_heads
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            q = (H * a.q_lora_rank + a.q_lora_rank * hq * qk) if a.q_lora_rank else H * hq * qk
            total += q + H * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * hq * (a.qk_nope_head_dim + a.v_head_dim) + hq * a.v_head_dim * H
        else:
            D = model.head_size
            total += H * model.num_attention_heads * D * 2 + 2 * H * model.num_kv_heads * D
        if layer.moe and model.moe is not None:
            e = model.moe
            total += e.top_k * 3 * H * e.expert_intermediate_size + 3 * H * e.shared_intermediate_size
        else:
            inter = (model.moe.dense_intermediate_size if model.moe and model.moe.dense_intermediate_size else model.intermediate_size) or 4 * H
            total += 3 * H * inter
    return total


def _attention_shape(model) -> tuple[float, int, list[int]]:
    """(FLOPs per token per context token per full layer, number of full layers, sliding windows)."""
    hq = model.num_attention_heads
    if model.mla is not None:
        a = model.mla
        per = 2 * hq * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
    else:
        per = 4 * hq * model.head_size
    full, windows = 0, []
    for layer in _text_layers(model):
        if layer.kind is LayerKind.SLIDING_WINDOW and layer.sliding_window:
            windows.append(layer.sliding_window)
        elif layer.kind is LayerKind.CHUNKED_LOCAL and layer.chunk_size:
            windows.append(layer.chunk_size)
        elif layer.kind in (LayerKind.FULL, LayerKind.MLA, LayerKind.CROSS):
            full += 1
    return per, full, windows


class Roofline(NamedTuple):
    """Speed of one launch shape (model, GPU, TP, PP, eager) on the catalog's peak numbers."""

    flops_per_token: float  # 2 × active parameters
    attn_flops_per_ctx: float
    full_layers: int
    windows: tuple[int, ...]
    num_layers: int
    weights_bytes: float  # bytes one TP rank reads per step, summed over pipeline stages
    kv_bytes_per_token: float  # per TP rank, all layers
    tensor_parallel_size: int
    flops: float  # usable FLOP/s of one GPU
    bandwidth: float  # usable bytes/s of one GPU
    eager: bool

    @classmethod
    def build(cls, model, gpu, *, tensor_parallel_size: int, weights_bytes: float, kv_bytes_per_token: float, eager: bool) -> "Roofline":
        per, full, windows = _attention_shape(model)
        tflops = gpu.bf16_tflops
        if model.quantization.method == "fp8" and gpu.supports_fp8:
            tflops *= 2  # FP8 tensor cores for FP8 checkpoints on sm89+
        return cls(
            2 * active_params(model),
            per,
            full,
            tuple(windows),
            model.num_layers,
            weights_bytes,
            kv_bytes_per_token,
            tensor_parallel_size,
            tflops * 1e12 * COMPUTE_EFFICIENCY,
            gpu.bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY,
            eager,
        )

    def _attention_flops(self, start: int, end: int) -> float:
        """Attention FLOPs of tokens start..end (each attends to everything before it, or its window)."""
        n = end - start
        full = self.full_layers * (end * end - start * start) / 2
        sw = 0.0
        for w in self.windows:
            # tokens before the window fills attend to c tokens, then to w
            a, b = start, min(end, w)
            part = (b * b - a * a) / 2 if b > a else 0.0
            sw += part + w * max(0, end - max(start, w))
        return self.attn_flops_per_ctx * (full + sw) if n > 0 else 0.0

    @property
    def weight_read_s(self) -> float:
        return self.weights_bytes / self.bandwidth

    @property
    def step_overhead_s(self) -> float:
        return STEP_OVERHEAD_S + (EAGER_LAUNCH_S_PER_LAYER * self.num_layers if self.eager else 0.0)

    def chunk_s(self, token_budget: int, context: int) -> float:
        """One prefill step of ``token_budget`` tokens after ``context`` tokens already cached."""
        flops = self.flops_per_token * token_budget + self._attention_flops(context, context + token_budget)
        return max(flops / (self.tensor_parallel_size * self.flops), self.weight_read_s) + STEP_OVERHEAD_S

    def prefill_s(self, prompt_len: int, token_budget: int) -> float:
        """Time to first token of a ``prompt_len`` prompt alone on the server, chunked by ``token_budget``."""
        steps = prefill_steps(prompt_len, token_budget)
        if steps == 0:
            return 0.0
        flops = self.flops_per_token * prompt_len + self._attention_flops(0, prompt_len)
        compute = flops / (self.tensor_parallel_size * self.flops)
        return max(compute, steps * self.weight_read_s) + steps * STEP_OVERHEAD_S

    def prefill_tokens_per_s(self, prompt_len: int, token_budget: int) -> float:
        """Prompt tokens per second while prefilling one ``prompt_len`` prompt in ``token_budget`` chunks."""
        t = self.prefill_s(prompt_len, token_budget)
        return prompt_len / t if t > 0 else 0.0

    def decode_step_s(self, concurrency: int, context: int) -> float:
        read = self.weights_bytes + concurrency * context * self.kv_bytes_per_token
        compute = (self.flops_per_token * concurrency + self.attn_flops_per_ctx * self.full_layers * context * concurrency) / (self.tensor_parallel_size * self.flops)
        return max(read / self.bandwidth, compute) + self.step_overhead_s

    def decode_tokens_per_s(self, concurrency: int, context: int) -> float:
        """Generated tokens per second over all ``concurrency`` sequences of ``context`` tokens."""
        if concurrency <= 0:
            return 0.0
        return concurrency / self.decode_step_s(concurrency, context)

    def mixed_step_s(self, token_budget: int, concurrency: int, context: int) -> float:
        """A decode step that also carries one prefill chunk: the inter-token latency while prompts arrive."""
        chunk = self.flops_per_token * token_budget + self._attention_flops(context, context + token_budget)
        compute = (chunk + self.flops_per_token * concurrency) / (self.tensor_parallel_size * self.flops)
        read = (self.weights_bytes + concurrency * context * self.kv_bytes_per_token) / self.bandwidth
        return max(compute, read) + self.step_overhead_s
