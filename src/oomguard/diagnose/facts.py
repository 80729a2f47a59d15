"""The timeline diagnose builds while reading: facts, phases, tracebacks and signals.

``Collector`` is fed ``LogLine``s in file order by the parsers. It tracks the
phase each process has reached (tensor-parallel workers log separately and
interleave), the traceback frames that precede an exception, and run
boundaries (a log holding several restarts). Everything it stores is bounded,
so a multi-gigabyte log with millions of repeated errors costs no more memory
than a short one.
"""

from __future__ import annotations

from typing import Any

from oomguard.diagnose.classes import Phase
from oomguard.diagnose.events import LogLine, Signal, SignalEvent
from oomguard.records import field, record

GiB = 1 << 30
MAX_MEMORY_FACTS_PER_NAME = 16
MAX_SIGNALS_PER_KIND = 64
MAX_FRAMES = 40
MAX_TIMELINE = 400
MAX_ERRORS = 50


@record
class MemoryFact:
    name: str
    value: float
    unit: str  # "GiB", "tokens", "blocks", "x", "ratio", "seconds"
    file: str
    line: int
    text: str
    proc: str = ""
    run: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "value": self.value, "unit": self.unit,
                               "file": self.file, "line": self.line, "text": self.text}
        if self.proc:
            out["process"] = self.proc
        return out


@record
class KernelKill:
    pid: int | None
    name: str | None
    anon_rss_bytes: int | None
    total_vm_bytes: int | None
    constraint: str | None
    cgroup: str | None
    file: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid, "name": self.name, "anon_rss_bytes": self.anon_rss_bytes,
            "total_vm_bytes": self.total_vm_bytes, "constraint": self.constraint, "cgroup": self.cgroup,
            "file": self.file, "line": self.line, "text": self.text,
        }


@record
class CueHit:
    """The first line that carried a report cue (parsers/cues.py), and how many lines did."""

    feature: str
    file: str
    line: int
    text: str
    run: int
    count: int = 1
    error: bool = False  # seen on an error record (ERROR / CRITICAL, an exception line), not only in prose


@record
class FileState:
    """Per-file reading state (phases and tracebacks do not cross files)."""

    phase: Phase = Phase.UNKNOWN
    proc_phase: dict[str, Phase] = field(default_factory=dict)
    frames: dict[str, list[str]] = field(default_factory=dict)
    frame_seen_at: dict[str, int] = field(default_factory=dict)
    pending_validation: dict[str, str] = field(default_factory=dict)
    pending_field: dict[str, str] = field(default_factory=dict)
    prog: str | None = None  # argparse program name from a "usage:" line
    usage_seen: bool = False  # an argparse usage dump was signalled in this file
    last_frames_proc: str | None = None  # the process whose traceback was seen last
    # per process: the component (parsers/frames.COMPONENTS) of the innermost frame of its traceback that is
    # neither the interpreter's nor the web framework's: the code that raised
    raiser: dict[str, str] = field(default_factory=dict)


@record
class Collector:
    """Accumulates facts and signals across all inputs."""

    version: str | None = None
    engine: str | None = None
    platform: str | None = None
    model: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    gpus: dict[int, dict[str, Any]] = field(default_factory=dict)
    memory: dict[str, list[MemoryFact]] = field(default_factory=dict)
    phases_seen: list[dict[str, Any]] = field(default_factory=list)
    phase_reached: Phase = Phase.UNKNOWN
    requests: dict[str, Any] | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    kernel_kills: list[KernelKill] = field(default_factory=list)
    kernel_memory: list[dict[str, Any]] = field(default_factory=list)
    nvidia_smi: list[dict[str, Any]] = field(default_factory=list)
    topology: list[dict[str, Any]] = field(default_factory=list)
    signals: list[SignalEvent] = field(default_factory=list)
    signal_counts: dict[Signal, int] = field(default_factory=dict)
    # Per (file, run): every traceback function and the furthest phase logged anywhere in it. A pasted report
    # often puts the error first (an issue title, a console showing newest lines first, Ray flushing a worker's
    # buffer late): an OOM line with no frames or phase of its own is placed by the rest of its paste.
    paste_frames: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    paste_phase: dict[tuple[str, int], Phase] = field(default_factory=dict)
    paste_hints: dict[tuple[str, int], set[str]] = field(default_factory=dict)  # words about the whole paste
    timeline: list[dict[str, Any]] = field(default_factory=list)
    timeline_dropped: int = 0
    notes: list[str] = field(default_factory=list)
    skipped_numbers: int = 0
    cli_args: dict[str, Any] = field(default_factory=dict)  # only "non-default args" / Namespace(...)
    vllm_pids: dict[int, str] = field(default_factory=dict)  # pid -> process prefix seen in vLLM lines
    ray_gpus: int | None = None  # GPUs in the Ray cluster (`ray status`)
    multimodal_seen: bool = False  # "Encoder cache will be initialized ... image items" and the like
    # The first error record (ERROR / CRITICAL, an exception line) logged after the server's ready or serving line in
    # its file: (file, line, text). A server that came up and then logs an error failed under load; complaints in
    # words beside a server that came up and logged no error are not a failure of it (classifier.classify).
    served_failure: tuple[str, int, str] | None = None
    cues: dict[str, CueHit] = field(default_factory=dict)  # report cues by feature (bounded by the cue table)
    # candidate lines for the message catalog (parsers/messages.LineBuffer, bounded), matched once at the end
    message_lines: Any = None
    run: int = 0
    seq: int = 0
    state: FileState = field(default_factory=FileState)
    last_file: str = ""

    # --- per file ------------------------------------------------------
    def start_file(self, name: str) -> None:
        self.state = FileState()
        self.last_file = name

    # --- phases --------------------------------------------------------
    def phase_of(self, proc: str) -> Phase:
        """The phase of ``proc``; a process that logged no progress of its own (the engine core of a
        multi-worker run, an unprefixed line) takes the file's latest phase."""
        own = self.state.proc_phase.get(proc, Phase.UNKNOWN) if proc else Phase.UNKNOWN
        return own if own > Phase.STARTING else self.state.phase

    def set_phase(self, phase: Phase, line: LogLine) -> None:
        st = self.state
        if phase == Phase.STARTING and st.phase > Phase.STARTING:
            # A new start after the previous one got somewhere: a restart.
            self.run += 1
            st.proc_phase.clear()
            st.phase = Phase.STARTING
        if line.proc:
            st.proc_phase[line.proc] = phase
        if phase >= Phase.READY:
            # The API server reports readiness and traffic for every worker.
            for proc, current in st.proc_phase.items():
                if current < phase:
                    st.proc_phase[proc] = phase
        rewind = phase == Phase.KV_CACHE and st.phase == Phase.GRAPH_CAPTURE
        if phase > st.phase or rewind or not line.proc:
            if phase != st.phase:
                self.phases_seen.append({"phase": phase.label, "file": line.file, "line": line.line})
                if len(self.phases_seen) > MAX_TIMELINE:
                    del self.phases_seen[1 : len(self.phases_seen) // 2]
            st.phase = phase
            self.phase_reached = phase
        key = (line.file, self.run)
        if phase > self.paste_phase.get(key, Phase.UNKNOWN):
            self.paste_phase[key] = phase
        self.add_timeline("phase", line, phase.label)

    def advance_phase(self, phase: Phase, line: LogLine) -> None:
        """Move forward only (a late line from one worker must not rewind the others)."""
        if line.proc:
            current = self.state.proc_phase.get(line.proc, Phase.UNKNOWN)
        else:
            current = self.state.phase
        # >= 0.18 profiles CUDA-graph memory before sizing the KV cache, so a KV line may follow it.
        rewind = phase == Phase.KV_CACHE and current == Phase.GRAPH_CAPTURE
        if phase > current or phase == Phase.STARTING or rewind:
            self.set_phase(phase, line)

    # --- tracebacks ----------------------------------------------------
    def start_traceback(self, line: LogLine) -> None:
        self.state.frames[line.proc] = []
        self.state.frame_seen_at[line.proc] = line.line
        self.state.raiser.pop(line.proc, None)

    def add_frame(self, line: LogLine, function: str, component: str | None = None) -> None:
        if component is not None and component not in ("python", "server"):
            self.state.raiser[line.proc] = component
        paste = self.paste_frames.setdefault((line.file, self.run), [])
        if len(paste) < 4 * MAX_FRAMES:
            paste.append(function)
        frames = self.state.frames.setdefault(line.proc, [])
        frames.append(function)
        if len(frames) > MAX_FRAMES:
            del frames[: len(frames) - MAX_FRAMES]
        self.state.frame_seen_at[line.proc] = line.line
        self.state.last_frames_proc = line.proc

    def add_outer_frame(self, line: LogLine, function: str) -> None:
        proc = line.proc if line.proc in self.state.frames else (self.state.last_frames_proc or line.proc)
        frames = self.state.frames.setdefault(proc, [])
        if function not in frames:
            frames.insert(0, function)
            del frames[MAX_FRAMES:]
        if proc == line.proc:
            self.state.frame_seen_at[proc] = line.line

    def recent_frames(self, line: LogLine) -> tuple[str, ...]:
        proc = self._traceback_of(line)
        return tuple(self.state.frames[proc]) if proc is not None else ()

    def recent_raiser(self, line: LogLine) -> str | None:
        """The component whose code raised the error on ``line`` (its traceback's innermost frame), if known."""
        proc = self._traceback_of(line)
        return self.state.raiser.get(proc) if proc is not None else None

    def _traceback_of(self, line: LogLine) -> str | None:
        """The process whose traceback the error on ``line`` ends, or None."""
        st = self.state
        proc = line.proc
        frames = st.frames.get(proc)
        if not frames and st.last_frames_proc is not None and st.last_frames_proc != proc:
            # Ray and the engine core re-raise a worker's error under their own prefix, and pasted logs drop
            # prefixes from some lines: the traceback printed just before, by any process, is this error's.
            proc = st.last_frames_proc
            frames = st.frames.get(proc)
            if frames and line.line - st.frame_seen_at.get(proc, 0) > 40:
                return None
        if not frames:
            return None
        # A traceback far above this line belongs to another failure.
        if line.line - st.frame_seen_at.get(proc, 0) > 200:
            return None
        return proc

    # --- facts ---------------------------------------------------------
    def add_memory(self, name: str, value: float, unit: str, line: LogLine) -> None:
        facts = self.memory.setdefault(name, [])
        fact = MemoryFact(name, value, unit, line.file, line.line, line.message[:300], line.proc, self.run)
        if len(facts) >= MAX_MEMORY_FACTS_PER_NAME:
            facts[-1] = fact
        else:
            facts.append(fact)
        self.add_timeline("memory", line, f"{name}={value:g} {unit}")

    def latest(self, name: str) -> MemoryFact | None:
        facts = self.memory.get(name)
        return facts[-1] if facts else None

    def add_gpu(self, index: int, **info: Any) -> None:
        entry = self.gpus.setdefault(index, {"index": index})
        for key, value in info.items():
            if value is not None:
                entry[key] = value

    def add_timeline(self, kind: str, line: LogLine, what: str) -> None:
        if len(self.timeline) >= MAX_TIMELINE:
            self.timeline_dropped += 1
            # Keep the start and the most recent entries: drop from the middle.
            del self.timeline[MAX_TIMELINE // 4]
        entry = {"kind": kind, "file": line.file, "line": line.line, "what": what}
        if line.time:
            entry["time"] = line.time
        if line.proc:
            entry["process"] = line.proc
        self.timeline.append(entry)

    # --- report cues ---------------------------------------------------
    def note_cue(self, feature: str, line: LogLine, *, error: bool = False) -> None:
        hit = self.cues.get(feature)
        if hit is None:
            self.cues[feature] = CueHit(feature, line.file, line.line, line.raw.strip()[:300], self.run, error=error)
        else:
            hit.count += 1
            if error and not hit.error:
                hit.file, hit.line, hit.text, hit.error = line.file, line.line, line.raw.strip()[:300], True

    # --- signals -------------------------------------------------------
    def signal(
        self,
        signal: Signal,
        line: LogLine,
        *,
        numbers: dict[str, Any] | None = None,
        hints: frozenset[str] = frozenset(),
        text: str | None = None,
    ) -> SignalEvent:
        self.seq += 1
        event = SignalEvent(
            signal=signal,
            file=line.file,
            line=line.line,
            text=(text or line.raw).strip()[:2000],
            proc=line.proc,
            phase=self.phase_of(line.proc),
            run=self.run,
            seq=self.seq,
            frames=self.recent_frames(line),
            raised_by=self.recent_raiser(line),
            numbers=numbers or {},
            hints=hints,
            prose=line.prose,
        )
        count = self.signal_counts.get(signal, 0) + 1
        self.signal_counts[signal] = count
        if count <= MAX_SIGNALS_PER_KIND:
            self.signals.append(event)
        else:
            # Keep the most recent occurrence in place of the previous overflow one.
            for i in range(len(self.signals) - 1, -1, -1):
                if self.signals[i].signal == signal:
                    self.signals[i] = event
                    break
        if signal != Signal.ENGINE_DIED and len(self.errors) < MAX_ERRORS:
            self.errors.append({
                "file": line.file, "line": line.line, "signal": signal.value,
                "text": event.text[:500], "traceback": list(event.frames[-12:]),
                **({"process": line.proc} if line.proc else {}),
            })
        self.add_timeline("error", line, signal.value)
        return event

    # --- output --------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "engine": self.engine,
            "platform": self.platform,
            "model": self.model,
            "args": self.args,
            "gpus": [self.gpus[k] for k in sorted(self.gpus)],
            "memory": [f.to_dict() for facts in self.memory.values() for f in facts],
            "phase_reached": self.phase_reached.label,
            "phases": self.phases_seen[-50:],
            "requests_in_flight": self.requests,
            "errors": self.errors,
            "kernel_oom_kills": [k.to_dict() for k in self.kernel_kills],
            "kernel_memory": self.kernel_memory,
            "nvidia_smi": self.nvidia_smi,
            "topology": self.topology,
            "timeline": self.timeline,
            "notes": self.notes,
        }
