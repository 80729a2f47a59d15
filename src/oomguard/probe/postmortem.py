"""probe meets diagnose: the server log's verdict in the probe's report (``--server-log FILE``).

When the engine crashed (vLLM's "EngineCore encountered an issue" is the secondary
error; the root one is in the server log) or the server died under load, the log
says *why*. The probe runs ``oomguard diagnose`` on it after the load and:

- records the log's verdicts under ``server_log`` in the result (text, JSON, HTML);
- when the probe's own finding is an unexplained death or crash (``unknown`` or
  ``server-error``), and the log names a class, that class becomes the run's, with
  the log's evidence and fix (the probe's own observation stays as evidence);
- when the probe passed but the log shows a failure, it says so as a note (the
  verdict stays the probe's: the requests it sent did complete).
"""

from __future__ import annotations

from typing import Any

from oomguard.probe.classes import ProbeClass
from oomguard.probe.verdict import Finding, Verdict

# Probe classes a log's verdict may replace: they say "something died" without saying why.
_UNEXPLAINED = (ProbeClass.UNKNOWN, ProbeClass.SERVER_ERROR, ProbeClass.STREAM_BROKEN, ProbeClass.TIMEOUT)


def diagnose_log(path: str) -> dict[str, Any]:
    """Run diagnose on one server log; the JSON-ready (redacted) verdicts.

    The one adapter over diagnose's stable entry point (``diagnose_paths``: what ``oomguard
    diagnose`` runs, plus the planner's check of each fix when the log names model and GPU).
    Raises ``InputError`` for a file it cannot read.
    """
    from oomguard.diagnose.diagnosis import diagnose_paths

    d = diagnose_paths([path])
    out = d.to_dict()
    verdicts = out.get("verdicts") or []
    return {
        "file": path,
        "readable": d.readable,
        "verdicts": verdicts[:5],
        "inputs": out.get("inputs") or [],
        "summary": _summary(verdicts, d.readable),
    }


def _summary(verdicts: list[dict[str, Any]], readable: bool) -> str:
    if not readable:
        return "the server log could not be read as text; nothing diagnosed"
    if not verdicts:
        return "diagnose found no failure in the server log"
    top = verdicts[0]
    return f"the server log says {top.get('class')}: {top.get('summary')}"


def _fix_text(fix: dict[str, Any]) -> str:
    flag, value = fix.get("flag"), fix.get("value")
    if not flag:
        return str(fix.get("why") or "")
    if value is None:
        return f"remove {flag}"
    return flag if value is True else f"{flag} {value}"


def _probe_class(name: str | None) -> ProbeClass | None:
    try:
        return ProbeClass(name) if name else None
    except ValueError:
        return None


def merge(verdict: Verdict, log: dict[str, Any]) -> Verdict:
    """The probe's verdict with the server log's diagnosis folded in (see the module docstring)."""
    verdicts = log.get("verdicts") or []
    if not verdicts:
        if not verdict.passed:
            verdict.notes.append(f"--server-log {log.get('file')}: {log.get('summary')}")
        return verdict
    top = verdicts[0]
    cls = _probe_class(top.get("class"))
    evidence = [f"{e.get('file') or log.get('file')}:{e.get('line')}: {e.get('text')}" for e in (top.get("evidence") or [])[:5]
                if isinstance(e, dict)]
    fixes = [_fix_text(f) for f in (top.get("fix") or []) if isinstance(f, dict)]
    fix = "; ".join(x for x in fixes if x) or None
    if verdict.passed:
        verdict.notes.append(f"the probe passed, but {log.get('summary')} (an earlier failure in the same log?)")
        return verdict
    first = verdict.findings[0]
    if cls is None or first.cls not in _UNEXPLAINED or cls is ProbeClass.UNKNOWN:
        verdict.findings.append(Finding(cls or ProbeClass.UNKNOWN, log["summary"], evidence, fix))
        return verdict
    merged = Finding(
        cls,
        f"{first.summary}; {log['summary']}",
        evidence + first.evidence,
        fix or first.fix,
    )
    verdict.findings[0] = merged
    return verdict
