"""The rule registry: the rules of the family modules listed here, by id.

Rules are declared with ``oomguard.check.rule.rule`` in ``check/rules/<family>.py``;
ids are grouped by family (``OG1xx`` batching, ``OG2xx`` KV cache, ...). The
registry imports the families named in ``FAMILY_MODULES`` (an explicit list: a new
family module is added here) and nothing imports the registry back, so the import
graph is one-way. ``docs/rules.md`` and ``oomguard check --explain`` are generated
from these entries, so a rule's documentation lives next to its code.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from oomguard.check.finding import Finding, sort_findings
from oomguard.check.rule import Family, Rule, rule  # noqa: F401  (re-exported for callers of the registry)
from oomguard.records import record

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from oomguard.check.context import CheckContext

# One module per family (see oomguard.check.rules); each module's @rule functions are its rules.
FAMILY_MODULES = (
    "coverage",
    "batching",
    "kvcache",
    "memory",
    "host",
    "length",
    "flags",
    "parallel",
    "features",
    "practice",
)

_RULES: dict[str, Rule] = {}


def _load() -> None:
    if _RULES:
        return
    found: dict[str, Rule] = {}
    for name in FAMILY_MODULES:
        module = importlib.import_module(f"oomguard.check.rules.{name}")
        for value in vars(module).values():
            r = getattr(value, "rule", None)
            if not isinstance(r, Rule) or r.func is not value or value.__module__ != module.__name__:
                continue
            if r.id in found:
                raise ValueError(f"duplicate rule id {r.id}")
            if any(x.name == r.name for x in found.values()):
                raise ValueError(f"duplicate rule name {r.name}")
            found[r.id] = r
    _RULES.update(found)


def all_rules() -> list[Rule]:
    _load()
    return [_RULES[k] for k in sorted(_RULES)]


def get_rule(rule_id: str) -> Rule | None:
    _load()
    key = rule_id.strip().upper()
    if key in _RULES:
        return _RULES[key]
    for r in _RULES.values():
        if r.name == rule_id.strip().lower():
            return r
    return None


@record
class RunResult:
    findings: list[Finding]
    skipped: dict[str, str]  # rule id -> why it did not run
    ignored: list[Finding]  # findings silenced by --ignore or an inline directive


def run_rules(ctx: CheckContext, ignore: Iterable[str] = ()) -> RunResult:
    """Run every rule whose needs are met; drop findings the user silenced."""
    ignore_ids = {i.strip().upper() for i in ignore if i.strip()}
    findings: list[Finding] = []
    ignored: list[Finding] = []
    skipped: dict[str, str] = {}
    rules = all_rules()
    ctx.rules = rules  # the coverage family reports on the others
    for r in rules:
        missing = ctx.missing(r.needs)
        if missing:
            skipped[r.id] = missing
            continue
        for f in r.func(ctx) or ():
            if f.rule in ignore_ids or r.name.upper() in ignore_ids or ctx.inline_ignored(f):
                ignored.append(f)
            else:
                findings.append(f)
    return RunResult(sort_findings(findings), skipped, ignored)
