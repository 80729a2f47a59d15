"""The registry's invariants, and docs/rules.md generated from it (fails when stale)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_docs_rules_md_is_up_to_date():
    from oomguard.check.docs import render_rules_md

    current = (ROOT / "docs" / "rules.md").read_text()
    assert current == render_rules_md(), "docs/rules.md is stale: run python scripts/gen_rules_doc.py"


def test_registry_invariants():
    from oomguard.check.registry import Family, all_rules
    from oomguard.model.failures import FailureClass

    rules = all_rules()
    assert len(rules) >= 30
    assert len({r.name for r in rules}) == len(rules)
    classes = {c.value for c in FailureClass}
    for r in rules:
        assert re.fullmatch(r"OG\d\d\d", r.id)
        assert r.family is Family(r.id[2])
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", r.name), r.name
        assert r.why.endswith(".") and r.fix_text.endswith(".") and r.title and not r.title.endswith(".")
        assert set(r.predicts) <= classes
        # rules live in the module of their family
        assert r.func.__module__.split(".")[-1] in {
            "0": "coverage", "1": "batching", "2": "kvcache", "3": "memory", "4": "host", "5": "length",
            "6": "flags", "7": "parallel", "8": "features", "9": "practice",
        }[r.id[2]]
    for fam in Family:
        assert any(r.family is fam for r in rules)


def test_every_error_rule_names_what_it_foretells():
    from oomguard.check.registry import all_rules

    for r in all_rules():
        if r.severity.value == "error" and r.id not in ("OG804", "OG805"):
            assert r.predicts, r.id
