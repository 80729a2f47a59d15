"""Read what a dead vLLM server left behind and say which failure it was, why, and what to change.

Pipeline: ``readers`` (kind detection) -> ``scanner`` (one keyword pass, see ``prefilter``; repeated
stretches counted) -> ``lines`` (prefix stripping)
-> ``parsers`` (facts and signals on a ``facts.Collector``) -> ``classifier`` (verdicts) ->
``fixes`` (summaries, numbers, flag edits) -> ``planning`` (optional predicted effects) ->
``render`` / ``bundle``. Entry point: ``diagnose(paths, ...)`` returning a ``Diagnosis``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Diagnosis", "FailureClass", "diagnose", "diagnose_paths"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the package must not pull in the parsers (CLI start-up time).
    if name in ("diagnose", "diagnose_paths", "Diagnosis"):
        from oomguard.diagnose import diagnosis

        return getattr(diagnosis, name)
    if name == "FailureClass":
        from oomguard.diagnose.classes import FailureClass

        return FailureClass
    raise AttributeError(name)
