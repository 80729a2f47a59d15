"""Named, sourced components: how every number explains itself.

A ``Term`` carries bytes, the formula with its values substituted, where the
rule comes from (a vLLM code path, a log, a spec) and, for estimates, the
range the true value is expected to fall in.
"""

from __future__ import annotations


from oomguard.records import NamedTuple, field, record


class Term(NamedTuple):
    """One named amount of memory, with how it was computed and its source."""
    name: str
    bytes: int
    formula: str
    source: str
    exact: bool = True
    low: int | None = None
    high: int | None = None
    # set by a calibration profile (model/calibration.py): where the offset came from, and the term before it
    calibration: str | None = None
    uncalibrated_bytes: int | None = None

    def to_dict(self) -> dict:
        from oomguard.units import GiB

        d = {
            "name": self.name,
            "gib": round(self.bytes / GiB, 3),
            "bytes": int(self.bytes),
            "formula": self.formula,
            "source": self.source,
            "estimate": not self.exact,
        }
        if self.calibration is not None:
            d["calibrated"] = self.calibration
            d["uncalibrated_gib"] = round((self.uncalibrated_bytes or 0) / GiB, 3)
        if not self.exact:
            d["range_gib"] = [round((self.low if self.low is not None else self.bytes) / GiB, 3), round((self.high if self.high is not None else self.bytes) / GiB, 3)]
        return d


@record
class Breakdown:
    """The terms of one figure, added up in order."""
    terms: list[Term] = field(default_factory=list)

    def add(self, term: Term) -> Term:
        self.terms.append(term)
        return term

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.terms)
