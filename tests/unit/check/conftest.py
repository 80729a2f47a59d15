"""Helpers for the check tests: run a check in-process, no network."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "launch"
TOPO = ROOT / "tests" / "fixtures" / "host" / "topo"


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    # catalog ids only: never reach the Hub from a unit test
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def check(command: str | None = None, *, path: str | Path | None = None, fix: bool = True, ignore=(), **options):
    from oomguard.check.context import CheckOptions
    from oomguard.check.report import check_target

    return check_target(CheckOptions(**options), path=str(path) if path else None, command=[command] if command else None, ignore=ignore, fix=fix)


def rules_of(report, severity: str | None = None) -> set[str]:
    return {f.rule for f in report.findings if severity is None or f.severity.value == severity}


def finding(report, rule_id: str):
    hits = [f for f in report.findings if f.rule == rule_id]
    assert hits, f"{rule_id} not reported; got {[f.rule for f in report.findings]}"
    return hits[0]
