"""How a check rule is declared: its id, name, docs and function (``@rule``), grouped by family.

Declaring a rule does not register it anywhere: the ``@rule`` decorator attaches a
``Rule`` to the function (``func.rule``), and ``oomguard.check.registry`` collects the
rules of the family modules it lists. The import graph stays one-way: the families
import this module, the registry imports the families.

A rule function takes the ``CheckContext`` and yields ``Finding``s built with
``Rule.finding`` (which fills in the id, title and default severity). A rule may
report at a lower severity than its registered one when the numbers say the
problem is only fragile (for example, a token budget that fits today but leaves
little headroom); the registered severity is the worst it reports.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from oomguard.check.finding import Edit, Finding, Severity
from oomguard.check.needs import Needs
from oomguard.records import NamedTuple

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

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


class Rule(NamedTuple):
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
    """Declare the decorated function as rule ``id`` (the registry collects it from its module)."""
    fam = Family(id[2])

    def deco(func: Callable) -> Callable:
        func.rule = Rule(  # type: ignore[attr-defined]
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
        return func

    return deco
