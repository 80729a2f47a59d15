"""docs/host.md stays in step with the finding registry and the CLI options."""

from __future__ import annotations

import re
from pathlib import Path

from oomguard.host.findings import RULES

DOC = Path(__file__).resolve().parents[3] / "docs" / "host.md"


def test_every_finding_id_is_documented_with_its_name():
    text = DOC.read_text()
    rows = dict(re.findall(r"^\| (HOST\d{3}) \| ([a-z-]+) \|", text, flags=re.MULTILINE))
    assert rows == {rid: rule.name for rid, rule in RULES.items()}


def test_documented_options_exist():
    from oomguard.cli.main import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["host"].format_help()
    for option in ("--root", "--launch", "--topo", "--nvidia-smi", "--vllm-version", "--format"):
        assert option in help_text
        assert option in DOC.read_text()
