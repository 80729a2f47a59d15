"""The rule registry: every check is data (id, name, title, severity, docs) plus one function.

Rules register themselves with the ``@rule`` decorator in ``check/rules/<family>.py``;
ids are grouped by family (``OG1xx`` batching, ``OG2xx`` KV cache, ...).
``docs/rules.md`` and ``oomguard check --explain`` are generated from these
entries, so a rule's documentation lives next to its code.

A rule function takes the ``CheckContext`` and yields ``Finding``s built with
``Rule.finding`` (which fills in the id, title and default severity). A rule may
report at a lower severity than its registered one when the numbers say the
problem is only fragile (for example, a token budget that fits today but leaves
little headroom); the registered severity is the worst it reports.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oomguard.check.finding import Edit, Finding, Severity, sort_findings
from oomguard.check.needs import Needs  # noqa: F401  (re-exported: rules declare their needs with it)

if TYPE_CHECKING:
    from oomguard.check.context import CheckContext


class Family(str, enum.Enum):
    """Rule families; the value is the id's hundreds digit."""

    COVERAGE = "0"
    BATCHING = "1"
    KV_CACHE = "2"
    GPU_MEMORY = "3"
    HOST = "4"
    CONTEXT = "5"
    FLAGS = "6"
    PARALLEL = "7"
    FEATURES = "8"
    PRACTICE = "9"

    @property
    def title(self) -> str:
        return _FAMILY_TITLES[self]


_FAMILY_TITLES = {
    Family.COVERAGE: "What the check could not look at",
    Family.BATCHING: "Prefill token budget and activation peak",
    Family.KV_CACHE: "KV cache capacity",
    Family.GPU_MEMORY: "GPU memory budget (utilization, sharing, CUDA graphs, weights)",
    Family.HOST: "Host RAM and offloading",
    Family.CONTEXT: "Context length and RoPE scaling",
    Family.FLAGS: "Flag spelling and syntax for the chosen vLLM version",
    Family.PARALLEL: "Tensor / pipeline parallelism and topology",
    Family.FEATURES: "Model features: speculative decoding, hybrid, multimodal, quantization",
    Family.PRACTICE: "Operating practice",
}


@dataclass(frozen=True)
class Rule:
    id: str
    name: str  # kebab-case name of the problem
    title: str
    severity: Severity
    family: Family
    why: str  # one paragraph: why this brings servers down or wastes memory
    fix_text: str  # how the suggested fix is computed
    needs: frozenset
    func: Callable[[CheckContext], Iterable[Finding]]
    example: str = ""  # a launch fragment that triggers it
    use_instead: str = ""  # the corrected fragment
    predicts: tuple = ()  # FailureClass values an error of this rule foretells

    def finding(
        self,
        ctx: CheckContext,
        message: str,
        *,
        dests: Iterable[str] = (),
        flags: Iterable[str] = (),
        severity: Severity | None = None,
        fix: Iterable[Edit] = (),
        numbers: dict[str, Any] | None = None,
        location: tuple[str | None, int | None] | None = None,
    ) -> Finding:
        dests = list(dests)
        shown = [ctx.option_for(d) for d in dests] + [f for f in flags if f]
        seen: set[str] = set()
        shown = [f for f in shown if not (f in seen or seen.add(f))]
        file, line = location if location is not None else ctx.location_of(dests)
        sev = severity or self.severity
        if sev.rank < self.severity.rank:  # never report above the registered severity
            sev = self.severity
        return Finding(
            rule=self.id,
            severity=sev,
            title=self.title,
            message=message,
            flags=shown,
            file=file,
            line=line,
            fix=list(fix),
            numbers=dict(numbers or {}),
            name=self.name,
        )


_RULES: dict[str, Rule] = {}


def rule(
    id: str,
    name: str,
    *,
    title: str,
    severity: Severity,
    why: str,
    fix: str,
    needs: Iterable[Needs] = (Needs.PLAN,),
    example: str = "",
    use_instead: str = "",
    predicts: Iterable[str] = (),
) -> Callable:
    """Register the decorated function as rule ``id``."""
    fam = Family(id[2])

    def deco(func: Callable) -> Callable:
        if id in _RULES:
            raise ValueError(f"duplicate rule id {id}")
        if any(r.name == name for r in _RULES.values()):
            raise ValueError(f"duplicate rule name {name}")
        _RULES[id] = Rule(
            id=id,
            name=name,
            title=title,
            severity=severity,
            family=fam,
            why=" ".join(why.split()),
            fix_text=" ".join(fix.split()),
            needs=frozenset(needs),
            func=func,
            example=example.strip("\n"),
            use_instead=use_instead.strip("\n"),
            predicts=tuple(getattr(p, "value", p) for p in predicts),
        )
        func.rule = _RULES[id]  # type: ignore[attr-defined]
        return func

    return deco


def _load() -> None:
    import oomguard.check.rules  # noqa: F401  (registers every family)


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


@dataclass
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
    for r in all_rules():
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
