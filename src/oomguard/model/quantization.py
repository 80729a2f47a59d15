"""Quantization methods and the bytes they store per weight parameter.

Reads ``quantization_config`` (config.json) and ModelOpt's
``hf_quant_config.json`` into a per-module-category byte cost. Bytes per
parameter follow vLLM's ``create_weights`` of each method
(docs/memory-model.md#weights); embeddings, LM head, norms and routers stay in the
model dtype unless a method says otherwise.
"""

from __future__ import annotations

import re

from oomguard.errors import UnsupportedModelError
from oomguard.model.description import Quantization
import oomguard.lazy_re as lazy_re
from oomguard.records import NamedTuple

# Module categories the weight model asks about.
CATEGORIES = ("attn", "mlp", "experts", "shared_experts", "linear_attn", "lm_head", "embed")
# Substrings that identify a category in exclude / ignore patterns.
_CATEGORY_KEYS = {
    "attn": ("self_attn", ".attn.", "*.attn", "attention"),
    "mlp": (".mlp", "mlp*", ".ffn"),
    "experts": ("experts", "block_sparse_moe"),
    "shared_experts": ("shared_expert",),
    "linear_attn": ("linear_attn",),
    "lm_head": ("lm_head", "head"),
    "embed": ("embed_tokens", "embed"),
}


def gptq_bytes_per_param(bits: int, group: int | None) -> float:
    """qweight (bits/8) + qzeros int32 packed (bits/8 per group) + scales fp16 per group."""
    g = group if group and group > 0 else 1 << 30
    return bits / 8 + (bits / 8) / g + 2 / g


def fp8_block_bytes_per_param(block: tuple[int, int] | None) -> float:
    if not block:
        return 1.0
    return 1.0 + 4.0 / (block[0] * block[1])


NVFP4_BYTES = 0.5 + 1 / 16  # fp4 packed + fp8 scale per 16
MXFP4_BYTES = 0.5 + 1 / 32  # fp4 packed + e8m0 scale per 32


class WeightCosts(NamedTuple):
    """Bytes per parameter for each module category."""

    per_category: dict

    def bytes_per_param(self, category: str) -> float:
        return self.per_category[category]


def parse_quantization(config: dict, hf_quant: dict | None, text_cfg: dict) -> Quantization:
    qc = config.get("quantization_config") or text_cfg.get("quantization_config")
    if hf_quant and isinstance(hf_quant.get("quantization"), dict):
        algo = str(hf_quant["quantization"].get("quant_algo") or "").upper()
        if algo in ("FP8", "FP8_PB_WO", "FP8_PER_CHANNEL_PER_TOKEN"):
            return Quantization("fp8", bits=8, source="hf_quant_config.json (modelopt FP8)")
        if algo in ("NVFP4", "NVFP4_AWQ"):
            return Quantization("nvfp4", bits=4, group_size=16, source="hf_quant_config.json (modelopt NVFP4)")
        if algo == "MIXED_PRECISION":
            return Quantization("modelopt-mixed", bits=4, group_size=16, source="hf_quant_config.json (mixed)")
        if algo:
            raise UnsupportedModelError(f"hf_quant_config.json: quant_algo {algo!r} is not modelled")
    if not isinstance(qc, dict) or not qc:
        return Quantization("none")
    method = str(qc.get("quant_method") or "").lower()
    if method == "fp8":
        blk = qc.get("weight_block_size")
        return Quantization(
            "fp8",
            bits=8,
            block_size=tuple(blk) if blk else None,
            dynamic=qc.get("activation_scheme") == "dynamic",
            source="quantization_config (fp8)",
        )
    if method == "fbgemm_fp8":
        # model_executor/layers/quantization/fbgemm_fp8.py::FBGEMMFp8LinearMethod.create_weights: an
        # fp8 [out, in] weight and an fp32 [out, 1] channel scale (4 / in_features per parameter,
        # below 0.1 % for the checkpoints that use it); modules_to_not_convert is its ignore list.
        return Quantization("fp8", bits=8, dynamic=True, source="quantization_config (fbgemm_fp8, channel-wise)")
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "auto_round"):
        bits = int(qc.get("bits") or qc.get("w_bit") or 4)
        group = qc.get("group_size") or qc.get("q_group_size") or 128
        return Quantization(method.split("_")[0], bits=bits, group_size=int(group), source=f"quantization_config ({method})")
    if method == "mxfp4":
        return Quantization("mxfp4", bits=4, group_size=32, exclude_attention=True, experts_only=True, source="quantization_config (mxfp4)")
    if method == "bitsandbytes":
        bits = 4 if qc.get("load_in_4bit") else 8
        return Quantization("bitsandbytes", bits=bits, group_size=64, source="quantization_config (bitsandbytes)")
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        bits, gsize, typ = 16, None, "int"
        for grp in groups.values():
            w = grp.get("weights") or {}
            bits = int(w.get("num_bits") or bits)
            gsize = w.get("group_size") or gsize
            typ = w.get("type") or typ
            break
        fmt = str(qc.get("format") or "")
        if bits == 4 and (typ == "float" or "nvfp4" in fmt):
            return Quantization("nvfp4", bits=4, group_size=16, source="compressed-tensors (nvfp4)")
        if bits == 8 and typ == "float":
            return Quantization("fp8", bits=8, source="compressed-tensors (fp8)")
        if bits in (4, 8):
            return Quantization("gptq", bits=bits, group_size=int(gsize) if gsize else None, source="compressed-tensors (W%dA16)" % bits)
        raise UnsupportedModelError(f"compressed-tensors weights of {bits} bits ({typ}) are not modelled")
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or "").upper()
        if "FP4" in algo:
            return Quantization("nvfp4", bits=4, group_size=16, source="quantization_config (modelopt nvfp4)")
        return Quantization("fp8", bits=8, source="quantization_config (modelopt fp8)")
    if method == "gguf":
        return Quantization("gguf", bits=4, source="gguf")
    raise UnsupportedModelError(f"quantization_config.quant_method {method!r} is not modelled")


def override_quantization(q: Quantization, flag: str | None) -> Quantization:
    """Apply ``--quantization``: online fp8 quantizes a bf16 checkpoint."""
    if not flag or flag in ("None", "none"):
        return q
    flag = flag.lower()
    if flag == "fp8" and not q.is_quantized:
        return Quantization("fp8", bits=8, source="--quantization fp8 (online)")
    if q.is_quantized:
        return q
    if flag.startswith(("awq", "gptq", "marlin", "compressed")):
        return Quantization("gptq", bits=4, group_size=128, source=f"--quantization {flag} (4-bit, group 128 assumed)")
    if flag.startswith(("modelopt_fp4", "nvfp4")):
        return Quantization("nvfp4", bits=4, group_size=16, source=f"--quantization {flag}")
    if flag == "bitsandbytes":
        return Quantization("bitsandbytes", bits=4, group_size=64, source="--quantization bitsandbytes (4-bit assumed)")
    return q


_ENDINGS = {
    "linear_attn": ("linear_attn",),
    "attn": ("self_attn", "attn", "attention"),
    "shared_experts": ("shared_experts", "shared_expert"),
    "experts": ("experts", "block_sparse_moe"),
    "mlp": ("mlp", "ffn"),
}
_LAYER_INDEX = lazy_re.compile(r"layers\.(\d+)\.")
_WHOLE_LAYER = lazy_re.compile(r"layers\.(\d+)$")
# The projections vLLM checks one by one against an ignore list (quant_utils.is_layer_skipped: the
# checkpoint's unfused names, exact match), per category: a layer's category stays unquantized when
# its listed projections cover one of these sets.
_PROJECTIONS = {
    "attn": ({"q_proj", "k_proj", "v_proj", "o_proj"}, {"qkv_proj", "o_proj"}),
    "mlp": ({"gate_proj", "up_proj", "down_proj"}, {"gate_up_proj", "down_proj"}),
}
_PROJ_OWNER = {p: c for c, sets in _PROJECTIONS.items() for group in sets for p in group}


def excluded_fraction(patterns: list[str], category: str, num_layers: int) -> float:
    """Share of layers whose ``category`` module a pattern keeps unquantized.

    A pattern excludes a module when it ends with the module's name (after
    trailing wildcards), e.g. ``model.layers.*.self_attn`` or ``layers.3.mlp*``;
    one naming a sub-module (``linear_attn.conv1d``) does not exempt the whole.
    """
    layers: set[int] = set()
    listed: dict[int, set[str]] = {}  # layer -> projections of this category named there
    for p in patterns:
        stem = p.lower().rstrip("*").rstrip(".")
        if stem.startswith(("mtp", "model.mtp")) or ".mtp." in stem:
            continue  # the speculative head's own layers ("mtp.layers.0*"), not the decoder's
        whole = _WHOLE_LAYER.search(stem)
        if whole is not None:  # "model.layers.0": every module of that layer (Meta's 405B FP8)
            layers.add(int(whole.group(1)))
            continue
        leaf = stem.rsplit(".", 1)[-1]
        if _PROJ_OWNER.get(leaf) == category and ".experts." not in stem and "shared_expert" not in stem:
            m = _LAYER_INDEX.search(stem)
            if m is not None:
                listed.setdefault(int(m.group(1)), set()).add(leaf)
            continue
        owner = next((c for c, ends in _ENDINGS.items() if stem.endswith(ends)), None)
        if owner != category:
            continue
        m = _LAYER_INDEX.search(p)
        if m is None:
            return 1.0
        layers.add(int(m.group(1)))
    for i, named in listed.items():
        if any(group <= named for group in _PROJECTIONS[category]):
            layers.add(i)
    if num_layers:
        layers = {i for i in layers if i < num_layers}
    return min(1.0, len(layers) / num_layers) if num_layers else 0.0


def weight_costs(q: Quantization, dtype_bytes: int, config: dict, hf_quant: dict | None) -> WeightCosts:
    """Bytes per parameter for each module category under this quantization."""
    base = {c: float(dtype_bytes) for c in CATEGORIES}
    if not q.is_quantized:
        return WeightCosts(base)
    if q.method == "fp8":
        linear = fp8_block_bytes_per_param(q.block_size)
    elif q.method in ("awq", "gptq", "auto-round", "auto"):
        linear = gptq_bytes_per_param(q.bits, q.group_size)
    elif q.method in ("nvfp4", "modelopt-mixed"):
        linear = NVFP4_BYTES
    elif q.method == "mxfp4":
        linear = MXFP4_BYTES
    elif q.method == "bitsandbytes":
        linear = 0.5 + 4 / 64 if q.bits == 4 else 1.0 + 4 / 4096
    elif q.method == "gguf":
        linear = 4.5 / 8
    else:
        linear = float(dtype_bytes)
    costs = dict(base)
    for c in ("attn", "mlp", "experts", "shared_experts", "linear_attn"):
        costs[c] = linear
    if q.experts_only:
        for c in ("attn", "mlp", "shared_experts", "linear_attn"):
            costs[c] = float(dtype_bytes)
    qc = config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config") or {}
    patterns: list[str] = []
    for key in ("modules_to_not_convert", "ignore", "exclude_modules"):
        if isinstance(qc.get(key), list):
            patterns += [str(p) for p in qc[key]]
    if hf_quant and isinstance(hf_quant.get("quantization"), dict):
        hq = hf_quant["quantization"]
        patterns += [str(p) for p in hq.get("exclude_modules") or []]
        layers = hq.get("quantized_layers")
        if isinstance(layers, dict) and layers:
            # Mixed precision: look at which algo each category got.
            seen: dict[str, str] = {}
            for name, spec in layers.items():
                algo = str((spec or {}).get("quant_algo", "")).upper()
                for c in ("experts", "shared_experts", "linear_attn", "attn", "mlp"):
                    keys = _CATEGORY_KEYS[c]
                    if any(k.strip("*.") in name for k in keys):
                        seen.setdefault(c, algo)
                        break
            for c in ("attn", "mlp", "experts", "shared_experts", "linear_attn"):
                algo = seen.get(c)
                if algo is None:
                    costs[c] = float(dtype_bytes)
                elif "FP8" in algo:
                    costs[c] = 1.0
                elif "FP4" in algo:
                    costs[c] = NVFP4_BYTES
    if q.method == "fp8" and str((config.get("text_config") or config).get("expert_dtype") or "") == "fp4":
        # DeepSeek-V4 (deepseek_v4_fp8, models/deepseek_v4/quant_config.py): FP8 block linears,
        # routed experts MXFP4 (Mxfp4MoEMethod) when expert_dtype is "fp4".
        costs["experts"] = MXFP4_BYTES
    num_layers = int((config.get("text_config") or config).get("num_hidden_layers") or 0)
    for c in ("attn", "mlp", "experts", "shared_experts", "linear_attn"):
        f = excluded_fraction(patterns, c, num_layers)
        if f:
            costs[c] = costs[c] * (1 - f) + float(dtype_bytes) * f
    return WeightCosts(costs)
