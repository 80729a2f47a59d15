"""Cut a stream of log lines into start-ups, and read each one's release, launch, model, GPU and ledger.

One input can hold many start-ups: a pod restarting, replicas behind one ``kubectl logs``
or compose stream, tensor-parallel workers interleaving their lines. The lines are cut by:

- **replica**: the stream key of the line (kubectl ``--prefix``, compose's service, a
  log store's pod / host / stream label) keeps replicas apart from the start;
- **process**: vLLM prefixes lines with the process (``(APIServer pid=1)``,
  ``(EngineCore_DP0 pid=7)``, ``(Worker_TP1 pid=9)``); a pid seen before goes back to its
  start-up even when another one is in between;
- **start markers**: the API server's version line, ``non-default args``, V0's
  ``args: Namespace(...)`` and the engine's ``Initializing ... LLM engine`` line open a
  new start-up once the current one got past starting (a restart), or when another API
  server announces itself.

Each start-up is fed, line by line, to its own diagnose ``Collector`` through diagnose's
parsers (``oomguard.diagnose.parsers.feed``): the same reading of vLLM's lines as
``oomguard diagnose``, for every format from 0.2 to 0.33.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from oomguard.calibrate.sources import SourceLine
from oomguard.diagnose import parsers
from oomguard.diagnose.classes import Phase
from oomguard.diagnose.facts import Collector, MemoryFact
from oomguard.diagnose.lines import parse_line

_STRONG = ("vLLM API server version", "non-default args:", "args: Namespace(")
_ENGINE = re.compile(r"Initializing an? (?:V[01] )?LLM engine")
_WEIGHTS = "weights took"  # "Loading model weights took" (V0) / "Model loading took" handled below
_PID = re.compile(r"pid=(\d{1,10})")
_DEVICE_NAME = re.compile(r"device_name=([A-Za-z0-9_\-]+)")
MAX_STARTUPS = 100_000


@dataclass
class Startup:
    """One start-up's lines, read by diagnose's parsers."""

    file: str
    stream: str
    first_line: int
    collector: Collector = field(default_factory=Collector)
    pids: set = field(default_factory=set)
    api_pid: int | None = None
    engine_pid: int | None = None
    strong_seen: set = field(default_factory=set)
    gpu_texts: list = field(default_factory=list)  # GPU names the lines printed (kernel config files, nvidia-smi)
    last_line: int = 0
    files: set = field(default_factory=set)

    @property
    def progressed(self) -> bool:
        """Past starting: weights loaded or any ledger line seen."""
        c = self.collector
        return bool(c.memory) or c.phase_reached >= Phase.LOADING

    @property
    def sized(self) -> bool:
        """The KV pool was sized: a later weight load is another start-up."""
        mem = self.collector.memory
        return any(k in mem for k in ("kv_available", "kv_reserved", "num_gpu_blocks", "kv_tokens"))

    @property
    def where(self) -> str:
        return f"{self.file}:{self.first_line}" + (f" [{self.stream}]" if self.stream else "")


class Segmenter:
    """Lines in (file order), start-ups out. One instance per run; streams never mix."""

    def __init__(self) -> None:
        self.startups: list[Startup] = []
        self._current: dict[tuple[str, str], Startup] = {}
        self._by_pid: dict[tuple[str, str, int], Startup] = {}
        self._streams: dict[tuple[str, str], list[Startup]] = {}

    def feed(self, src: SourceLine) -> None:
        line = parse_line(src.file, src.line, src.text)
        msg = line.message
        if not msg:
            return
        key = (src.file, src.stream)
        pid = None
        if line.proc:
            m = _PID.search(line.proc)
            pid = int(m.group(1)) if m else None
        su = self._route(key, pid, line.proc, msg, src)
        su.last_line = src.line
        if "device_name=" in msg:
            m = _DEVICE_NAME.search(msg)
            if m:
                su.gpu_texts.append((m.group(1).replace("_", " "), f"{src.file}:{src.line}"))
        elif ("NVIDIA" in msg or "GeForce" in msg or "Instinct" in msg or "Radeon" in msg) and len(su.gpu_texts) < 8:
            su.gpu_texts.append((msg[:200], f"{src.file}:{src.line}"))
        parsers.feed(line, su.collector)

    def _route(self, key: tuple[str, str], pid: int | None, proc: str, msg: str, src: SourceLine) -> Startup:
        cur = self._current.get(key)
        strong = next((s for s in _STRONG if s in msg), None)
        engine = strong is None and bool(_ENGINE.search(msg)) if "LLM engine" in msg else False
        known = self._by_pid.get((*key, pid)) if pid is not None else None
        if known is not None and not (strong and known.progressed):
            return known
        new = False
        if cur is None:
            new = True
        elif strong:
            is_api = strong == "vLLM API server version"
            new = (cur.progressed or strong in cur.strong_seen
                   or (is_api and cur.api_pid is not None and pid is not None and pid != cur.api_pid))
        elif engine:
            new = cur.progressed and (pid is None or pid not in cur.pids)
        elif (_WEIGHTS in msg or "Model loading took" in msg) and pid is None and cur.sized:
            # logs without start lines (an excerpt, V0 without the API server): a second load after a sized pool
            new = True
        if new and known is not None:
            # the same pid starts again: the process tree restarted (containers reuse pids), so the old
            # start-up's pids no longer name its processes
            for p in known.pids:
                if self._by_pid.get((*key, p)) is known:
                    del self._by_pid[(*key, p)]
        if new:
            if len(self.startups) >= MAX_STARTUPS:
                from oomguard.errors import InputError

                raise InputError(f"more than {MAX_STARTUPS:,} start-ups: split the inputs", file=src.file, line=src.line)
            cur = Startup(src.file, src.stream, src.line)
            cur.collector.start_file(src.file)
            self.startups.append(cur)
            self._streams.setdefault(key, []).append(cur)
            self._current[key] = cur
        if not new and not strong and pid is not None and known is None and "EngineCore" in proc:
            # an engine core not seen before: the oldest start-up of this stream still waiting for one (two API
            # servers started together write their lines in turns)
            waiting = [s for s in self._streams.get(key, [])[-8:] if s.api_pid is not None and not s.engine_pid and not s.sized]
            if waiting:
                cur = waiting[0]
        if strong:
            cur.strong_seen.add(strong)
            if strong == "vLLM API server version" and pid is not None:
                cur.api_pid = pid
        if pid is not None:
            cur.pids.add(pid)
            self._by_pid[(*key, pid)] = cur
            if "EngineCore" in proc:
                cur.engine_pid = pid
        return cur


# ---------------------------------------------------------------- what one start-up logged


@dataclass
class Logged:
    """One logged figure and where it was printed."""

    value: float
    where: str
    note: str = ""
    length: int | None = None  # a concurrency's tokens per request

    def __post_init__(self) -> None:
        if isinstance(self.value, float):
            self.value = round(self.value, 4)  # the parsers go through bytes: 5.01 GiB comes back as 5.0099999998

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"value": self.value, "line": self.where}
        if self.note:
            d["note"] = self.note
        return d


@dataclass
class StartupFacts:
    """What one start-up says about itself, as read from its own lines."""

    where: str
    version: str | None
    engine: str | None
    model: str | None
    args: dict
    total_gib: float | None
    gpu_names: list  # (text, where)
    logged: dict  # term -> Logged
    lines: int = 0
    outcome: str = "unknown"  # "started" | "failed" | "unknown"
    args_cut: str = ""  # a non-default args line cut off mid-way: the launch that ran is not known


def _first(col: Collector, name: str) -> MemoryFact | None:
    facts = col.memory.get(name)
    return facts[0] if facts else None


def _min(col: Collector, name: str) -> MemoryFact | None:
    facts = col.memory.get(name)
    return min(facts, key=lambda f: f.value) if facts else None


def _at(f: MemoryFact) -> str:
    return f"{f.file}:{f.line}"


def _model_name(col: Collector) -> str | None:
    """The model the start-up names; a value cut off mid-way (``'model': 'Qwe``) is passed over for ``model_tag``."""
    for v in (col.model, col.args.get("model"), col.args.get("model_tag")):
        if isinstance(v, str) and v and not any(c in v for c in "'\"{}[]") and not v.endswith("..."):
            return v
    return None


def _engine_from_format(col: Collector) -> str | None:
    """V0 when the ledger lines are in formats only V0 prints, for excerpts without a prefix or an engine line.

    The one-line ``Memory profiling results: ... peak_torch_memory=`` (worker/worker.py @0.6.4-0.6.6) and
    ``# GPU blocks: N, # CPU blocks: M`` (executor/executor_base.py; V1 has no CPU blocks) are V0's own."""
    if col.memory.get("peak_torch") or col.memory.get("num_cpu_blocks"):
        return "V0 (from the log format)"
    return None


def facts_of(su: Startup) -> StartupFacts:
    """The release, launch, model, GPU hints and logged ledger of one start-up (per GPU where vLLM prints per GPU)."""
    col = su.collector
    logged: dict[str, Logged] = {}
    w = _first(col, "weights") or _first(col, "usage_weights")
    if w is not None and w.value > 0:
        logged["weights"] = Logged(w.value, _at(w), "V0 prints GB; the value is GiB" if " GB" in w.text and "GiB" not in w.text else "")
    a = _first(col, "activation_peak") or _first(col, "usage_activation_peak")
    peak_torch = _first(col, "peak_torch")
    if a is not None:
        logged["activation"] = Logged(a.value, _at(a))
    elif peak_torch is not None and w is not None:
        # 0.6.4-0.6.6's one-line profile: peak_torch_memory includes the weights (kv = total × util − peak − non-torch)
        logged["activation"] = Logged(round(peak_torch.value - w.value, 4), _at(peak_torch), "peak_torch_memory − weights")
    nt = _first(col, "non_torch") or _first(col, "usage_non_torch")
    if nt is not None:
        logged["non_torch"] = Logged(nt.value, _at(nt))
    g = _first(col, "cuda_graph") or _first(col, "usage_cuda_graph")
    if g is not None and g.value > 0:
        logged["cuda_graph"] = Logged(g.value, _at(g))
    kv = _min(col, "kv_available") or _min(col, "kv_reserved")
    if kv is not None:
        logged["kv_pool"] = Logged(kv.value, _at(kv))
    t = _min(col, "kv_tokens")
    if t is not None:
        logged["tokens"] = Logged(int(t.value), _at(t))
    c = _min(col, "max_concurrency")
    length = _first(col, "concurrency_len")
    if c is not None and length is not None:
        logged["concurrency"] = Logged(c.value, _at(c), f"for {int(length.value):,} tokens per request", int(length.value))
    b = _min(col, "num_gpu_blocks")
    if b is not None:
        logged["num_gpu_blocks"] = Logged(int(b.value), _at(b))
    total = _first(col, "total_gpu")
    args = dict(col.args)
    if "max_model_len" not in args and length is not None:
        # vLLM prints the concurrency for max_model_len (kv_cache_utils.py): the length that ran
        args["max_model_len"] = int(length.value)
    cut = next((f"'{k}': {v}" for k, v in col.cli_args.items() if isinstance(v, str) and v[:1] in "'\"" and v[-1:] != v[:1]), "")
    failed = bool(col.signals)
    started = "kv_pool" in logged or "tokens" in logged or col.phase_reached >= Phase.READY
    return StartupFacts(
        where=su.where,
        version=col.version,
        engine=col.engine or _engine_from_format(col),
        model=_model_name(col),
        args=args,
        total_gib=total.value if total is not None else None,
        gpu_names=list(su.gpu_texts),
        logged=logged,
        outcome="failed" if failed and not started else ("started" if started else "unknown"),
        args_cut=cut[:60],
    )
