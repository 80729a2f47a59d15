"""From signals to verdicts: which failure class, how sure, and in what order.

Every signal becomes a ``Candidate`` with a class and a confidence:
exact vLLM messages are near-certain; a GPU OOM is placed in its phase by,
in order of trust, vLLM's own wrapper text, the traceback frames, the phase
markers logged before it, words around it, and finally the sizes in the OOM
message and the model/GPU context. Candidates of the same class merge into
one verdict; secondary messages (engine death) only matter when nothing
explains them. Verdicts are ordered by confidence, earliest first on ties,
after demoting failures that are usually consequences of another one.
"""

from __future__ import annotations

from dataclasses import dataclass

from oomguard.diagnose.classes import FailureClass as FC
from oomguard.diagnose.classes import Phase
from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Evidence, Signal, SignalEvent, Verdict
from oomguard.diagnose.facts import Collector

MAX_EVIDENCE = 6

# Traceback function names -> (class, cause). Strong names decide; weak ones only when nothing else does.
_FRAME_RULES: tuple[tuple[tuple[str, ...], FC, str | None], ...] = (
    (("capture_model", "_capture_cudagraphs", "capture", "_capture", "graph_capture", "capture_graph",
      "profile_cudagraph_memory", "_profile_cudagraph_memory", "_estimate_cudagraph_memory"), FC.CUDAGRAPH_OOM, None),
    (("_dummy_sampler_run", "_dummy_pooler_run", "_warmup_sampler"), FC.PROFILE_OOM, "sampler"),
    (("_execute_mm_encoder", "get_multimodal_embeddings", "embed_multimodal", "_get_mm_dummy_batch",
      "profile_multimodal", "_execute_encoder"), FC.PROFILE_OOM, "multimodal"),
    (("profile_run", "determine_available_memory", "determine_num_available_blocks", "_profile_run",
      "memory_profiling"), FC.PROFILE_OOM, None),
    (("_allocate_kv_cache_tensors", "_allocate_kv_cache", "allocate_kv_cache", "initialize_kv_cache_tensors",
      "_init_cache_engine", "_reshape_kv_cache_tensors", "initialize_cache", "initialize_kv_cache"),
     FC.STARTUP_FREE_MEMORY, "kv-allocation"),
    (("load_model", "load_weights", "_load_weights", "get_model", "initialize_model", "_initialize_model",
      "load_state_dict", "weight_loader", "default_weight_loader", "process_weights_after_loading",
      "_process_weights_after_loading", "load_weights_and_postprocess"), FC.WEIGHTS_OOM, None),
    (("step", "step_with_batch_queue", "run_busy_loop", "_process_engine_step", "engine_step", "sample_tokens",
      "run_engine_loop", "process_input_queue", "_run_engine",
      # only real requests ask for prompt logprobs (the dummy runs never do)
      "_get_prompt_logprobs_dict"), FC.RUNTIME_OOM, None),
)
_WEAK_FRAMES = {"execute_model": FC.RUNTIME_OOM, "_dummy_run": FC.PROFILE_OOM}

_PHASE_CLASS = {
    Phase.STARTING: FC.WEIGHTS_OOM, Phase.LOADING: FC.WEIGHTS_OOM, Phase.PROFILING: FC.PROFILE_OOM,
    Phase.GRAPH_CAPTURE: FC.CUDAGRAPH_OOM, Phase.READY: FC.RUNTIME_OOM, Phase.SERVING: FC.RUNTIME_OOM,
}
_EXACT = {
    Signal.NO_KV_MEMORY: (FC.NO_KV_MEMORY, 0.95), Signal.NEGATIVE_KV: (FC.NO_KV_MEMORY, 0.9),
    Signal.ZERO_BLOCKS: (FC.NO_KV_MEMORY, 0.85), Signal.KV_TOO_SMALL: (FC.KV_TOO_SMALL, 0.95),
    Signal.KV_PROSE: (FC.KV_TOO_SMALL, 0.6), Signal.MAMBA_LIMIT: (FC.MAMBA_STATE_LIMIT, 0.95),
    Signal.MAX_LEN_EXCEEDS: (FC.MAX_LEN_EXCEEDS_MODEL, 0.95), Signal.STARTUP_FREE_MEMORY: (FC.STARTUP_FREE_MEMORY, 0.95),
    Signal.PROFILING_INCONSISTENT: (FC.STARTUP_FREE_MEMORY, 0.7), Signal.UNRECOGNIZED_ARGS: (FC.BAD_ARGUMENT, 0.95),
    Signal.INVALID_ARG_VALUE: (FC.BAD_ARGUMENT, 0.9), Signal.MODEL_NOT_FOUND: (FC.BAD_ARGUMENT, 0.85),
    Signal.CONFIG_REJECTED: (FC.CONFIG_ERROR, 0.85), Signal.ILLEGAL_MEMORY_ACCESS: (FC.ILLEGAL_MEMORY_ACCESS, 0.9),
    Signal.HOST_ALLOC_FAILURE: (FC.HOST_OOM, 0.85), Signal.HOST_PROSE: (FC.HOST_OOM, 0.55),
    Signal.SIGKILL: (FC.HOST_OOM, 0.6), Signal.LOAD_OOM: (FC.WEIGHTS_OOM, 0.95),
    Signal.SAMPLER_WARMUP_OOM: (FC.PROFILE_OOM, 0.95),
    Signal.MISSING_DEPENDENCY: (FC.MISSING_DEPENDENCY, 0.85), Signal.CHAT_TEMPLATE: (FC.CHAT_TEMPLATE_ERROR, 0.85),
    Signal.NCCL_ERROR: (FC.NCCL_ERROR, 0.85), Signal.RAY_PLACEMENT: (FC.RAY_PLACEMENT_TIMEOUT, 0.9),
}
# Words, not vLLM messages (parsers/paraphrase.py): at most this sure, however clear the sentence.
PARAPHRASE_CAP = 0.5
_GPU_OOM = {Signal.CUDA_OOM, Signal.OOM_PROSE, Signal.ALLOCATOR_FAILURE}
_PROSE = {Signal.OOM_PROSE, Signal.HOST_PROSE, Signal.KV_PROSE}
_STARTUP_EXCEPTIONS = {"ValueError", "AssertionError", "NotImplementedError", "TypeError", "KeyError"}


@dataclass
class Candidate:
    cls: FC
    confidence: float
    event: SignalEvent
    reason: str
    cause: str | None = None
    words: bool = False  # the class rests on people's wording (the paraphrase tier), whatever the signal


def classify_signal(ev: SignalEvent, ctx: Context) -> Candidate | None:
    cand = _classify_signal(ev, ctx)
    if cand is not None and ev.numbers.get("tier") == "paraphrase":
        cand.confidence = min(cand.confidence, PARAPHRASE_CAP)
        cand.reason = "paraphrase (lower confidence): " + cand.reason
    return cand


def _classify_signal(ev: SignalEvent, ctx: Context) -> Candidate | None:
    if ev.signal in _EXACT:
        cls, conf = _EXACT[ev.signal]
        cause = "sampler" if ev.signal == Signal.SAMPLER_WARMUP_OOM else None
        return Candidate(cls, conf, ev, "message", cause)
    if ev.signal == Signal.KERNEL_OOM_KILL:
        conf = 0.95 if ev.numbers.get("vllm_process") else (0.85 if ev.numbers.get("systemd") else 0.65)
        return Candidate(FC.HOST_OOM, conf, ev, "kernel OOM killer")
    if ev.signal in _GPU_OOM:
        return _gpu_oom(ev, ctx)
    return None


def _gpu_oom(ev: SignalEvent, ctx: Context) -> Candidate:
    base = 0.0 if ev.signal == Signal.CUDA_OOM else (-0.1 if ev.signal == Signal.OOM_PROSE else -0.15)
    eager = ctx.enforce_eager
    cause = _cause_from_flags(ev, ctx)
    # 1. traceback frames, innermost first.
    strong = _classify_frames(ev.frames)
    if strong is not None:
        cls, frame_cause, frame = strong
        return Candidate(cls, 0.9 + base, ev, f"traceback passes through {frame}()", frame_cause or cause)
    # 2. phase markers logged before the error.
    if ev.phase not in (Phase.UNKNOWN,):
        cls = _class_for_phase(ev.phase, ctx, eager)
        conf = 0.7 if ev.phase == Phase.STARTING else 0.82
        return Candidate(cls, conf + base, ev, f"last phase logged before it: {ev.phase.label}", cause)
    # 2a. vLLM's OpenAI handlers logged it: the exception a request met, so the engine was serving.
    if ev.numbers.get("logged_by_server"):
        return Candidate(FC.RUNTIME_OOM, 0.7 + base, ev, f"logged by the request handler ({ev.numbers['logged_by_server']})",
                         cause)
    # 2b. the rest of the paste: a traceback elsewhere in the same file and run, and (for a report in words, or
    # an error printed before the lines that led to it) the furthest phase the paste logged.
    paste = _from_paste(ev, ctx, eager, base, cause)
    if paste is not None:
        return paste
    # 2c. vLLM's execute_model wrapper ("Error in model execution (input dumped to ...)"): a profile run also goes
    # through it, but its frames or phase lines would have decided above; with neither, it served a batch.
    if "Error in model execution" in ev.text or "err_execute_model_input" in ev.text:
        return Candidate(FC.RUNTIME_OOM, 0.6 + base, ev, "vLLM's execute_model wrapper, no start-up phase logged", cause)
    # 3. words around a pasted error.
    hinted = _class_from_hints(ev.hints)
    if hinted is not None:
        cls, hint_cause = hinted
        return Candidate(cls, 0.65 + base, ev, "wording of the report", hint_cause or cause)
    # 4. flags named next to the OOM.
    if cause in ("batched-tokens", "num-seqs", "multimodal"):
        return Candidate(FC.PROFILE_OOM, 0.55 + base, ev, "flag named with the OOM", cause)
    if cause == "cudagraph":
        return Candidate(FC.CUDAGRAPH_OOM, 0.55 + base, ev, "flag named with the OOM", None)
    # 5. the sizes in the OOM message: a tiny allocation on a full GPU comes after the KV cache took the rest.
    n = ev.numbers
    if n.get("alloc_gib") is not None and n.get("free_gib") is not None and n.get("total_gib"):
        if n["alloc_gib"] <= 8 / 1024 and n["free_gib"] < max(0.02 * n["total_gib"], 0.05):
            if eager:
                return Candidate(FC.RUNTIME_OOM, 0.5 + base, ev, "small allocation on a full GPU, eager mode", cause)
            return Candidate(FC.CUDAGRAPH_OOM, 0.55 + base, ev,
                             "small allocation on a GPU already full (KV cache allocated): graph capture", cause)
    # 6. model and GPU: do the weights fit at all?
    weights = ctx.weights_per_gpu_gib()
    total = ctx.gpu_total_gib
    if weights is not None and total:
        w, _how = weights
        if w > 0.92 * total:
            return Candidate(FC.WEIGHTS_OOM, 0.7 + base, ev, f"weights ~{w:.1f} GiB per GPU exceed the {total:.1f} GiB GPU", cause)
        if ctx.multimodal:
            return Candidate(FC.PROFILE_OOM, 0.55 + base, ev, "weights fit; multimodal profile run", "multimodal")
        return Candidate(FC.PROFILE_OOM, 0.5 + base, ev, "weights fit; the profile run is the next large allocation", cause)
    if ctx.multimodal and total and total >= 40:
        # On a large GPU a multimodal model's weights load; its profile run with dummy images is what fails.
        return Candidate(FC.PROFILE_OOM, 0.5 + base, ev, "multimodal model on a large GPU: profile run with dummy images",
                         "multimodal")
    # 7. the sizes alone (torch's message): what the process held and what it asked for.
    sized = _class_from_sizes(n, ctx)
    if sized is not None:
        cls, conf, why = sized
        return Candidate(cls, conf + base, ev, why, cause)
    # 8. nothing at all: the first large allocation of a start, the weights, at low confidence (the summary says
    # the phase is a guess and what to collect).
    return Candidate(FC.WEIGHTS_OOM, 0.3 + base, ev, "no phase logged before the error (guess: loading)", cause)


# vLLM allocates parameters one by one; the largest is the embedding / lm_head, vocab x hidden x 2 bytes (bf16):
# Qwen2.5-72B 152,064 x 8,192 x 2 B = 2.32 GiB, Llama-3-70B 128,256 x 8,192 x 2 B = 1.96 GiB (less under TP).
# Larger single allocations are activations: V0 profiles max_model_len tokens without chunked prefill, e.g. one
# MLP intermediate of 32,768 tokens x 28,672 x 2 (gate+up) x 2 B = 3.5 GiB.
_LARGEST_WEIGHT_TENSOR_GIB = 2.5


def _from_paste(ev: SignalEvent, ctx: Context, eager: bool | None, base: float, cause: str | None) -> Candidate | None:
    frames = ctx.paste_frames.get((ev.file, ev.run), ())
    strong = _classify_frames(tuple(frames)) if frames else None
    if strong is not None and strong[0] in _GPU_OOM_CLASSES + (FC.STARTUP_FREE_MEMORY,):
        cls, frame_cause, frame = strong
        return Candidate(cls, 0.75 + base, ev, f"a traceback in the same paste passes through {frame}()",
                         frame_cause or cause)
    if "coresident" in ctx.paste_hints.get((ev.file, ev.run), ()):
        return Candidate(FC.STARTUP_FREE_MEMORY, 0.5 + base, ev, "paraphrase (lower confidence): the report says another "
                         "process holds GPU memory, and nothing places the OOM later", cause, words=True)
    # No phase before the error, yet the same run logged phases after it: the paste is out of order (a title
    # first, a console listing newest lines first, a worker's buffer flushed late).
    phase = ctx.paste_phase.get((ev.file, ev.run), Phase.UNKNOWN)
    if phase in (Phase.UNKNOWN, Phase.STARTING):
        return None
    cls = _class_for_phase(phase, ctx, eager)
    conf = 0.65 if ev.prose else 0.55
    return Candidate(cls, conf + base, ev, f"the furthest phase the paste logged (after the error): {phase.label}", cause)


def _class_from_sizes(n: dict, ctx: Context) -> tuple[FC, float, str] | None:
    """Phase from torch's OOM figures (an estimate: the reason says so)."""
    alloc = n.get("alloc_gib")
    if alloc is None:
        return None
    total = n.get("total_gib") or ctx.gpu_total_gib
    held = n.get("in_use_gib") or n.get("allocated_gib")
    if alloc > _LARGEST_WEIGHT_TENSOR_GIB:
        return FC.PROFILE_OOM, 0.4, (f"a {alloc:.2f} GiB allocation is larger than one weight tensor: activations of the "
                                     "profile run (estimate from the OOM sizes)")
    if total and held is not None and held < 0.1 * total:
        return None
    return FC.WEIGHTS_OOM, 0.35, (f"a {alloc * 1024:.0f} MiB allocation, the size of one weight tensor, with no phase "
                                  "logged: loading (estimate from the OOM sizes)")


def _classify_frames(frames: tuple[str, ...]) -> tuple[FC, str | None, str] | None:
    weak: tuple[FC, None, str] | None = None
    for frame in reversed(frames):
        for names, cls, cause in _FRAME_RULES:
            if frame in names:
                return cls, cause, frame
        if "cudagraph" in frame.lower() or "cuda_graph" in frame.lower():
            return FC.CUDAGRAPH_OOM, None, frame
        if weak is None and frame in _WEAK_FRAMES:
            weak = (_WEAK_FRAMES[frame], None, frame)
    return weak


def _class_for_phase(phase: Phase, ctx: Context, eager: bool | None) -> FC:
    if phase == Phase.KV_CACHE:
        # After the KV cache come warm-up and graph capture (V1 also warms the sampler).
        if eager:
            return FC.RUNTIME_OOM if ctx.engine == "V0" else FC.PROFILE_OOM
        return FC.CUDAGRAPH_OOM
    if phase == Phase.WARMUP:
        return FC.RUNTIME_OOM if ctx.engine == "V0" else FC.PROFILE_OOM
    return _PHASE_CLASS.get(phase, FC.UNKNOWN)


def _class_from_hints(hints: frozenset[str]) -> tuple[FC, str | None] | None:
    if "sampler" in hints:
        return FC.PROFILE_OOM, "sampler"
    if "capture" in hints:
        return FC.CUDAGRAPH_OOM, None
    if "warmup" in hints:
        return FC.CUDAGRAPH_OOM, None
    if "profile" in hints:
        return FC.PROFILE_OOM, "multimodal" if "multimodal" in hints else None
    if "loading" in hints:
        return FC.WEIGHTS_OOM, None
    if "serving" in hints:
        return FC.RUNTIME_OOM, None
    if "multimodal" in hints:
        return FC.PROFILE_OOM, "multimodal"
    return None


def _cause_from_flags(ev: SignalEvent, ctx: Context) -> str | None:
    mentioned = set(ev.numbers.get("flags_mentioned", ()))
    if "max-num-batched-tokens" in mentioned:
        return "batched-tokens"
    if "max-num-seqs" in mentioned:
        return "num-seqs"
    if "enforce-eager" in mentioned:
        return "cudagraph"
    if "limit-mm-per-prompt" in mentioned and not ctx.text_only:
        return "multimodal"
    tokens = ctx.arg("max_num_batched_tokens")
    if isinstance(tokens, (int, float)) and tokens >= 32768:
        return "batched-tokens"
    return None


def classify(col: Collector, ctx: Context) -> list[Verdict]:
    """All verdicts, most likely root cause first (fixes are added by ``fixes.attach_fixes``)."""
    candidates: list[Candidate] = []
    seen_ooms: set[tuple[int, object, object]] = set()
    for ev in col.signals:
        if ev.signal == Signal.CUDA_OOM and "alloc_gib" in ev.numbers:
            # The engine core and the API server re-report a worker's OOM ("Worker failed with error '...'").
            key = (ev.run, ev.numbers.get("alloc_gib"), ev.numbers.get("free_gib"))
            if key in seen_ooms:
                continue
            seen_ooms.add(key)
        cand = classify_signal(ev, ctx)
        if cand is not None:
            candidates.append(cand)
    candidates = _one_gpu_oom_per_run(candidates)
    # vLLM kills its own processes after a fatal error ("Got fatal signal from worker processes"), and a
    # shell then prints "Killed": a SIGKILL after another failure of the same run is its consequence.
    first_error = {}
    for c in candidates:
        if c.event.signal not in (Signal.SIGKILL, Signal.KERNEL_OOM_KILL) and c.cls != FC.HOST_OOM:
            first_error.setdefault(c.event.run, c.event.seq)
    candidates = [c for c in candidates if not (c.event.signal == Signal.SIGKILL and
                                                first_error.get(c.event.run, 1 << 62) < c.event.seq)]
    primary_runs = {c.event.run for c in candidates}
    for ev in col.signals:
        if ev.signal == Signal.GENERIC_EXCEPTION and ev.run not in primary_runs:
            exc = ev.numbers.get("exception", "")
            if exc in _STARTUP_EXCEPTIONS and ev.phase <= Phase.WARMUP:
                candidates.append(Candidate(FC.CONFIG_ERROR, 0.45, ev, f"{exc} during start-up"))
            else:
                candidates.append(Candidate(FC.UNKNOWN, 0.3, ev, f"unrecognised {exc or 'error'}"))
    for ev in col.signals:
        if ev.signal == Signal.ENGINE_DIED and ev.numbers.get("exit_code") in (-9, 137):
            if first_error.get(ev.run, 1 << 62) > ev.seq:
                candidates.append(Candidate(FC.HOST_OOM, 0.6, ev, "a process was killed with SIGKILL"))
    primary_runs = {c.event.run for c in candidates}
    unknown_runs = {c.event.run for c in candidates if c.cls == FC.UNKNOWN}
    for ev in col.signals:
        if ev.signal == Signal.ENGINE_DIED and ev.run not in primary_runs:
            candidates.append(Candidate(FC.UNKNOWN, 0.3, ev, "the engine died without a recognised cause"))
            primary_runs.add(ev.run)
        elif ev.signal == Signal.ENGINE_DIED and ev.run in unknown_runs:
            # Evidence that the root error killed the engine (kept with it, not a verdict of its own).
            candidates.append(Candidate(FC.UNKNOWN, 0.3, ev, "the engine died after the root error"))
    if ctx.exit_code in (137, -9):
        has_gpu_error = any(c.cls not in (FC.HOST_OOM, FC.UNKNOWN) for c in candidates)
        candidates.append(Candidate(FC.HOST_OOM, 0.45 if has_gpu_error else 0.7, _synthetic_exit(ctx),
                                    "exit status 137 = SIGKILL, the kernel OOM killer's signal"))
    return _merge(candidates)


_GPU_OOM_CLASSES = (FC.WEIGHTS_OOM, FC.PROFILE_OOM, FC.CUDAGRAPH_OOM, FC.RUNTIME_OOM)


def _one_gpu_oom_per_run(candidates: list[Candidate]) -> list[Candidate]:
    """A run dies of one GPU OOM; the worker, Ray, the engine core and the API server each re-report it, often
    without the frames. The best-placed report decides the phase for all of them (prose reports are exempt:
    a pasted text can describe several runs)."""
    best: dict[int, Candidate] = {}
    for c in candidates:
        if c.cls in _GPU_OOM_CLASSES and c.event.signal in _GPU_OOM and not c.event.prose:
            cur = best.get(c.event.run)
            if cur is None or c.confidence > cur.confidence:
                best[c.event.run] = c
    out = []
    for c in candidates:
        chosen = best.get(c.event.run)
        if (chosen is not None and c is not chosen and c.cls in _GPU_OOM_CLASSES and c.event.signal in _GPU_OOM
                and not c.event.prose and c.cls != chosen.cls):
            c = Candidate(chosen.cls, min(c.confidence, chosen.confidence), c.event, chosen.reason, chosen.cause)
        out.append(c)
    return out


def _synthetic_exit(ctx: Context) -> SignalEvent:
    return SignalEvent(Signal.SIGKILL, "--exit-code", 0, f"exit status {ctx.exit_code}", numbers={"exit_code": ctx.exit_code})


def _merge(candidates: list[Candidate]) -> list[Verdict]:
    groups: dict[FC, list[Candidate]] = {}
    for cand in candidates:
        groups.setdefault(cand.cls, []).append(cand)
    verdicts = []
    for cls, members in groups.items():
        best = max(members, key=lambda c: (c.confidence, c.event.seq))
        kinds = {m.event.signal for m in members}
        conf = min(0.99, best.confidence + 0.03 * (len(kinds) - 1))
        ordered = sorted(members, key=lambda c: (-c.confidence, c.event.seq))
        evidence: list[Evidence] = []
        seen = set()
        for m in ordered:
            key = (m.event.file, m.event.line)
            if key in seen:
                continue
            seen.add(key)
            evidence.append(Evidence(m.event.file, m.event.line, m.event.text))
            if len(evidence) >= MAX_EVIDENCE:
                break
        evidence.sort(key=lambda e: (e.file, e.line))
        verdict = Verdict(cls=cls, confidence=conf, summary="", evidence=evidence, phase=best.event.phase,
                          first_seq=min(m.event.seq for m in members))
        if all(m.words or m.event.signal in _PROSE or m.event.numbers.get("tier") == "paraphrase" for m in members):
            verdict.tier = "paraphrase"
            verdict.confidence = min(verdict.confidence, PARAPHRASE_CAP)
        verdict._members = members  # type: ignore[attr-defined]  # read by fixes.attach_fixes, then dropped
        verdicts.append(verdict)
    _demote_consequences(verdicts)
    verdicts.sort(key=lambda v: (v.cls == FC.UNKNOWN, -round(v.confidence, 2), v.first_seq))
    return verdicts


def _demote_consequences(verdicts: list[Verdict]) -> None:
    by_class = {v.cls: v for v in verdicts}
    gpu_ooms = [v for v in verdicts if v.cls in (FC.WEIGHTS_OOM, FC.PROFILE_OOM, FC.CUDAGRAPH_OOM, FC.RUNTIME_OOM)]
    ima = by_class.get(FC.ILLEGAL_MEMORY_ACCESS)
    if ima is not None and any(v.first_seq < ima.first_seq for v in gpu_ooms):
        ima.confidence *= 0.7  # corrupted state after an OOM, not a kernel bug of its own
    host = by_class.get(FC.HOST_OOM)
    if host is not None and gpu_ooms and all(m.event.signal in (Signal.SIGKILL, Signal.ENGINE_DIED)
                                             for m in host._members):  # type: ignore[attr-defined]
        host.confidence = min(host.confidence, 0.45)
    # When an exact message names the cause, vague duplicates of other classes in the same run are noise.
    exact_runs = {m.event.run for v in verdicts for m in v._members if m.reason == "message"}  # type: ignore[attr-defined]
    for v in verdicts:
        members = v._members  # type: ignore[attr-defined]
        if all(m.event.signal in (Signal.OOM_PROSE, Signal.KV_PROSE) and m.event.run in exact_runs for m in members):
            v.confidence *= 0.8
