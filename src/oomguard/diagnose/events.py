"""What the readers produce and the classifier consumes.

Readers turn interesting raw lines into ``LogLine``s; parsers turn those into
``SignalEvent``s (something went wrong, or a fact that points at a cause) and
facts. The classifier turns signals into ``Verdict``s.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from oomguard.diagnose.classes import FailureClass, Phase
import oomguard.lazy_re as lazy_re
from oomguard.records import field, record

# How Python names an exception class, by its suffix: the one place (the errors parser and the message table read
# exception lines by it, the prefilter watches lines naming a new one).
EXCEPTION_SUFFIXES = ("Error", "Exception", "Interrupt", "Exit")
# The name in front of an exception line ("torch.OutOfMemoryError", "KeyboardInterrupt"), its own name in group 1.
EXCEPTION_NAME = r"^(?:[\w.]+\.)?(\w*(?:" + "|".join(EXCEPTION_SUFFIXES) + r"))"
# An error record without a level: a line that starts with an error's name ("RuntimeError: ...", "ValueError ...");
# KeyboardInterrupt and SystemExit are not errors.
_ERROR_RECORD = lazy_re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)\b")


def error_record(msg: str, *, colon: bool = False) -> bool:
    """True when ``msg`` starts with an error's name (with ``colon``: the name then ``:``, "RuntimeError: ...")."""
    m = _ERROR_RECORD.match(msg)
    return m is not None and (not colon or msg[m.end():m.end() + 1] == ":")


class Signal(str, Enum):
    """One kind of failure evidence found in a line."""

    CUDA_OOM = "cuda-oom"  # PyTorch / HIP OOM, cuBLAS alloc failure
    LOAD_OOM = "load-oom"  # vLLM's "Failed to load model - not enough GPU memory"
    SAMPLER_WARMUP_OOM = "sampler-warmup-oom"
    ALLOCATOR_FAILURE = "allocator-failure"  # CUDACachingAllocator internal assert
    OOM_PROSE = "oom-prose"  # a person wrote "OOM" / "out of memory"
    STARTUP_FREE_MEMORY = "startup-free-memory"
    PROFILING_INCONSISTENT = "profiling-inconsistent"
    KV_ALLOCATION_OOM = "kv-allocation-oom"
    NO_KV_MEMORY = "no-kv-memory"
    NEGATIVE_KV = "negative-kv"
    ZERO_BLOCKS = "zero-blocks"
    KV_TOO_SMALL = "kv-too-small"
    KV_PROSE = "kv-prose"
    MAMBA_LIMIT = "mamba-limit"
    MAX_LEN_EXCEEDS = "max-len-exceeds"
    UNRECOGNIZED_ARGS = "unrecognized-args"
    INVALID_ARG_VALUE = "invalid-arg-value"
    MODEL_NOT_FOUND = "model-not-found"
    CONFIG_REJECTED = "config-rejected"
    ILLEGAL_MEMORY_ACCESS = "illegal-memory-access"
    KERNEL_OOM_KILL = "kernel-oom-kill"
    HOST_ALLOC_FAILURE = "host-alloc-failure"
    HOST_PROSE = "host-prose"
    SIGKILL = "sigkill"
    ENGINE_DIED = "engine-died"  # secondary: the engine / a worker reported death
    GENERIC_EXCEPTION = "generic-exception"
    MISSING_DEPENDENCY = "missing-dependency"
    CHAT_TEMPLATE = "chat-template"
    NCCL_ERROR = "nccl-error"
    RAY_PLACEMENT = "ray-placement"
    SWAP_EXHAUSTED = "swap-exhausted"  # V0: "Aborted due to the lack of CPU swap space" (preemption by swapping)


@record
class LogLine:
    """One interesting line after prefixes, colours and timestamps were stripped."""

    file: str
    line: int
    raw: str  # as in the file (decoded, ANSI removed), for evidence
    message: str  # without docker / vLLM / level prefixes
    proc: str = ""  # "EngineCore_DP0 pid=12" style key, "" when unprefixed
    level: str | None = None
    src: str | None = None  # vLLM source "gpu_worker.py:298"
    time: str | None = None
    kernel: bool = False  # came from a kernel / journald kernel line
    prose: bool = False  # not a log record at all (pasted text, issue title)
    following: str = ""  # the next line(s), for wrapped messages
    truncated: bool = False
    old_prefix: bool = False  # "file.py:123]" without "[": vLLM <= 0.7, the V0 engine


@record
class SignalEvent:
    signal: Signal
    file: str
    line: int
    text: str
    proc: str = ""
    phase: Phase = Phase.UNKNOWN
    run: int = 0
    seq: int = 0
    frames: tuple[str, ...] = ()
    # the component whose code raised it (parsers/frames.component of the innermost frame: "vllm", "wrapper"...)
    raised_by: str | None = None
    numbers: dict[str, Any] = field(default_factory=dict)
    hints: frozenset[str] = frozenset()
    prose: bool = False


@record(frozen=True)
class Evidence:
    file: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}


class FixValue(Enum):
    """Fix values that are not values: a member of its own type, so that no real flag value (a string
    a message or a launch holds) can ever be taken for one. JSON writes its text and ``"choose": true``."""

    # a setting an error names without saying what it should be: the user picks the value
    CHOOSE = "<a value the message allows>"


CHOOSE_VALUE = FixValue.CHOOSE


@record
class Fix:
    """One flag edit. ``value`` None means "remove this flag"; True means "add this switch"; CHOOSE_VALUE
    means "change this setting" (the message names it, not its value)."""

    flag: str
    value: Any
    why: str
    effect: str | None = None  # filled by a plan callback when the model and GPU are known
    checked: str | None = None  # the planner's verdict on the launch with this fix: "starts: ..." / "fails: ..."
    chosen: str | None = None  # why the fix is at its place in the list (fixes.attach_fixes: a cue, the votes...)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = ({"flag": self.flag, "value": self.value.value, "why": self.why, "choose": True}
                               if isinstance(self.value, FixValue) else {"flag": self.flag, "value": self.value, "why": self.why})
        if self.effect:
            out["effect"] = self.effect
        if self.checked:
            out["checked"] = self.checked
        if self.chosen:
            out["chosen"] = self.chosen
        return out


@record
class Verdict:
    cls: FailureClass
    confidence: float
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    fix: list[Fix] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    phase: Phase = Phase.UNKNOWN
    first_seq: int = 0
    tier: str = "message"  # "paraphrase": rests on people's wording only; "generic": on a generic exception
    component: str | None = None  # whose code raised its error line (features "raised:"): "vllm", "wrapper"...
    # the terms of the class's score (classifier._explain): feature, weight, why, file/line/text
    cues: list[dict[str, Any]] = field(default_factory=list)
    alternatives: list[tuple[str, float]] = field(default_factory=list)  # the next classes and their probabilities
    settle: str | None = None  # what would settle a class chosen without direct evidence (an OOM's phase)
    # a GPU OOM's two levels (scoring.score): p(the GPU-memory family) and p(phase | family), most likely first
    family: tuple[float, list[tuple[str, float]]] | None = None
    # the phase cues that put this phase ahead of the next one (classifier._phase_why): feature, margin, why
    phase_decided_by: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "class": self.cls.value,
            "confidence": round(self.confidence, 2),
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": [f.to_dict() for f in self.fix],
            "numbers": list(self.numbers),
            "phase": self.phase.label,
            "tier": self.tier,
            "cues": [dict(c) for c in self.cues],
            "alternatives": [{"class": c, "probability": p} for c, p in self.alternatives],
        }
        if self.component:
            out["component"] = self.component
        if self.settle:
            out["settle"] = self.settle
        if self.family is not None:
            out["family"] = {"name": "gpu-memory", "probability": self.family[0],
                             "phase": [{"class": c, "probability": p} for c, p in self.family[1]]}
            if self.phase_decided_by:
                out["family"]["decided_by"] = [dict(c) for c in self.phase_decided_by]
        return out
