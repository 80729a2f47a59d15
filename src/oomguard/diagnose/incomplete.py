"""A vLLM log that stops before the server was ready, with no error: not a clean start.

vLLM prints a ready line once the engine is up ("Application startup complete", "Uvicorn running on",
"Starting vLLM API server", "init engine ... took"); a log that shows a start without one and without any
error was cut (a partial paste, a rotated file) or the process was killed without a word (SIGKILL by the
kernel OOM killer, a container limit, an operator). Either way diagnose could not do its whole job: it
says the phase the log stopped in, what is likely when the numbers leave a thin margin, and what to
collect next, and the CLI exits 3.
"""

from __future__ import annotations

from typing import Any

from oomguard.diagnose.classes import InputKind, Phase
from oomguard.diagnose.context import Context
from oomguard.diagnose.facts import Collector
from oomguard.records import field, record

# A margin below this share of the GPU after the weights is "thin" (the profile run, CUDA graphs and a
# useful KV cache rarely fit in less than ~8 % of a GPU); an estimate, said as such.
THIN_MARGIN = 0.08

_NEXT = {
    Phase.UNKNOWN: "the whole log from the start (vLLM's version line and arguments)",
    Phase.STARTING: "the rest of the log after the arguments",
    Phase.LOADING: "the rest of the log after weight loading started",
    Phase.PROFILING: "the rest of the log after 'Model loading took'",
    Phase.KV_CACHE: "the rest of the log after the KV cache size lines",
    Phase.GRAPH_CAPTURE: "the rest of the log after CUDA graph capture started",
    Phase.WARMUP: "the rest of the log after graph capture finished",
}


@record
class Incomplete:
    phase: Phase
    file: str
    likely: str | None = None
    confidence: float | None = None
    collect: list[str] = field(default_factory=list)
    reason: str = "stopped"  # "stopped": a vLLM log without a ready line; "unrecognised": text with nothing known

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reason": self.reason, "stopped_during": self.phase.label, "file": self.file,
                               "collect": list(self.collect)}
        if self.likely:
            out["likely"] = self.likely
            out["likely_confidence"] = self.confidence
        return out

    @property
    def summary(self) -> str:
        if self.reason == "unrecognised":
            return ("incomplete: the text holds no vLLM log lines and no failure oomguard recognises "
                    "(this is not a clean start; it is nothing oomguard can read)")
        where = "before any start-up phase oomguard knows" if self.phase == Phase.UNKNOWN else \
            f"during {self.phase.label}"
        return (f"incomplete: the log stops {where}, with no error and no ready line "
                "(cut short, or the process was killed without a message)")


def find_incomplete(col: Collector, ctx: Context, inputs: list[Any], has_verdicts: bool) -> Incomplete | None:
    if has_verdicts:
        return None
    if col.phase_reached >= Phase.READY:
        # The server came up (a ready line) or answered requests (HTTP access / throughput lines), with no
        # failure: running, whatever else the text holds (an access log alone is not "unrecognised").
        return None
    logs = [r for r in inputs if r.kind == InputKind.VLLM_LOG]
    readable = [r for r in inputs if r.kind not in (InputKind.EMPTY, InputKind.BINARY, InputKind.UNREADABLE)]
    if not logs and readable and all(r.kind == InputKind.TEXT for r in readable):
        return Incomplete(Phase.UNKNOWN, readable[-1].name, reason="unrecognised", collect=[
            "the vLLM server's own log (`docker logs`, `kubectl logs`, `journalctl -u`), from its first line",
            "`oomguard bundle FILE -o report.md --ask`: a second opinion from an LLM endpoint "
            "(OOMGUARD_LLM_BASE_URL) on text oomguard does not recognise"])
    if not logs:
        return None
    collect = [_NEXT.get(col.phase_reached, "the whole log"),
               "`dmesg -T | tail -50` (or `journalctl -k`): a kernel OOM kill leaves no line in vLLM's log",
               "the exit status of the vLLM process (`echo $?`, `docker inspect -f '{{.State.ExitCode}}'`, "
               "`kubectl describe pod`: 137 = SIGKILL)"]
    if col.phase_reached >= Phase.LOADING:
        collect.append("`nvidia-smi` while it starts (another process on the GPU)")
    inc = Incomplete(col.phase_reached, logs[-1].name, collect=collect)
    _likely(inc, col, ctx)
    return inc


def _likely(inc: Incomplete, col: Collector, ctx: Context) -> None:
    weights = col.latest("weights")
    total = ctx.gpu_total_gib
    if inc.phase in (Phase.STARTING, Phase.LOADING) and not col.kernel_kills:
        # Loading reads shards through host RAM; a silent stop here is most often the OOM killer.
        inc.likely, inc.confidence = ("host-oom (killed while loading: weights pass through host RAM) or a cut log",
                                      0.3)
    if weights is None or not total:
        return
    util = ctx.gpu_memory_utilization or 0.9
    margin = util * total - weights.value
    if margin < THIN_MARGIN * total and inc.phase >= Phase.PROFILING:
        inc.likely = (f"profile-oom or no-kv-memory: the weights take {weights.value:.2f} GiB of the "
                      f"{util:g} x {total:.2f} GiB budget, leaving {margin:.2f} GiB for activations, CUDA graphs and KV "
                      f"cache (estimate; the log has no error)")
        inc.confidence = 0.35
