"""One ranking: fit --from shows check's ranked goal-keeping edits in check's order (not only its #1),
and every one of them keeps the headroom floor (fit/goalfix.py: 2 % of the card, at least 0.5 GiB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[3]
S1 = ROOT / "tests" / "scenarios" / "s1"
ENV = {"HF_HUB_OFFLINE": "1"}


def _edits(edits: list[dict]) -> list:
    return [(e["dest"], e["value"]) for e in edits]


@pytest.mark.parametrize("extra", [(), ("--vllm-version", "0.11.0")])
def test_fit_lists_checks_goal_fixes_in_checks_order(extra):
    args = (str(S1 / "start_api.sh"), "--model", str(S1 / "model"), "--gpu", "A100-80GB", *extra, "--format", "json")
    check = json.loads(run_cli("check", *args, env=ENV).stdout)
    fit = json.loads(run_cli("fit", "--from", *args, env=ENV).stdout)
    ranked = [_edits(g["edits"]) for g in check["goal_fixes"]]
    assert len(ranked) >= 3
    shown = [_edits(c["summary"]["goal_fix"]["edits"]) for c in fit["candidates"] if c["summary"].get("goal_fix")]
    assert shown == ranked
    for g in check["goal_fixes"]:
        assert g["headroom_gib"] >= g["headroom_floor_gib"] >= 0.5
    for i, c in enumerate(fit["candidates"][: len(ranked)], 1):
        assert f"goal-keeping fix #{i}:" in " ".join(c["tradeoffs"])
