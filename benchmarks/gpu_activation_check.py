"""On a CUDA machine (PyTorch with CUDA, no vLLM), measure what the activation oracle cannot run on
the CPU build: the sampler paths' and a few layers' forward peak under the CUDA caching allocator,
and compare them with oomguard's terms (model/sampler.py, model/phases.py, platform="cuda").

    python benchmarks/gpu_activation_check.py                 # prints a table, writes JSON to --out
    python benchmarks/gpu_activation_check.py --out benchmarks/results/gpu_activation_check.json

What runs (each measurement: reset_peak_memory_stats, then max_memory_allocated minus what was
allocated before; inputs are created before the reset, as in the CPU oracle):

- sampler, PyTorch sort path: the op sequence of vLLM's apply_top_k_top_p_pytorch after the fp32
  up-cast (sort, int64 indices, top-k mask, softmax + cumsum, top-p mask, scatter), then softmax
  and the exponential noise of random_sample; bf16 logits in;
- sampler, fp32 copy + softmax + noise only (the shape of the Triton path, whose kernel masks in
  place; its cached [min(pow2(N), SMs), V] buffer is added from the device's SM count);
- sampler, FlashInfer top_k_top_p_sampling_from_logits when flashinfer is importable;
- forward: a Llama-style decoder layer in bf16 with attention skipped (zero-filled output, as in
  the profile run), silu_and_mul as one fused output (torch.ops._C is absent here, so the
  benchmark writes silu(x1)*x2 into a preallocated [T, I] tensor: the memory shape of the CUDA
  kernel), fused add-norm in place.

It reimplements those op sequences (vLLM is not installed on the GPU machine); it measures what
the CUDA allocator does with them, which is the part the CPU oracle cannot see (512-byte block
rounding, cuBLAS workspaces outside the tensor count, FlashInfer's internals). No GPU was lent in
the round that wrote this: it has not been run; it exits 2 with a message when CUDA is absent.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _peak(fn, *args):
    import torch

    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn(*args)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    torch.cuda.empty_cache()
    return peak


def sort_path(logits, k, p):
    import torch

    x = logits.to(torch.float32)
    x.div_(0.5)
    s, idx = x.sort(dim=-1, descending=False)
    kth = s.gather(1, (s.size(1) - k.long()).unsqueeze(1))
    kmask = s < kth
    s.masked_fill_(kmask, float("-inf"))
    ps = s.softmax(dim=-1)
    torch.cumsum(ps, dim=-1, out=ps)
    pmask = ps <= 1 - p.unsqueeze(1)
    pmask[:, -1] = False
    s.masked_fill_(pmask, float("-inf"))
    x.scatter_(dim=-1, index=idx, src=s)
    del s, idx, kmask, ps, pmask
    probs = x.softmax(dim=-1, dtype=torch.float32)
    q = torch.empty_like(probs).exponential_()
    return probs.div_(q).argmax(dim=-1)


def copy_softmax_noise(logits):
    import torch

    x = logits.to(torch.float32)
    probs = x.softmax(dim=-1, dtype=torch.float32)
    q = torch.empty_like(probs).exponential_()
    return probs.div_(q).argmax(dim=-1)


def flashinfer_path(logits, k, p):
    import flashinfer  # noqa: F401 - optional
    import torch

    x = logits.to(torch.float32)
    return flashinfer.sampling.top_k_top_p_sampling_from_logits(x, k.int(), p, deterministic=True)


def llama_layer(H, I, hq, hkv, D, T, dtype):
    import torch

    dev = "cuda"
    w = {
        "qkv": torch.randn((hq + 2 * hkv) * D, H, device=dev, dtype=dtype) * 0.01,
        "o": torch.randn(H, hq * D, device=dev, dtype=dtype) * 0.01,
        "gu": torch.randn(2 * I, H, device=dev, dtype=dtype) * 0.01,
        "d": torch.randn(H, I, device=dev, dtype=dtype) * 0.01,
    }
    x = torch.randn(T, H, device=dev, dtype=dtype)

    def run():
        import torch.nn.functional as F

        residual = x.clone()
        h = F.rms_norm(residual, (H,))
        qkv = h @ w["qkv"].t()
        attn = torch.zeros(T, hq * D, device=dev, dtype=dtype)  # attention skipped in the profile
        o = attn @ w["o"].t()
        residual.add_(o)
        h = F.rms_norm(residual, (H,))
        del qkv, attn, o
        gu = h @ w["gu"].t()
        act = torch.empty(T, I, device=dev, dtype=dtype)
        torch.mul(F.silu(gu[:, :I]), gu[:, I:], out=act)  # one [T, I] output, as _C.silu_and_mul
        del gu
        return act @ w["d"].t()

    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/gpu_activation_check.json")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("gpu_activation_check: PyTorch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_activation_check: no CUDA device (this benchmark needs a GPU; the CPU oracle is "
              "scripts/vllm_activation_oracle.py)", file=sys.stderr)
        return 2
    from oomguard.model import sampler

    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    rows = []
    for N, V in ((256, 128256), (1024, 128256), (1024, 151936)):
        logits = torch.randn(N, V, device="cuda", dtype=torch.bfloat16)
        k = torch.full((N,), V - 1, device="cuda")
        p = torch.full((N,), 0.9, device="cuda")
        rows.append({"what": "sampler sort", "N": N, "V": V, "measured": _peak(sort_path, logits, k, p),
                     "oomguard": sampler.sort_path_bytes(N, V, 2, platform="cuda")})
        tri = sampler.triton_path_bytes(N, V, 2, sms) - min(1 << (N - 1).bit_length(), sms) * V * 4
        rows.append({"what": "sampler fp32 copy + probs + noise (Triton shape, buffer excluded)", "N": N, "V": V,
                     "measured": _peak(copy_softmax_noise, logits), "oomguard": tri})
        try:
            rows.append({"what": "sampler FlashInfer", "N": N, "V": V, "measured": _peak(flashinfer_path, logits, k, p),
                         "oomguard": sampler.flashinfer_path_bytes(N, V, 2)})
        except ImportError:
            rows.append({"what": "sampler FlashInfer", "N": N, "V": V, "skipped": "flashinfer not installed"})
        del logits
    from oomguard.model.description import LayerKind, ModelDescription, AttentionLayer
    from oomguard.model import phases

    for name, H, I, hq, hkv, D in (("Llama-3.1-8B", 4096, 14336, 32, 8, 128), ("Qwen3-8B", 4096, 12288, 32, 8, 128)):
        for T in (2048, 8192):
            m = ModelDescription(name=name, source="bench", model_type="llama", architecture="LlamaForCausalLM",
                                 family="decoder", hidden_size=H, num_layers=1, num_attention_heads=hq,
                                 num_kv_heads=hkv, head_size=D, intermediate_size=I, vocab_size=128256,
                                 tie_word_embeddings=False, dtype="bfloat16",
                                 layers=(AttentionLayer(LayerKind.FULL, hkv, D, D),), max_position_embeddings=8192,
                                 derived_max_model_len=8192)
            ours, _, _ = phases.forward_peak_bytes(m, T, 1, 2, platform="cuda")
            rows.append({"what": f"forward layer {name}", "T": T,
                         "measured": _peak(llama_layer(H, I, hq, hkv, D, T, torch.bfloat16)), "oomguard": ours})
    for r in rows:
        if "measured" in r:
            r["drift"] = round(r["oomguard"] / r["measured"] - 1, 4)
        print(json.dumps(r))
    doc = {"device": props.name, "sms": sms, "torch": torch.__version__, "rows": rows}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
