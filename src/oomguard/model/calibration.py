"""Offsets measured on a team's own start-up logs, applied to the ledger's terms (pure).

``oomguard calibrate`` compares the planner's terms with the ones vLLM logged on the
user's GPUs and writes, per group (GPU × release family × model family), the median
offset of each term (logged − predicted), its spread and the start-ups it came from
(``oomguard.calibrate.profile`` reads and writes that YAML). ``plan_launch`` takes the
result as a ``Calibration`` and adjusts a term only where

- the plan's own group is in the profile (never a neighbouring GPU or release), and
- that term's offset rests on at least ``min_records`` start-ups (``MIN_RECORDS``).

Every adjusted term keeps its uncalibrated bytes beside it and says where its offset came
from (``calibrated: −0.21 GiB from 37 start-ups on H100-SXM-80GB / 0.11-0.19 / dense``);
every term left alone, and why, is a message of the plan. Nothing here reads a file.

Terms: ``weights``, ``activation``, ``non_torch``, ``cuda_graph``. The KV pool, its tokens
and the concurrency follow from them (KV = requested − the terms), so they are not
offset themselves. Where a log prints the pool but not the activation peak (vLLM's INFO
lines since 0.10), the part of the pool's error the logged terms do not explain is the
activation offset of that start-up (``calibrate.offsets`` says so per record).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oomguard.model.estimate import Term
from oomguard.units import GiB

# A group's offset for one term is applied only when that many start-ups measured it: a
# median of one or two logs is an anecdote (one odd driver, one other process on the card).
MIN_RECORDS = 3
TERMS = ("weights", "activation", "non_torch", "cuda_graph")


@dataclass(frozen=True)
class GroupKey:
    """Which start-ups pool their offsets: the card, vLLM's accounting family, the architecture class."""

    gpu: str
    release: str
    model_family: str

    def label(self) -> str:
        return f"{self.gpu} / {self.release} / {self.model_family}"


@dataclass(frozen=True)
class TermOffset:
    """The measured offset of one term in one group (bytes; logged − predicted)."""

    term: str
    offset_bytes: int  # median over the records
    n: int
    low_bytes: int  # smallest offset seen
    high_bytes: int  # largest offset seen
    mad_bytes: int = 0  # median absolute deviation around the median
    records: tuple[str, ...] = ()  # where each record came from (file:line of its first ledger line)


@dataclass(frozen=True)
class Group:
    key: GroupKey
    startups: int
    offsets: dict = field(default_factory=dict)  # term -> TermOffset


@dataclass(frozen=True)
class Calibration:
    """A calibration profile as the planner uses it."""

    groups: tuple[Group, ...]
    source: str = ""  # the profile file, for the ledger's notes
    min_records: int = MIN_RECORDS

    def group(self, key: GroupKey) -> Group | None:
        for g in self.groups:
            if g.key == key:
                return g
        return None

    def lookup(self, key: GroupKey) -> tuple[dict, list[str]]:
        """(term -> TermOffset to apply, notes saying what is applied and what is refused, and why)."""
        where = f" ({self.source})" if self.source else ""
        g = self.group(key)
        if g is None:
            near = [x.key.label() for x in self.groups if x.key.gpu == key.gpu][:3]
            return {}, [f"calibration{where}: no group for {key.label()}" + (f" (the profile has {', '.join(near)})" if near else "")
                        + ": every term uncalibrated"]
        use: dict = {}
        refused: list[str] = []
        for term in TERMS:
            off = g.offsets.get(term)
            if off is None:
                continue
            if off.n < self.min_records:
                refused.append(f"{term} ({off.n} start-up{'s' if off.n != 1 else ''})")
            else:
                use[term] = off
        notes = []
        if use:
            notes.append(f"calibration{where}: group {key.label()} ({g.startups} start-ups) adjusts "
                         + ", ".join(f"{t} {o.offset_bytes / GiB:+.2f} GiB" for t, o in use.items())
                         + "; each adjusted term shows its uncalibrated figure")
        if refused:
            notes.append(f"calibration{where}: refused for {', '.join(refused)} in {key.label()}: fewer than the minimum "
                         f"{self.min_records} start-ups measured it, so the term stays uncalibrated")
        if not use and not refused:
            notes.append(f"calibration{where}: group {key.label()} measured no term: every term uncalibrated")
        return use, notes


def model_family(model) -> str:
    """The architecture class whose terms err alike: hybrid, mla, moe or dense (+ ``-vl`` with a vision tower)."""
    if getattr(model, "is_hybrid", False):
        base = "hybrid"
    elif getattr(model, "mla", None) is not None:
        base = "mla"
    elif getattr(model, "moe", None) is not None:
        base = "moe"
    else:
        base = "dense"
    return base + ("-vl" if getattr(model, "vision_params", 0) or getattr(model, "vision", None) else "")


def release_family(version: tuple[int, ...]) -> str:
    """The accounting family of a release (docs/versions.md): ``0.11-0.19``, ``0.28-`` ..."""
    from oomguard.versions.releases import family_of

    try:
        return family_of(".".join(str(x) for x in version[:3])).name
    except Exception:  # noqa: BLE001 - below 0.6: no family of ours
        return "<0.6"


def gpu_label(gpu) -> str:
    """The catalog name; an unnamed card (``--gpu-memory-gib`` only) is named by its size."""
    name = getattr(gpu, "name", "custom")
    if name == "custom":
        return f"{getattr(gpu, 'total_bytes', 0) / GiB:.2f} GiB GPU"
    return name


def group_key(gpu, version: tuple[int, ...], model) -> GroupKey:
    return GroupKey(gpu_label(gpu), release_family(version), model_family(model))


def adjust(term: Term, off: TermOffset, key: GroupKey) -> Term:
    """``term`` moved by the measured offset, with its uncalibrated bytes and the offset's origin."""
    before = int(term.bytes)
    after = max(0, before + off.offset_bytes)
    why = (f"calibrated: {_signed(off.offset_bytes)} GiB from {off.n} start-ups on {key.label()} "
           f"(offsets seen {_signed(off.low_bytes)} to {_signed(off.high_bytes)} GiB)")
    return term._replace(bytes=after,
        exact=False,
        # the measured offsets bound where the logged value fell around the prediction
        low=max(0, min(after, before + off.low_bytes)),
        high=max(after, before + off.high_bytes),
        calibration=why,
        uncalibrated_bytes=before,
    )


def _signed(b: int) -> str:
    x = b / GiB
    return f"{'−' if x < 0 else '+'}{abs(x):.2f}"


def apply_terms(use: dict, key: GroupKey, *, weights: Term, activation: Term, non_torch: Term, cuda_graph: Term) -> tuple[Term, Term, Term, Term]:
    """The four terms of one rank with the group's offsets applied (``use`` from ``Calibration.lookup``).

    A CUDA-graph offset measured with graphs on does not apply to a launch without graphs."""
    out = {"weights": weights, "activation": activation, "non_torch": non_torch, "cuda_graph": cuda_graph}
    for name, off in use.items():
        t = out[name]
        if name == "cuda_graph" and t.bytes == 0:
            continue
        out[name] = adjust(t, off, key)
    return out["weights"], out["activation"], out["non_torch"], out["cuda_graph"]
