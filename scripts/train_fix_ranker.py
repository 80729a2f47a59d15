"""Fit diagnose's fix ranker (which candidate fix goes first) and measure it by leave-one-batch-out CV.

The fix part of the training (``scripts/train_diagnose.py`` fits the class weights; this reuses its corpus, its
features and its cross-validation). Every labelled record with a thread fix flag gets its hand-ordered candidate
fixes from a leave-one-batch-out fold (the class weights and fix votes fitted without its batch:
``diagnose.fixes_rank.hand_order``); the ranker (``oomguard.diagnose.fixes_rank``: a softmax over each record's
candidates, the thread's flag the right one) is then fitted on those lists. The figure that decides whether it ships
is a second leave-one-batch-out over the lists: for each batch, the ranker fitted on the other batches' lists
(their flag prior too) against the hand order on the held-out batch. The file is written only when that figure names
the thread's flag first more often than the hand order and among the first two no less often.

Build-time only (numpy: ``pip install -e '.[train]'``); the runtime reads the JSON with the standard library.

Usage:
  .venv/bin/python scripts/train_fix_ranker.py           # collect, cross-validate, fit, write data/diagnose_fix_ranker.json
  .venv/bin/python scripts/train_fix_ranker.py --check   # print the figures, write nothing
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from oomguard.diagnose import fixes_rank  # noqa: E402

# L2 strength, steps and rate of the softmax fit (lam 0.01 / 0.1 / 1 compared by the CV below on A01-C10: 0.01 best).
LAMBDA = 0.01
STEPS = 1500
RATE = 0.3


@dataclass
class Item:
    """One record (one mode) with its hand-ordered candidates."""
    id: str
    group: str
    with_context: bool
    flags: list[str]  # every fix of the top verdict, in the hand order
    rows: list[dict[str, float]]  # the first CANDIDATES fixes' features, "flag-prior" left out
    labels: list[bool]  # which of the first CANDIDATES fixes is the thread's flag
    wanted: frozenset[str]
    confidence: float = 0.0
    cues: frozenset[str] = frozenset()  # the report's cues (the cue lift reads them)
    stays_first: bool = False  # fixes_rank.stays_first of the first fix: the ranker leaves the order alone


def _module(name: str, path: Path) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def item_of(sample: Any, diagnosis: Any, wanted: frozenset[str], votes: dict | None) -> Item | None:
    """The candidates of a held-out sample's top verdict (None without a verdict or a thread flag); ``votes``: the
    fold's fix votes (the ones the verdict's fixes were ordered with)."""
    top = diagnosis.verdicts[0] if diagnosis.verdicts else None
    if top is None or not wanted:
        return None
    rows = fixes_rank.candidate_rows(top, diagnosis.collector, diagnosis.context, votes)
    flags = [f.flag for f in top.fix]
    return Item(sample.record["id"], sample.group, sample.with_context, flags, rows,
                [f in wanted for f in flags[:fixes_rank.CANDIDATES]], wanted, top.confidence,
                frozenset(diagnosis.collector.cues), fixes_rank.stays_first(top.fix[0]) if top.fix else False)


def with_prior(rows: list[dict[str, float]], flags: list[str], prior: dict[str, int],
               table: fixes_rank.CueTable | None = None, cues: frozenset[str] = frozenset()) -> list[dict[str, float]]:
    """The rows with the features fitted from the training records: the flag prior and the cue lift."""
    table = table or fixes_rank.CueTable()
    return [{**r, "flag-prior": math.log1p(prior.get(f, 0)), "cue-lift": table.lift(cues, f, prior.get(f, 0))}
            for r, f in zip(rows, flags)]


def flag_prior(items: list[Item]) -> dict[str, int]:
    """Records (not modes) whose thread fix is each flag."""
    seen: dict[str, frozenset[str]] = {it.id: it.wanted for it in items}
    out: Counter[str] = Counter()
    for wanted in seen.values():
        for flag in wanted:
            out[flag] += 1
    return dict(sorted(out.items()))


def table_of(items: list[Item]) -> fixes_rank.CueTable:
    """The cue table of the records (not modes; a record's cues as read with its context when it has both)."""
    seen: dict[str, Item] = {}
    for it in items:
        if it.id not in seen or it.with_context:
            seen[it.id] = it
    return fixes_rank.cue_table([(it.cues, it.wanted) for it in seen.values()])


def fit_lists(items: list[Item], prior: dict[str, int], table: fixes_rank.CueTable | None = None, *,
              lam: float = LAMBDA, steps: int = STEPS, rate: float = RATE) -> dict[str, float]:
    """Softmax weights over fixes_rank.FEATURES: the right candidate's probability among each record's list."""
    import numpy as np

    names = fixes_rank.FEATURES
    xs, ys, seg = [], [], []
    for it in items:
        if any(it.labels) and len(it.rows) >= 2:
            rows = with_prior(it.rows, it.flags, prior, table, it.cues)
            y = np.array(it.labels, float)
            xs += [[r.get(n, 0.0) for n in names] for r in rows]
            seg += [seg[-1] + 1 if seg else 0] * len(rows)  # which list each row belongs to (0, 1, ...)
            ys += list(y / y.sum())
    w = np.zeros(len(names))
    if not xs:
        return dict.fromkeys(names, 0.0)
    # all lists in one matrix, a list per segment: the softmax of each segment by reduceat (one pass per step)
    x, y, seg_ids = np.array(xs), np.array(ys), np.array(seg)
    starts = np.r_[0, np.flatnonzero(np.diff(seg_ids)) + 1]
    n_lists = len(starts)
    for _ in range(steps):
        s = x @ w
        e = np.exp(s - np.maximum.reduceat(s, starts)[seg_ids])
        p = e / np.add.reduceat(e, starts)[seg_ids]
        w = w - rate * (lam * w + x.T @ (p - y) / n_lists)
    return {n: round(float(v), 4) for n, v in zip(names, w)}


def ranked_flags(it: Item, ranker: fixes_rank.Ranker | None) -> list[str]:
    """The item's flags as diagnose orders them with ``ranker`` (the hand order with None)."""
    if ranker is None or len(it.flags) < 2 or it.stays_first:
        return it.flags
    best, _ = fixes_rank.best_of(ranker, with_prior(it.rows, it.flags, ranker.flag_prior, ranker.cues, it.cues))
    return [it.flags[best]] + [f for i, f in enumerate(it.flags) if i != best]


def lobo(items: list[Item], *, lift: bool = True, **fit_options: Any) -> dict[int, list[str]]:
    """Leave one batch out over the candidate lists: id(item) -> its flags as the ranker fitted without its batch
    orders them (``lift`` False: without the cue lift, to say what it adds)."""
    out: dict[int, list[str]] = {}
    for group in sorted({it.group for it in items}):
        rest = [it for it in items if it.group != group]
        prior, table = flag_prior(rest), table_of(rest) if lift else fixes_rank.CueTable()
        ranker = fixes_rank.Ranker(fit_lists(rest, prior, table, **fit_options), prior, cues=table)
        for it in items:
            if it.group == group:
                out[id(it)] = ranked_flags(it, ranker)
    return out


def figures(items: list[Item], order: Callable[[Item], list[str]]) -> tuple[int, int, int]:
    """(first fix names the thread's flag, first two do, records)."""
    first = sum(bool(order(it)) and order(it)[0] in it.wanted for it in items)
    two = sum(bool(it.wanted & set(order(it)[:2])) for it in items)
    return first, two, len(items)


def collect(log=print) -> tuple[list[Item], int]:  # noqa: ANN001
    """Every flagged record's hand-ordered candidates, from leave-one-batch-out folds of the class weights."""
    from oomguard.diagnose.diagnosis import conclude

    train = _module("train_diagnose", ROOT / "scripts" / "train_diagnose.py")
    bench = _module("diagnose_accuracy", ROOT / "benchmarks" / "diagnose_accuracy.py")
    priors = train.scoring.load(str(train.scoring.PRIORS_FILE))
    records = train.load_corpus(train.failure_files())
    log(f"featurising {len(records)} records (both modes) ...")
    samples = train.featurise(records, (False, True))
    d = train.design(priors, samples, text=train.LAMBDA_TEXT is not None)
    pd = train.phase_design(priors, d)
    full = train.fit_model(d, pd, samples)
    shipped = train.scoring.load()
    phase_t = shipped.phase.temperature if shipped.phase is not None else 1.0
    items: list[Item] = []

    def on_fold(held, model):  # noqa: ANN001, ANN202
        weights = train.weights_for_fold(d, model, shipped.temperature, phase_t, shipped.paraphrase_cap,
                                         shipped.generic_cap)
        for s in held:
            if not s.record.get("fix_flag"):
                continue
            with fixes_rank.hand_order():
                diagnosis = conclude(s.prepared, weights=weights)
            it = item_of(s, diagnosis, frozenset(bench.wanted_flags(s.record)), weights.fix_votes)
            if it is not None:
                items.append(it)

    train.cross_validate(d, samples, full=full, on_fold=on_fold, pd=pd, by="batch")
    return items, len(records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print the figures, write nothing")
    args = parser.parse_args()
    items, n_records = collect()
    ctx_items = [it for it in items if it.with_context]
    ranked = lobo(items)
    before = figures(ctx_items, lambda it: it.flags)
    after = figures(ctx_items, lambda it: ranked[id(it)])
    log_before = figures([it for it in items if not it.with_context], lambda it: it.flags)
    log_after = figures([it for it in items if not it.with_context], lambda it: ranked[id(it)])
    print(f"leave one batch out, with context (records with a verdict and a thread flag): first fix {before[0]} -> "
          f"{after[0]}, first two {before[1]} -> {after[1]} of {before[2]}")
    print(f"log only: first fix {log_before[0]} -> {log_after[0]}, first two {log_before[1]} -> {log_after[1]} "
          f"of {log_before[2]}")
    unlifted = lobo(items, lift=False)
    no_lift = figures(ctx_items, lambda it: unlifted[id(it)])
    print(f"without the cue lift, with context: first fix {no_lift[0]}, first two {no_lift[1]} of {no_lift[2]}")
    prior, table = flag_prior(items), table_of(items)
    weights = fit_lists(items, prior, table)
    print("weights: " + ", ".join(f"{k} {v:+.2f}" for k, v in weights.items()))
    ships = after[0] > before[0] and after[1] >= before[1]
    if not ships:
        print("the ranker does not beat the hand order under leave one batch out: not written")
    if args.check or not ships:
        return 0
    meta = {"records": n_records, "lists": len(items), "command": "scripts/train_fix_ranker.py",
            "lobo_with_context": {"first_fix": [before[0], after[0]], "first_two": [before[1], after[1]],
                                  "of": before[2]},
            "lobo_log_only": {"first_fix": [log_before[0], log_after[0]], "first_two": [log_before[1], log_after[1]],
                              "of": log_before[2]}}
    data = {"comment": "FITTED by scripts/train_fix_ranker.py (see oomguard/diagnose/fixes_rank.py); the meta holds "
            "the leave-one-batch-out figures [hand order, ranker] it was kept on",
            "meta": meta, "weights": weights, "flag_prior": prior,
            "cue_table": {"records": table.records, "cue_records": table.cue_records, "cue_flags": table.cue_flags}}
    fixes_rank.RANKER_FILE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {fixes_rank.RANKER_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
