"""Which fix goes first: a small learned ranker over the hand-ordered candidates.

The builders, the fix votes, the families and the runner-up merge (``fixes.attach_fixes``) give each verdict an
ordered list of fixes. The first one is what a user runs, so it is chosen once more: every one of the first
``CANDIDATES`` fixes gets a score ``sum of weight[feature] * value`` over the named features below (its place in the
hand order, whether the report suggests it, whether the launch sets it, the labelled threads' votes for it, its
provenance, whether it is a diagnostic step, how much more often labelled reports with this report's cues were fixed
with it than reports in general, whether the reporter's own words (not a vLLM message) suggest it...), and the best
one moves to the front; the others keep their order.

The weights are data (``src/oomguard/data/diagnose_fix_ranker.json``), FITTED by ``scripts/train_fix_ranker.py``: a
softmax over each labelled record's candidates (the thread's own fix flag is the right one), fitted on the
candidates that leave-one-batch-out cross-validation gives every record (the class weights never saw its batch), and
kept only because the same fit, repeated per held-out batch, names the thread's flag first more often than the hand
order (the file's ``meta`` holds both figures and the command). With no file, the hand order stands.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from oomguard.diagnose.events import Fix, FixValue, Verdict
from oomguard.records import field, record

RANKER_FILE = Path(__file__).resolve().parents[1] / "data" / "diagnose_fix_ranker.json"
# Only the first fixes compete for the front (the later ones are the builders' last resorts).
CANDIDATES = 8

# Provenance phrases of Fix.chosen, written by fixes.py / fixes_blend.py and read back here (one place each).
FACT_FIRST = "the class's first fix for the facts this report shows"
FAMILY = "the standard fix of the configuration family the error lines name"
NAMED = "the error names this setting"
BLENDED = "merged with the runner-up classes"
# Fixes that only pad a short list (a setting the report or the launch names, when the class proposes no more): the
# last resorts by construction, never moved to the front by the ranker.
PADDING = "the class proposes no more fixes"
# Steps that make the next log say more (not a change that fixes anything by itself).
DIAGNOSTIC_STEPS = frozenset({"NCCL_DEBUG", "VLLM_LOGGING_LEVEL", "CUDA_LAUNCH_BLOCKING"})

FEATURES: tuple[str, ...] = (
    "place:1st", "place:2nd", "place:3rd", "place:later", "report-suggests", "launch-sets", "votes", "fact-first",
    "family", "error-names", "runner-up-merge", "diagnostic", "placeholder-value", "confidence-if-1st", "flag-prior",
    "cue-lift", "words-suggest")
# A report cue counts towards a flag's cue lift only when this many labelled records carried it (fewer say nothing).
CUE_MIN_RECORDS = 3
# Cue kinds that never count towards the lift: the model / GPU named in words, the flags the report itself suggests
# (its own feature), the component that printed the line (says where, not what to change).
_NO_LIFT = ("mention:", "suggest:", "comp:")
# How each feature reads in --explain (only the ones that count for the fix moved to the front).
_SAY = {"report-suggests": "the report suggests it", "launch-sets": "the launch sets it",
        "votes": "labelled threads of the class fixed it so", "fact-first": "the class's first fix for these facts",
        "family": "a configuration family's standard fix", "error-names": "the error names it",
        "flag-prior": "a common thread fix", "cue-lift": "labelled reports with this report's cues were fixed so",
        "words-suggest": "the reporter's own words suggest it"}


@record(frozen=True)
class CueTable:
    """Which thread fixes the labelled records carrying each report cue had (FITTED: counts over the corpus)."""
    records: int = 0  # labelled records with a thread fix flag
    cue_records: dict[str, int] = field(default_factory=dict)  # cue -> records carrying it
    cue_flags: dict[str, dict[str, int]] = field(default_factory=dict)  # cue -> flag -> records whose fix it was

    def lift(self, cues: Any, flag: str, flag_records: int) -> float:
        """The largest log lift of ``flag`` given one of ``cues``: log P(flag | cue) - log P(flag), add-one smoothed,
        over the cues at least CUE_MIN_RECORDS labelled records carried; 0 when none did."""
        if not self.records:
            return 0.0
        base = math.log((flag_records + 1) / (self.records + 2))
        best = 0.0
        for cue in cues:
            n = self.cue_records.get(cue, 0)
            if n < CUE_MIN_RECORDS or cue.startswith(_NO_LIFT):
                continue
            best = max(best, math.log((self.cue_flags.get(cue, {}).get(flag, 0) + 1) / (n + 2)) - base)
        return best


def cue_table(records: list[tuple[frozenset[str], frozenset[str]]]) -> CueTable:
    """The table from (the report's cues, the thread's fix flags) of each labelled record."""
    cue_records: dict[str, int] = {}
    cue_flags: dict[str, dict[str, int]] = {}
    for cues, wanted in records:
        for cue in cues:
            if cue.startswith(_NO_LIFT):
                continue
            cue_records[cue] = cue_records.get(cue, 0) + 1
            row = cue_flags.setdefault(cue, {})
            for flag in wanted:
                row[flag] = row.get(flag, 0) + 1
    return CueTable(len(records), dict(sorted(cue_records.items())),
                    {c: dict(sorted(r.items())) for c, r in sorted(cue_flags.items())})


@record(frozen=True)
class Ranker:
    weights: dict[str, float]
    flag_prior: dict[str, int] = field(default_factory=dict)  # flag -> labelled records whose thread fix it was
    meta: dict[str, Any] = field(default_factory=dict)
    cues: CueTable = field(default_factory=CueTable)

    def score(self, row: dict[str, float]) -> float:
        return sum(self.weights.get(name, 0.0) * value for name, value in row.items())


def suggested_flags(col: Any) -> set[str]:
    """The flags the report itself suggests changing (parsers/cues.py's ``suggest:`` cues: "set --max-num-seqs=256",
    vLLM's own "Try increasing `gpu_memory_utilization`", "decreasing swap_space helps")."""
    from oomguard.diagnose.parsers.cues import SUGGESTION_PREFIX

    return {"--" + f.removeprefix(SUGGESTION_PREFIX) for f in col.cues if f.startswith(SUGGESTION_PREFIX)}


def suggested_in_words(col: Any) -> set[str]:
    """The suggested flags (``suggested_flags``) whose line is not one of vLLM's own messages: vLLM's "Try increasing
    `gpu_memory_utilization`" is printed with every such error, where a reporter's "if I add
    --disable-custom-all-reduce it starts" is what this thread tried (parsers/messages.py's catalog decides)."""
    from oomguard.diagnose.parsers.cues import SUGGESTION_PREFIX
    from oomguard.diagnose.parsers.messages import match_text

    out = set()
    for feature, hit in col.cues.items():
        if feature.startswith(SUGGESTION_PREFIX):
            text = getattr(hit, "text", "") or ""
            if not text or match_text(text) is None:
                out.add("--" + feature.removeprefix(SUGGESTION_PREFIX))
    return out


def _launch_flags(ctx: Any) -> set[str]:
    return {"--" + f.lstrip("-").replace("_", "-") for f in ctx.launch_flags}


def candidate_rows(v: Verdict, col: Any, ctx: Any, votes: dict[str, dict[str, int]] | None,
                   flag_prior: dict[str, int] | None = None, cues: CueTable | None = None) -> list[dict[str, float]]:
    """The features of each of the verdict's first CANDIDATES fixes, in their (hand) order. ``flag_prior`` None
    leaves "flag-prior" and "cue-lift" out (the fit adds them per fold, from the records it is fitted on)."""
    said, launch = suggested_flags(col), _launch_flags(ctx)
    words = suggested_in_words(col) if said else set()
    class_votes = (votes or {}).get(v.cls.value) or {}
    rows = []
    for i, f in enumerate(v.fix[:CANDIDATES]):
        chosen = f.chosen or ""
        placeholder = isinstance(f.value, FixValue) or isinstance(f.value, str) and f.value.startswith("<")
        row = {"place:1st": float(i == 0), "place:2nd": float(i == 1), "place:3rd": float(i == 2),
               "place:later": float(i >= 3), "report-suggests": float(f.flag in said),
               "launch-sets": float(f.flag in launch), "votes": math.log1p(class_votes.get(f.flag, 0)),
               "fact-first": float(FACT_FIRST in chosen), "family": float(FAMILY in chosen),
               "error-names": float(NAMED in chosen), "runner-up-merge": float(BLENDED in chosen),
               "diagnostic": float(f.flag in DIAGNOSTIC_STEPS or not f.flag.startswith("--")),
               "placeholder-value": float(placeholder), "confidence-if-1st": float(i == 0) * float(v.confidence),
               "words-suggest": float(f.flag in words)}
        if PADDING in chosen:
            row["_padding"] = 1.0  # not a feature (no weight): best_of leaves it where it is
        if flag_prior is not None:
            row["flag-prior"] = math.log1p(flag_prior.get(f.flag, 0))
            row["cue-lift"] = (cues or CueTable()).lift(col.cues, f.flag, flag_prior.get(f.flag, 0))
        rows.append(row)
    return rows


def stays_first(fix: Fix) -> bool:
    """Whether the hand order's first fix stays first whatever the ranker scores:
    - a fix that is not a flag (docker's --ipc=host, a pip install, NCCL_P2P_DISABLE) and not a diagnostic step: the
      ranker is fitted only on records whose thread fix was a flag, so it learns to prefer flags and cannot weigh the
      other kinds at all;
    - the setting the error line itself names first ("max_num_batched_tokens (8192) is smaller than max_model_len"):
      the report's own words about this failure, where the ranker's corpus-wide features (the flag prior, the cue
      lift) would prefer the commoner flag. Measured on the candidate lists of A01-C16 (leave one batch out, with
      context): first fix 229 -> 232 of 336 with both rules."""
    return not fix.flag.startswith("--") and fix.flag not in DIAGNOSTIC_STEPS or NAMED in (fix.chosen or "")


def best_of(ranker: Ranker, rows: list[dict[str, float]]) -> tuple[int, list[float]]:
    """The candidate the ranker puts first (the earliest of equal scores) and every candidate's score."""
    scores = [ranker.score(r) for r in rows]
    movable = [i for i in range(len(scores)) if i == 0 or not rows[i].get("_padding")]
    best = max(movable, key=lambda i: (scores[i], -i)) if scores else 0
    return best, scores


def rank_first(v: Verdict, col: Any, ctx: Any, votes: dict[str, dict[str, int]] | None,
               ranker: Ranker | None = None) -> list[Fix]:
    """The verdict's fixes with the ranker's best candidate first (the others in their order); each moved fix says
    why in ``Fix.chosen``. Unchanged without a shipped ranker or with fewer than two fixes."""
    ranker = ranker if ranker is not None else shipped()
    if ranker is None or len(v.fix) < 2 or stays_first(v.fix[0]):
        return v.fix
    rows = candidate_rows(v, col, ctx, votes, ranker.flag_prior, ranker.cues)
    best, scores = best_of(ranker, rows)
    if best == 0:
        return v.fix
    pick, old = v.fix[best], v.fix[0]
    terms = sorted(((ranker.weights.get(k, 0.0) * x, k) for k, x in rows[best].items() if k in _SAY and x),
                   reverse=True)
    reasons = ", ".join(_SAY[k] for w, k in terms if w > 0) or "its place"
    pick.chosen = (f"first by the fix ranker (score {scores[best]:.2f} against {scores[0]:.2f} for {old.flag}; "
                   f"counts: {reasons}; FITTED weights, data/diagnose_fix_ranker.json)"
                   + (f"; before: {pick.chosen}" if pick.chosen else ""))
    old.chosen = f"{old.chosen + '; ' if old.chosen else ''}second: the fix ranker put {pick.flag} first"
    return [pick] + [f for f in v.fix if f is not pick]


@lru_cache(maxsize=2)
def load(path: str | None = None) -> Ranker | None:
    target = Path(path) if path else RANKER_FILE
    if not target.exists():
        return None
    with open(target, encoding="utf-8") as fh:
        data = json.load(fh)
    table = data.get("cue_table", {})
    cues = CueTable(int(table.get("records", 0)), {str(c): int(n) for c, n in table.get("cue_records", {}).items()},
                    {str(c): {str(f): int(n) for f, n in row.items()} for c, row in table.get("cue_flags", {}).items()})
    return Ranker({str(k): float(w) for k, w in data.get("weights", {}).items()},
                  {str(k): int(n) for k, n in data.get("flag_prior", {}).items()}, dict(data.get("meta", {})), cues)


_OFF: list[bool] = []


def shipped() -> Ranker | None:
    """The shipped ranker; None while a build tool measures the hand order (``hand_order``)."""
    return None if _OFF else load()


class hand_order:  # noqa: N801 - used as a context manager, like contextlib's
    """Within it, fixes keep the hand order (the fit and the benchmark read the candidates before ranking)."""

    def __enter__(self) -> None:
        _OFF.append(True)

    def __exit__(self, *exc: object) -> None:
        _OFF.pop()
