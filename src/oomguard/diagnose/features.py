"""From what the parsers found to named features: the cues the scorer weighs.

Every cue is a named, binary feature with the line that carried it (``file:line``) and a few words
saying what it is. Kinds (the prefix of the name):

- ``sig:`` / ``para:``: an error line a parser recognised (vLLM's and torch's own messages, kernel
  records, argparse, NCCL...); ``para:`` when it rests on people's wording (parsers/paraphrase.py).
  These are the *anchors*: a report without one has no verdict ("none" only without any failure cue).
- ``frame:`` / ``paste-frame:``: the traceback functions of a GPU OOM (its own, or elsewhere in the
  same paste), grouped by the start-up step they belong to.
- ``phase:`` / ``paste-phase:``: the phase vLLM logged before the OOM (and the furthest one in the paste).
- ``oom:``, ``hint:``, ``flag:``, ``size:``: how the OOM was logged, the words around it, the flags
  named next to it, torch's sizes against the GPU.
- ``ctx:``: the model and GPU (weights against the capacity), multimodal, eager, V0/V1, CPU.
- ``host:``, ``req:``, ``words:``, ``comp:``, ``gpu:``, ``cfg:``: report cues (parsers/cues.py).
- ``kill:``, ``exc:``, ``exit:``, ``sigkill:``, ``engine:``, ``nccl:``: details of an anchor that bear
  on the class (a kill of a vLLM process, an exception during start-up, a SIGKILL after another error).

Adding a feature kind means one entry here (or in parsers/cues.py) and its prior in
``src/oomguard/data/diagnose_priors.json``; the weights come from ``scripts/train_diagnose.py``.
"""

from __future__ import annotations

from oomguard.diagnose.classes import Phase
from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Signal, SignalEvent
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.scoring import GPU_OOM_ANCHORS, phase_only
import oomguard.lazy_re as lazy_re
from oomguard.records import record


@record(frozen=True)
class Cue:
    feature: str
    why: str
    file: str
    line: int
    text: str
    anchor: bool = False
    event: SignalEvent | None = None


# Traceback function names by the start-up step they belong to; innermost strong name decides.
FRAME_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("capture", ("capture_model", "_capture_cudagraphs", "capture", "_capture", "graph_capture", "capture_graph",
                 "capture_end", "capture_begin",  # torch.cuda.graph's own frames (torch/cuda/graphs.py)
                 "profile_cudagraph_memory", "_profile_cudagraph_memory", "_estimate_cudagraph_memory")),
    ("sampler", ("_dummy_sampler_run", "_dummy_pooler_run", "_warmup_sampler")),
    ("mm-encoder", ("_execute_mm_encoder", "get_multimodal_embeddings", "embed_multimodal", "_get_mm_dummy_batch",
                    "profile_multimodal", "_execute_encoder")),
    ("profile", ("profile_run", "determine_available_memory", "determine_num_available_blocks", "_profile_run",
                 "memory_profiling")),
    ("kv-alloc", ("_allocate_kv_cache_tensors", "_allocate_kv_cache", "allocate_kv_cache", "initialize_kv_cache_tensors",
                  "_init_cache_engine", "_reshape_kv_cache_tensors", "initialize_cache", "initialize_kv_cache")),
    ("load", ("load_model", "load_weights", "_load_weights", "get_model", "initialize_model", "_initialize_model",
              "load_state_dict", "weight_loader", "default_weight_loader", "process_weights_after_loading",
              "_process_weights_after_loading", "load_weights_and_postprocess")),
    # only real requests ask for prompt logprobs (the dummy runs never do)
    ("logprobs", ("_get_prompt_logprobs_dict", "compute_logprobs", "_compute_prompt_logprobs", "get_logprobs")),
    # torch.distributed's set-up of the workers' groups (NCCL / gloo / HCCL): not the collectives themselves (a GPU
    # OOM inside an all_reduce of the profile run is the profile's)
    ("dist-init", ("init_world_group", "init_distributed_environment", "init_process_group", "new_group",
                   "_new_group_with_tag", "init_model_parallel_group", "initialize_model_parallel",
                   "ensure_model_parallel_initialized", "_init_distributed_environment")),
    # argparse and vLLM's own checks of the parsed command line
    ("cli-args", ("parse_args", "validate_parsed_serve_args", "_parse_known_args")),
    ("step", ("step", "step_with_batch_queue", "run_busy_loop", "_process_engine_step", "engine_step", "sample_tokens",
              "run_engine_loop", "process_input_queue", "_run_engine")),
)
# Among weak frames the one that says most: a dummy run, then the engine's model execution, then a forward pass.
_WEAK_ORDER = ("dummy-run", "warmup", "kv-init", "request", "execute-model", "forward")
# A request being served: the OpenAI server's handlers ("create_chat_completion", "chat_completion_stream_generator",
# a wrapper's "generate_videos") and the offline LLM.generate / LLM.chat; weak (a start-up's dummy run is not one).
_REQUEST_FRAME = lazy_re.compile(r"^(?:create_[a-z_]+|[a-z_]*completion[a-z_]*_generator|generate(?:_[a-z]+)?|chat)$")
_FRAME_GROUP = {name: group for group, names in FRAME_GROUPS for name in names}
# Frames that only narrow it down: V1's compile_or_warm_up_model runs the compile sizes, the graph capture and the
# sampler warm-up; execute_model runs for the profile and for requests.
_WEAK_FRAMES = {"execute_model": "execute-model", "_dummy_run": "dummy-run", "compile_or_warm_up_model": "warmup",
                # the engine's KV-cache set-up (V0 LLMEngine, V1 EngineCore): the profile run, the KV tensors, then
                # (V1) the compile and graph capture; a cut traceback that stops here stopped in one of them
                "_initialize_kv_caches": "kv-init", "initialize_kv_caches": "kv-init",
                "_warmup_and_capture": "warmup", "warm_up_model": "warmup",
                # a model's forward pass (torch's module call, a layer's or a quantized linear's forward): the
                # weights were loaded, the model was running (a profile run or requests)
                "forward": "forward", "_forward": "forward", "forward_cuda": "forward", "forward_native": "forward",
                "forward_oot": "forward", "apply_weights": "forward", "_call_impl": "forward",
                "_wrapped_call_impl": "forward"}

GPU_OOM_SIGNALS = frozenset({Signal.CUDA_OOM, Signal.OOM_PROSE, Signal.ALLOCATOR_FAILURE})
_STARTUP_EXCEPTIONS = {"ValueError", "AssertionError", "NotImplementedError", "TypeError", "KeyError"}
# Traceback steps of a running engine (frame_group's groups): an exception raised there came from requests.
_SERVING_FRAMES = ("step", "logprobs")
# vLLM allocates parameters one by one; the largest is the embedding / lm_head, vocab x hidden x 2 bytes (bf16):
# Qwen2.5-72B 152,064 x 8,192 x 2 B = 2.32 GiB, Llama-3-70B 128,256 x 8,192 x 2 B = 1.96 GiB (less under TP).
# Larger single allocations are activations.
LARGEST_WEIGHT_TENSOR_GIB = 2.5
# Weights under this share of the GPU cannot fill it: an OOM there is not the weights' own (ctx:weights-small).
SMALL_WEIGHTS_SHARE = 0.3
# Cues of parsers/cues.py that state a failure on their own (the others only say more about one).
_ANCHOR_CUES = frozenset({"host:memory-monitor", "host:oomkilled", "fail:title", "fail:words", "fail:exception"})


def frame_group(frames: tuple[str, ...] | list[str]) -> tuple[str, str] | None:
    """(group, function) of the innermost frame with a known step; weak frames only when nothing else."""
    weak = None
    for frame in reversed(frames):
        group = _FRAME_GROUP.get(frame)
        if group is not None:
            return group, frame
        low = frame.lower()
        if "cudagraph" in low or "cuda_graph" in low:
            return "capture", frame
        kind = _WEAK_FRAMES.get(frame) or ("request" if _REQUEST_FRAME.match(frame) else None)
        if kind is not None and (weak is None or _WEAK_ORDER.index(kind) < _WEAK_ORDER.index(weak[0])):
            weak = (kind, frame)
    return weak


def extract(col: Collector, ctx: Context) -> list[Cue]:
    """Every cue of the report, anchors first (in file order), then context and report cues."""
    cues: list[Cue] = []
    first_error: dict[int, int] = {}
    gpu_oom_seq: dict[int, int] = {}
    for ev in col.signals:
        if ev.signal not in (Signal.SIGKILL, Signal.KERNEL_OOM_KILL, Signal.ENGINE_DIED, Signal.HOST_PROSE,
                             Signal.HOST_ALLOC_FAILURE):
            first_error.setdefault(ev.run, ev.seq)
        if ev.signal in GPU_OOM_SIGNALS:
            gpu_oom_seq.setdefault(ev.run, ev.seq)
    raisers = _raisers(col)
    for ev in col.signals:
        cues += _signal_cues(ev, col, ctx, first_error, gpu_oom_seq, raisers.get(id(ev)))
    if ctx.exit_code in (137, -9):
        cues.append(Cue("exit:137", f"exit status {ctx.exit_code} = SIGKILL, the kernel OOM killer's signal",
                        "--exit-code", 0, f"exit status {ctx.exit_code}", anchor=True))
    cues += _context_cues(col, ctx)
    from oomguard.diagnose.parsers.cues import FAILURE_STATEMENTS, FAILURE_WORDS, UNSCORED_PREFIXES

    for hit in col.cues.values():
        if hit.feature.startswith(UNSCORED_PREFIXES):
            continue  # the flag the report suggests, the model and GPU it names: read by the fixes and the context
        cues.append(Cue(hit.feature, _CUE_WHY.get(hit.feature.split(":")[0], "report cue") + f" ({hit.feature})",
                        hit.file, hit.line, hit.text, anchor=hit.feature in _ANCHOR_CUES or hit.feature in FAILURE_STATEMENTS
                        or (hit.error and hit.feature in FAILURE_WORDS)))
    cues += _message_cues(col, cues)
    cues += _collective_cues(cues, ctx)
    if not any(c.anchor for c in cues) or not any(c.event is not None for c in cues):
        # A traceback whose error line is missing (cut, or not pasted): the frames still say where it failed.
        for (file, _run), frames in col.paste_frames.items():
            group = frame_group(tuple(frames))
            cues.append(Cue("fail:traceback", "a traceback (its error line is missing)", file, 0, " > ".join(frames[-4:]),
                            anchor=True))
            if group is not None:
                cues.append(Cue(f"paste-frame:{group[0]}", f"the traceback passes through {group[1]}()", file, 0,
                                group[1]))
            phase = col.paste_phase.get((file, _run), Phase.UNKNOWN)
            if phase > Phase.STARTING:
                # where the log had got to when the traceback was printed: its start-up step, like a frame
                cues.append(Cue(f"cut-phase:{phase.label}", f"the log had reached {phase.label} before the traceback",
                                file, 0, phase.label))
            break
    elif not any(c.event is not None and c.event.frames for c in cues if c.anchor) and not any(
            c.event is not None and c.event.signal not in _UNSPECIFIC for c in cues if c.anchor):
        # The engine died (or an exception oomguard has no class for) with a traceback elsewhere in the paste and
        # no error line of a class: where that traceback stopped still bears on which failure it was.
        for (file, _run), frames in col.paste_frames.items():
            group = frame_group(tuple(frames))
            if group is not None:
                cues.append(Cue(f"paste-frame:{group[0]}", f"a traceback in the paste passes through {group[1]}()", file,
                                0, group[1]))
                break
    # The same words counted once: the OOM line's own phase words (hint:) and the report cue read from that line.
    hinted = {(c.file, c.line, _HINT_WORDS[c.feature]) for c in cues if c.feature in _HINT_WORDS}
    cues = [c for c in cues if (c.file, c.line, c.feature) not in hinted]
    if not any(c.anchor and c.feature in GPU_OOM_ANCHORS for c in cues):
        # When (and under what load) a GPU OOM happened says nothing about an argparse error or a crash:
        # these cues only bear on the phase of a GPU OOM, so they only count when there is one.
        cues = [c for c in cues if not phase_only(c.feature)]
    return cues


# What says the report has more than one rank, each of them waiting on the others when one stops: the launch's own
# parallel sizes, the reporter's words for them, a collective library or operation named, its environment set.
_RANKS_SAID = ("words:multi-rank", "words:collective", "coll:env")


def _collective_cues(cues: list[Cue], ctx: Context) -> list[Cue]:
    """Collective failures told without the library's error words (issue 16): a hang said in words where several
    ranks run (``coll:hang``: a rank that stops leaves the others blocked in their next all-reduce or barrier, so the
    report's symptom is a hang whichever rank failed first), and /dev/shm named with them (``coll:shm``: NCCL's
    intra-node transport and vLLM's broadcast queue live in /dev/shm, a container's 64 MB default is too small for
    them). Anchors: a report that says so has failed even with no error line."""
    first = {}
    for c in cues:
        first.setdefault(c.feature, c)
    ranks = ctx.tensor_parallel_size * ctx.pipeline_parallel_size > 1 or any(f in first for f in _RANKS_SAID)
    if not ranks:
        return []
    out = []
    hang = first.get("words:hang")
    if hang is not None:
        out.append(Cue("coll:hang", "a hang, said in words, where several ranks run (they wait on each other in a "
                       "collective)", hang.file, hang.line, hang.text, anchor=True))
    shm = first.get("words:shm")
    if shm is not None and any(f in first for f in ("words:collective", "coll:env")):
        out.append(Cue("coll:shm", "/dev/shm named with the collective library (NCCL's shared-memory transport)",
                       shm.file, shm.line, shm.text, anchor=True))
    return out


def _message_cues(col: Collector, cues: list[Cue]) -> list[Cue]:
    """``msg:<class>``: a line that is one of vLLM's own messages (parsers/messages.py: the catalog derived from
    vLLM's source), in whatever shape the report gives it. A weaker match (a cut, a fragment, a paraphrase), or
    one on a line people wrote, is ``para:msg:<class>``: an anchor of the words tier (its verdict's confidence
    is capped)."""
    if col.message_lines is None:
        return []
    from oomguard.diagnose.parsers import messages

    # one line, one cue: a line a parser already read as an error keeps that reading (the catalog adds the lines
    # nobody else reads, and does not count the same message twice)
    read = {(c.file, c.line) for c in cues if c.anchor and c.event is not None and c.event.signal not in _UNSPECIFIC}
    out = []
    for hit in messages.hits(col.message_lines, read):
        strong = hit.quality >= messages.STRONG_QUALITY and not hit.prose
        name = hit.feature if strong else "para:" + hit.feature
        out.append(Cue(name, f"vLLM's message raised in {hit.where} ({hit.how}, quality {hit.quality:.2f})",
                       hit.file, hit.line, hit.text, anchor=True))
    for note in messages.notes(col.message_lines):
        if note not in col.notes:
            col.notes.append(note)
    return out


_HINT_WORDS = {"hint:loading": "words:loading", "hint:capture": "words:capture", "hint:profile": "words:profile",
               "hint:warmup": "words:profile", "hint:serving": "words:serving"}
_UNSPECIFIC = frozenset({Signal.ENGINE_DIED, Signal.GENERIC_EXCEPTION})


# Errors whose raising component bears on their class (an exception's, a check's, a keyword a call did not take):
# the same words mean a vLLM check, a wrapper's own bug or two packages out of step, by whose code raised them.
_ATTRIBUTED = frozenset({Signal.GENERIC_EXCEPTION, Signal.CONFIG_REJECTED, Signal.UNRECOGNIZED_ARGS,
                         Signal.INVALID_ARG_VALUE})


def _raisers(col: Collector) -> dict[int, str]:
    """The component that raised each attributed error (``SignalEvent.raised_by``, else the package its exception
    class is named from). An error re-logged by another handler without its traceback ("Failed to start model
    server: <the same message>") is the same error: it takes the attribution of the line that had one."""
    from oomguard.diagnose.parsers.frames import COMPONENTS

    packages = {pkg: comp for comp, pkgs in COMPONENTS for pkg in pkgs}
    out: dict[int, str] = {}
    by_detail: dict[str, str] = {}
    pending = []
    for ev in col.signals:
        if ev.signal not in _ATTRIBUTED:
            continue
        comp = ev.raised_by or packages.get(str(ev.numbers.get("module", "")))
        if comp in ("server", "python"):
            comp = None
        detail = str(ev.numbers.get("args") or ev.numbers.get("detail") or "")[:120]
        if comp is not None:
            out[id(ev)] = comp
            if detail:
                by_detail.setdefault(detail, comp)
        elif detail:
            pending.append((ev, detail))
    for ev, detail in pending:
        if detail in by_detail:
            out[id(ev)] = by_detail[detail]
    return out


def _signal_cues(ev: SignalEvent, col: Collector, ctx: Context, first_error: dict[int, int],
                 gpu_oom_seq: dict[int, int], raiser: str | None = None) -> list[Cue]:
    def cue(feature: str, why: str, anchor: bool = False) -> Cue:
        return Cue(feature, why, ev.file, ev.line, ev.text, anchor, ev)

    n = ev.numbers
    s = ev.signal
    words = n.get("tier") == "paraphrase"
    # A weaker shape of a signal (a usage dump without its error line, Ray's "Waiting for creating a placement
    # group" line) carries its own feature name, so it gets its own weight.
    name = n.get("cue") or (("para:" if words else "sig:") + ev.signal.value)
    why = _SIGNAL_WHY.get(ev.signal, ev.signal.value) + (" (in words, not a vLLM message)" if words else "")
    if s == Signal.UNRECOGNIZED_ARGS and n.get("keyword") and raiser not in (None, "vllm"):
        # "X.__init__() got an unexpected keyword argument" raised at a call site outside vLLM: a wrapper calling
        # a class of another package that no longer (or not yet) takes that keyword, not a user's command line
        callee = n.get("prog") or "the callee"
        name, why = "sig:api-mismatch", (f"a call in {raiser} code passes a keyword argument {callee} does not take: "
                                         "two packages' versions out of step")
    out = [cue(name, why, anchor=True)]
    if raiser is not None and s in _ATTRIBUTED:
        out.append(cue(f"raised:{raiser}", f"raised in {raiser} code (the traceback's innermost frame)"))
    if s == Signal.GENERIC_EXCEPTION and n.get("python"):
        out.append(cue("exc:python", "the interpreter's own message (a TypeError, AttributeError...): code and what it "
                       "calls are out of step, a bug or two versions"))
    if s == Signal.KERNEL_OOM_KILL:
        if n.get("vllm_process"):
            out.append(cue("kill:vllm-process", "the kernel killed a process vLLM runs as"))
        elif n.get("systemd"):
            out.append(cue("kill:systemd", "the init system reports an OOM kill"))
        else:
            out.append(cue("kill:other-process", f"the kernel killed {n.get('name') or 'a process'} (not named like vLLM)"))
    elif s == Signal.SIGKILL and first_error.get(ev.run, 1 << 62) < ev.seq:
        out.append(cue("sigkill:after-error", "the SIGKILL comes after another error of the same run (vLLM kills its "
                       "own workers after a fatal error)"))
    elif s == Signal.ENGINE_DIED:
        if n.get("exit_code") in (-9, 137):
            out.append(cue("engine:sigkill", "a vLLM process died of SIGKILL"))
    elif s == Signal.GENERIC_EXCEPTION:
        exc = n.get("exception", "")
        group = frame_group(ev.frames)
        if ev.phase >= Phase.READY or (group is not None and group[0] in _SERVING_FRAMES):
            # raised while the engine ran requests (its traceback in the engine step, or after the ready line): a
            # configuration vLLM refuses is refused at start-up, so this is rather a fault of the running engine
            out.append(cue("exc:serving", f"{exc or 'an exception'} while the engine was running requests"
                           + (f" ({group[1]}())" if group is not None else "")))
        elif exc in _STARTUP_EXCEPTIONS and ev.phase != Phase.UNKNOWN:
            out.append(cue("exc:startup", f"{exc} during start-up"))
        elif exc in _STARTUP_EXCEPTIONS:
            # no phase line places it: start-up is likelier (most such exceptions are vLLM's checks), less sure
            out.append(cue("exc:unplaced", f"{exc}, with no phase line or traceback frame placing it"))
    elif s == Signal.ILLEGAL_MEMORY_ACCESS and gpu_oom_seq.get(ev.run, 1 << 62) < ev.seq:
        out.append(cue("ima:after-oom", "the illegal access follows a GPU OOM (corrupted state)"))
    elif s == Signal.NCCL_ERROR and n.get("cause") == "timeout":
        out.append(cue("nccl:timeout", "a collective timed out: another rank stopped first"))
    elif s == Signal.STARTUP_FREE_MEMORY and n.get("host"):
        out.append(cue("ctx:platform-cpu", "the CPU backend's free-memory check (host RAM)"))
    if s in GPU_OOM_SIGNALS:
        out += _gpu_oom_cues(ev, col, ctx, cue)
    return out


def _gpu_oom_cues(ev: SignalEvent, col: Collector, ctx: Context, cue) -> list[Cue]:  # noqa: ANN001 - local factory
    out: list[Cue] = []
    placed = False
    own = frame_group(ev.frames)
    if own is not None:
        group, frame = own
        out.append(cue(f"frame:{group}", f"traceback passes through {frame}()"))
        placed = group not in ("execute-model", "dummy-run", "warmup", "kv-init", "forward")
    else:
        paste = frame_group(tuple(col.paste_frames.get((ev.file, ev.run), ())))
        if paste is not None:
            group, frame = paste
            out.append(cue(f"paste-frame:{group}", f"a traceback in the same paste passes through {frame}()"))
            placed = group not in ("execute-model", "dummy-run", "warmup", "kv-init", "forward")
    if ev.phase != Phase.UNKNOWN:
        label = ev.phase.label
        if ev.phase == Phase.KV_CACHE and ctx.enforce_eager:
            label += "-eager"
        elif ev.phase == Phase.WARMUP and ctx.engine == "V0":
            label += "-v0"
        out.append(cue(f"phase:{label}", f"last phase logged before it: {ev.phase.label}"))
        placed = True
    paste_phase = col.paste_phase.get((ev.file, ev.run), Phase.UNKNOWN)
    if paste_phase > ev.phase and paste_phase not in (Phase.UNKNOWN, Phase.STARTING):
        out.append(cue(f"paste-phase:{paste_phase.label}", f"the furthest phase the paste logged: {paste_phase.label}"))
        placed = True
    n = ev.numbers
    if n.get("logged_by_server"):
        out.append(cue("oom:logged-by-server", f"logged by the request handler ({n['logged_by_server']})"))
        placed = True
    if "Error in model execution" in ev.text or "err_execute_model_input" in ev.text:
        out.append(cue("oom:execute-model-wrapper", "vLLM's execute_model wrapper (a batch was being run)"))
    for hint in sorted(ev.hints):
        out.append(cue(f"hint:{hint}", f"the words around the error say: {hint}"))
    if "coresident" in col.paste_hints.get((ev.file, ev.run), ()):
        out.append(cue("paste:coresident", "the report says another process holds GPU memory"))
    mentioned = set(n.get("flags_mentioned", ()))
    for flag, name in (("max-num-batched-tokens", "batched-tokens"), ("max-num-seqs", "num-seqs"),
                       ("enforce-eager", "eager"), ("limit-mm-per-prompt", "multimodal"),
                       ("gpu-memory-utilization", "utilization"), ("max-model-len", "max-model-len")):
        if flag in mentioned:
            out.append(cue(f"flag:{name}", f"--{flag} is named with the OOM"))
    alloc, free, total = n.get("alloc_gib"), n.get("free_gib"), n.get("total_gib") or ctx.gpu_total_gib
    held = n.get("in_use_gib") or n.get("allocated_gib")
    if ctx.config_largest_tensor_gib:
        largest = ctx.config_largest_tensor_gib
        largest_how = f"this model's largest is {largest:.2f} GiB, from its config"
    else:
        largest, largest_how = LARGEST_WEIGHT_TENSOR_GIB, f"a large model's embedding is ~{LARGEST_WEIGHT_TENSOR_GIB} GiB"
    if alloc is not None:
        if free is not None and total and alloc <= 8 / 1024 and free < max(0.02 * total, 0.05):
            out.append(cue("size:tiny-alloc-full-gpu", f"a {alloc * 1024:.1f} MiB allocation on a full GPU (the KV "
                           "cache already took the rest)"))
        elif alloc > largest * 1.05:
            out.append(cue("size:alloc-above-tensor", f"a {alloc:.2f} GiB allocation is larger than one weight tensor "
                           f"({largest_how}): activations"))
        elif total and held is not None and held < 0.1 * total:
            out.append(cue("size:held-little", f"the process held only {held:.2f} GiB of {total:.1f} GiB"))
        else:
            out.append(cue("size:tensor-sized", f"a {alloc * 1024:.0f} MiB allocation, the size of one weight tensor "
                           "(estimate from the OOM sizes)"))
        if total and held is not None and held > 0.9 * total and alloc > 0.05 * total:
            out.append(cue("size:large-on-full", "a large allocation when the process already holds most of the GPU"))
    from oomguard.diagnose.phase_facts import memory_facts

    for fact in memory_facts(n, ctx, col):
        out.append(cue(fact.feature, fact.why))
    if not placed:
        out.append(cue("oom:no-phase", "no phase marker or traceback frame places the OOM"))
    return out


def _context_cues(col: Collector, ctx: Context) -> list[Cue]:
    out: list[Cue] = []

    def add(feature: str, why: str, anchor: bool = False) -> None:
        out.append(Cue(feature, why, "(context)", 0, why, anchor=anchor))

    out += _config_checks(col, ctx)

    weights = ctx.weights_per_gpu_gib(col)
    total = ctx.gpu_total_gib or ctx.mentioned_gpu_gib
    util = ctx.gpu_memory_utilization
    if weights is not None and total:
        w, how = weights
        if w > 0.92 * total:
            add("ctx:weights-exceed-gpu", f"weights ~{w:.1f} GiB per GPU ({how}) exceed the {total:.1f} GiB GPU")
        elif w > 0.75 * total:
            add("ctx:weights-tight", f"weights ~{w:.1f} GiB per GPU ({how}) leave little of the {total:.1f} GiB GPU")
        else:
            add("ctx:weights-fit", f"weights ~{w:.1f} GiB per GPU ({how}) fit the {total:.1f} GiB GPU")
        if w < SMALL_WEIGHTS_SHARE * total:
            # a model that small cannot fill the card by its weights: the memory went to something else
            add("ctx:weights-small", f"weights ~{w:.1f} GiB per GPU ({how}) are under {SMALL_WEIGHTS_SHARE:.0%} of "
                f"the {total:.1f} GiB GPU")
        if util and w > util * total:
            # vLLM's budget is utilization x total: weights above it leave no KV cache, or do not load
            add("ctx:weights-above-budget", f"weights ~{w:.1f} GiB per GPU ({how}) exceed the budget "
                f"{util:g} x {total:.1f} GiB = {util * total:.1f} GiB")
    gpus_used = ctx.tensor_parallel_size * ctx.pipeline_parallel_size
    if ctx.gpus_given and ctx.gpus_given > gpus_used and (weights is None or not total
                                                          or weights[0] > SMALL_WEIGHTS_SHARE * total):
        # the machine has more GPUs than the launch splits the model over, and nothing says the model is small
        add("ctx:gpus-unused", f"{ctx.gpus_given} GPUs, the launch uses {gpus_used} (tensor x pipeline parallel)")
    _launch_cues(ctx, util, add)
    if ctx.multimodal:
        add("ctx:multimodal", "a multimodal model (a vision/audio encoder is profiled at start-up)")
        if total and total >= 40:
            add("ctx:multimodal-large-gpu", "a multimodal model on a large GPU")
    if ctx.enforce_eager:
        add("ctx:eager", "--enforce-eager: no CUDA graphs are captured")
    if ctx.engine == "V0":
        add("ctx:engine-v0", "the V0 engine")
    if ctx.platform == "cpu":
        add("ctx:platform-cpu", "the CPU backend (its memory is host RAM)")
    if ctx.tensor_parallel_size > 1:
        add("ctx:tensor-parallel", f"tensor-parallel size {ctx.tensor_parallel_size}")
    if any(phase >= Phase.SERVING for phase in col.paste_phase.values()):
        add("ctx:served", "the server answered requests (HTTP or throughput lines)")
    elif any(phase >= Phase.READY for phase in col.paste_phase.values()):
        add("ctx:ready", "the server reached its ready line")
    return out


def _launch_cues(ctx: Context, util: float | None, add) -> None:  # noqa: ANN001 - the caller's factory
    """The launch's own settings that bear on which memory failure it was (issue 16: facts against the words): a
    utilization set above or below the release's default (above: less room for anything else on the card; below:
    a user who already fought for memory), a max-model-len given (the KV cache is sized to it)."""
    if util is not None:
        default = ctx.default_util()
        if util > default + 0.005:
            add("ctx:util-above-default", f"--gpu-memory-utilization {util:g} is above the default {default:g}")
        elif util < default - 0.005:
            add("ctx:util-below-default", f"--gpu-memory-utilization {util:g} is below the default {default:g}")
    if _int_arg(ctx, "max_model_len"):
        add("ctx:max-len-set", f"--max-model-len {_int_arg(ctx, 'max_model_len')} is given")


def _config_checks(col: Collector, ctx: Context) -> list[Cue]:
    """Checks vLLM makes at start-up, made here from the model's config and the arguments: a failure even when the
    paste stops before vLLM's own error line (anchors)."""
    out: list[Cue] = []

    def add(feature: str, why: str) -> None:
        out.append(Cue(feature, why, "(context)", 0, why, anchor=True))

    tp = ctx.tensor_parallel_size
    if ctx.config_heads and tp > 1 and ctx.config_heads % tp:
        # vLLM's ModelConfig.verify_with_parallel_config: heads must divide by the tensor-parallel size
        add("cfg:heads-not-divisible", f"the model's {ctx.config_heads} attention heads do not divide by "
            f"tensor-parallel size {tp} (vLLM refuses this)")
    asked = _int_arg(ctx, "max_model_len")
    if asked and ctx.config_max_len and asked > ctx.config_max_len:
        add("cfg:max-len-above-model", f"--max-model-len {asked} is above the {ctx.config_max_len} vLLM derives from "
            "the model's config")
    blocks = col.latest("num_gpu_blocks")
    limit = asked or ctx.config_max_len
    if blocks is not None and limit and ctx.engine != "V1":
        block_size = _int_arg(ctx, "block_size") or 16
        if 0 < blocks.value * block_size < limit:
            # V0's _verify_args after the profile: max_seq_len must fit in the GPU blocks
            add("kv:blocks-below-max-len", f"{int(blocks.value)} GPU blocks x {block_size} tokens = "
                f"{int(blocks.value) * block_size} tokens, less than max_model_len {limit}")
    return out


def _int_arg(ctx: Context, name: str) -> int | None:
    value = ctx.arg(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


_SIGNAL_WHY = {
    Signal.CUDA_OOM: "torch's CUDA out-of-memory error", Signal.LOAD_OOM: "vLLM: not enough GPU memory to load the model",
    Signal.SAMPLER_WARMUP_OOM: "vLLM: OOM warming up the sampler", Signal.ALLOCATOR_FAILURE: "CUDA caching allocator failed",
    Signal.OOM_PROSE: "the report says out of memory", Signal.STARTUP_FREE_MEMORY: "vLLM: free memory at start-up is "
    "below the requested utilization", Signal.PROFILING_INCONSISTENT: "vLLM: memory profiling inconsistent (another "
    "process changed free memory)", Signal.KV_ALLOCATION_OOM: "OOM allocating the KV cache",
    Signal.NO_KV_MEMORY: "vLLM: no memory for KV cache blocks", Signal.NEGATIVE_KV: "negative KV cache memory",
    Signal.ZERO_BLOCKS: "0 GPU blocks", Signal.KV_TOO_SMALL: "vLLM: the KV cache cannot hold max_model_len tokens",
    Signal.KV_PROSE: "the report says the KV cache is too small", Signal.MAMBA_LIMIT: "vLLM: max_num_seqs above the "
    "Mamba cache blocks", Signal.MAX_LEN_EXCEEDS: "vLLM: max_model_len above the model's maximum",
    Signal.UNRECOGNIZED_ARGS: "argparse: unrecognized arguments", Signal.INVALID_ARG_VALUE: "an invalid argument value",
    Signal.MODEL_NOT_FOUND: "the model path or repository was not found", Signal.CONFIG_REJECTED: "vLLM rejected the "
    "configuration", Signal.ILLEGAL_MEMORY_ACCESS: "CUDA illegal memory access / device-side assert",
    Signal.KERNEL_OOM_KILL: "the kernel OOM killer", Signal.HOST_ALLOC_FAILURE: "host memory allocation failed",
    Signal.HOST_PROSE: "the report says host memory ran out", Signal.SIGKILL: "a process was killed with SIGKILL",
    Signal.ENGINE_DIED: "the engine died", Signal.GENERIC_EXCEPTION: "an exception oomguard has no class for",
    Signal.MISSING_DEPENDENCY: "a Python module is missing", Signal.CHAT_TEMPLATE: "the chat template failed",
    Signal.NCCL_ERROR: "NCCL failed", Signal.RAY_PLACEMENT: "Ray could not place the GPUs",
    Signal.SWAP_EXHAUSTED: "vLLM (V0): the KV cache filled while serving and the CPU swap space it preempts "
    "sequences into filled too",
}
_CUE_WHY = {"host": "host-memory cue", "req": "request-time cue", "words": "the reporter's words",
            "fail": "the report says something failed",
            "comp": "the component that printed the log", "gpu": "the GPU", "cfg": "a configuration cue"}
