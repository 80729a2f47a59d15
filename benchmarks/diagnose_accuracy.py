"""Accuracy of ``oomguard diagnose`` on the real failure records (tests/data/calibration/failures.jsonl).

For every record the log excerpt is written to a temporary file and classified,
once from the log alone and once with the context an operator would pass
(``--launch`` with the record's command when it is one, ``--model``, ``--gpu``,
``--vllm-version``). Prints expected class vs oomguard's top class per record,
accuracy overall and on ``cause_confidence_level == "high"``, and whether the
first fixes name the record's ``fix_flag``.

Also prints accuracy by expected class, and the false-alarm count on the healthy corpus
(tests/fixtures/logs/healthy/ and the public start-up excerpts of tests/data/calibration/startup.jsonl):
any failure verdict there is a false alarm; an "incomplete" (no ready line in an excerpt) is not.

With ``--cv`` (needs numpy: ``pip install -e '.[train]'``) it prints the figure that counts: the
cross-validated class accuracy (folds grouped by thread; --folds 0 leaves one thread out) over the whole corpus (no thread in both the
fit and the test; the weights are refitted for every held-out thread with scripts/train_diagnose.py),
the fix-flag rate, accuracy by class and by record file, the confusion matrix, a calibration table
(confidence against accuracy), and the healthy false-alarm count.

With ``--cv-by batch`` the folds are the batches (each tests on weights fitted, from the priors, on every other
batch and the older corpus, whose files count as their own groups): the figure that says whether a change
generalises to a fresh batch. ``--cv-by both`` prints both; each mode prints accuracy per batch, the confusion matrix,
the fix-flag rate (among the first two fixes, and first fix only) and the reliability table with its ECE.

Usage: .venv/bin/python benchmarks/diagnose_accuracy.py [--log-only] [--json] [--records F]... [--healthy F]... [--summary]
       [--cv] [--cv-by thread|batch|both] [--no-misses] [--planner]

With ``--planner``: how often a memory verdict's fixes are checked by the planner (the record's model and GPU known
and resolved offline), and whether the first fix starts by the planner's account.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from oomguard.diagnose.diagnosis import diagnose

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "tests" / "data" / "calibration" / "failures.jsonl"
# failures collected from public threads, labelled from each thread's conclusion (issue 11, second pass)
PUBLIC_RECORDS = ROOT / "tests" / "data" / "calibration" / "failures_public.jsonl"


@dataclass
class Result:
    id: str
    level: str
    expected: str
    got: str
    confidence: float
    fix_flag: str | None
    fix_named: bool | None
    others: list[str]

    @property
    def correct(self) -> bool:
        return self.expected == self.got


def load_records(path: Path = RECORDS) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def classify_record(record: dict, *, with_context: bool) -> Result:
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as fh:
        fh.write(record.get("log_excerpt") or "")
        path = fh.name
    try:
        kwargs = {}
        if with_context:
            kwargs = {
                "launch_text": record.get("command") or None,
                "model": record.get("model") or None,
                "gpu": record.get("gpu") or None,
                "vllm_version": record.get("version") if _looks_like_version(record.get("version")) else None,
            }
        d = diagnose([path], **kwargs)
    finally:
        os.unlink(path)
    top = d.verdicts[0] if d.verdicts else None
    fix_flag = record.get("fix_flag")
    named = _flag_named(record, top)
    return Result(
        id=record["id"],
        level=record.get("cause_confidence_level") or "?",
        expected=record["class"],
        got=top.cls.value if top else "(none)",
        confidence=round(top.confidence, 2) if top else 0.0,
        fix_flag=fix_flag,
        fix_named=named,
        others=[v.cls.value for v in d.verdicts[1:]],
    )


def _looks_like_version(text: str | None) -> bool:
    return bool(text) and text[0].isdigit()


def evaluate(*, with_context: bool = True, records: list[dict] | None = None) -> list[Result]:
    return [classify_record(r, with_context=with_context) for r in (records or load_records())]


def misses(results: list[Result]) -> list[tuple[str, str, str]]:
    return [(r.id, r.expected, r.got) for r in results if not r.correct]


def summary(results: list[Result]) -> dict:
    high = [r for r in results if r.level == "high"]
    flagged = [r for r in results if r.fix_flag]
    return {
        "records": len(results),
        "accuracy": sum(r.correct for r in results) / len(results) if results else 0.0,
        "high_records": len(high),
        "high_accuracy": sum(r.correct for r in high) / len(high) if high else 0.0,
        "fix_flag_records": len(flagged),
        "fix_flag_named": sum(bool(r.fix_named) for r in flagged),
    }


def by_class(results: list[Result]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for r in results:
        ok, n = out.get(r.expected, (0, 0))
        out[r.expected] = (ok + r.correct, n + 1)
    return dict(sorted(out.items()))


# New public batches (issue 16): one JSONL file per batch, failures and healthy start-ups apart.
BATCH_FAILURES = ROOT / "tests" / "data" / "diagnose" / "failures"
BATCH_HEALTHY = ROOT / "tests" / "data" / "diagnose" / "healthy"


def healthy_texts(paths: list[Path] | None = None) -> list[tuple[str, str]]:
    """(name, text) of every healthy start-up: the fixture logs, the successful start-up excerpts of
    startup.jsonl and the healthy batches; ``paths`` (JSONL with ``id`` and ``log_excerpt``) instead when given."""
    texts: list[tuple[str, str]] = []
    if paths:
        for path in paths:
            texts += [(r["id"], r.get("log_excerpt") or "") for r in load_records(path)]
        return texts
    for p in sorted((ROOT / "tests" / "fixtures" / "logs" / "healthy").iterdir()):
        texts.append((p.name, p.read_text(encoding="utf-8")))
    with open(ROOT / "tests" / "data" / "calibration" / "startup.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                if rec.get("startup_outcome") in (None, "success") and rec.get("raw_excerpt"):
                    texts.append((rec["id"], rec["raw_excerpt"]))
    for path in sorted(BATCH_HEALTHY.glob("*.jsonl")) if BATCH_HEALTHY.is_dir() else []:
        texts += [(r["id"], r.get("log_excerpt") or "") for r in load_records(path)]
    return texts


def healthy_false_alarms(paths: list[Path] | None = None) -> dict:
    texts = healthy_texts(paths)
    alarms, incomplete = [], 0
    for name, text in texts:
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as fh:
            fh.write(text)
            path = fh.name
        try:
            d = diagnose([path])
        finally:
            os.unlink(path)
        alarms += [(name, v.cls.value) for v in d.verdicts]
        incomplete += getattr(d, "incomplete", None) is not None
    return {"inputs": len(texts), "false_alarms": alarms, "incomplete": incomplete}


def _trainer():  # noqa: ANN202 - the module
    return _script("train_diagnose")


def _script(name: str):  # noqa: ANN202 - a module of scripts/
    import importlib.util
    import sys

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _same_flag(flag: str) -> set[str]:
    """The flag and the spellings vLLM renamed or replaced it with, either way (--disable-mm-preprocessor-cache and
    --mm-processor-cache-gb 0 are one fix: oomguard names the one the release has, or the newer when unknown)."""
    from oomguard.versions.renames import CHANGES, ChangeKind

    out = {flag}
    for c in CHANGES:
        if c.new and c.kind in (ChangeKind.RENAMED, ChangeKind.REPLACED, ChangeKind.INVERTED) and flag in (c.old, c.new):
            out |= {c.old, c.new}
    return out


def wanted_flags(record: dict) -> set[str]:
    """The spellings of the record's thread fix flag (empty when the record has none)."""
    fix_flag = record.get("fix_flag")
    return _same_flag("--" + fix_flag.lstrip("-").replace("_", "-")) if fix_flag else set()


def _flag_named(record: dict, verdict, first: int = 2) -> bool | None:  # noqa: ANN001
    """Whether the verdict's first ``first`` fixes name the record's fix_flag (None when the record has none)."""
    if not record.get("fix_flag"):
        return None
    return verdict is not None and bool(wanted_flags(record) & {f.flag for f in verdict.fix[:first]})


CV_MODES = {"thread": "cross-validation grouped by thread ({folds} folds; no thread in both the fit and the test)",
            "batch": "leave one batch out ({folds} folds: each batch, and each older calibration file, tested on "
                     "weights fitted on all the others from the priors; no thread in both)"}


def cross_validation(files: list[Path] | None, healthy: list[Path] | None, *, as_json: bool = False,
                     log_only: bool = False, folds: int | None = None, phase: bool = True,
                     by: tuple[str, ...] = ("thread",), show_misses: bool = True, ranker: bool = True) -> int:
    """Cross-validation of the scorer over the corpus, grouped by thread and/or leaving one batch out; prints (or
    returns as JSON) the figures of each. The features are computed once; each fold refits only the weights."""
    from oomguard.diagnose.diagnosis import conclude

    from oomguard.diagnose import fixes_rank

    train = _trainer()
    ranker_fit = _script("train_fix_ranker")
    folds = train.FOLDS if folds is None else folds
    files = files or train.failure_files()
    priors = train.scoring.load(str(train.scoring.PRIORS_FILE))
    records = train.load_corpus(files)
    samples = train.featurise(records, (False,) if log_only else (False, True))
    d = train.design(priors, samples)
    pd = train.phase_design(priors, d) if phase else None
    full = train.fit_model(d, pd, samples)
    shipped = train.scoring.load()
    phase_t = shipped.phase.temperature if shipped.phase is not None else 1.0
    report: dict = {"records": len(records), "threads": len({s.thread for s in samples}),
                    "files": [p.name for p in files], "cv": {}}
    for mode in by:
        results: dict[int, dict] = {}

        items: dict[int, object] = {}

        def on_fold(held, model):  # noqa: ANN001, ANN202
            weights = train.weights_for_fold(d, model, shipped.temperature, phase_t, shipped.paraphrase_cap,
                                           shipped.generic_cap)
            for s in held:
                # the hand order; the fix ranker is refitted per held-out batch below (the shipped one saw every batch)
                with fixes_rank.hand_order():
                    diagnosis = conclude(s.prepared, weights=weights)
                top = diagnosis.verdicts[0] if diagnosis.verdicts else None
                results[id(s)] = {"got": top.cls.value if top else "(none)",
                                  "confidence": top.confidence if top else 0.0,
                                  "fix_named": _flag_named(s.record, top), "fix_first": _flag_named(s.record, top, 1),
                                  "fixes": [f.flag for f in top.fix] if top else []}
                item = ranker_fit.item_of(s, diagnosis, frozenset(wanted_flags(s.record)), weights.fix_votes)
                if item is not None:
                    items[id(s)] = item

        train.cross_validate(d, samples, full=full, on_fold=on_fold, folds=folds, pd=pd, by=mode)
        if ranker:
            # the fix ranker, fitted for each batch on the other batches' candidate lists (scripts/train_fix_ranker.py)
            ranked = ranker_fit.lobo(list(items.values()))
            for key, item in items.items():
                flags = ranked[id(item)]
                wanted = item.wanted
                results[key].update(fixes=flags, fix_named=bool(wanted & set(flags[:2])),
                                    fix_first=bool(flags) and flags[0] in wanted)
        n_folds = len(train.batch_folds(samples) if mode == "batch" else train.thread_folds(samples, folds))
        out = {"folds": n_folds, "modes": {}}
        for with_context in ([False] if log_only else [False, True]):
            rows = [(s, results[id(s)]) for s in samples if s.with_context == with_context]
            out["modes"]["with context" if with_context else "log only"] = _cv_figures(rows)
        report["cv"][mode] = out
    report["healthy"] = healthy_false_alarms(healthy)
    if as_json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"{report['records']} records from {report['threads']} threads ({', '.join(report['files'])})")
    for mode, out in report["cv"].items():
        print("\n#### " + CV_MODES[mode].format(folds=out["folds"]))
        for name, fig in out["modes"].items():
            _print_figures(f"{mode}, {name}", fig, show_misses)
    h = report["healthy"]
    print(f"\nhealthy corpus (shipped weights): {h['inputs']} start-ups, {len(h['false_alarms'])} false alarms "
          f"{h['false_alarms'] or ''}, {h['incomplete']} excerpts without a ready line (incomplete)")
    return 0


def _print_figures(title: str, fig: dict, show_misses: bool) -> None:
    print(f"\n== {title} ==")
    print(f"class accuracy: {fig['accuracy']:.1%} ({fig['correct']}/{fig['records']}); high-confidence records: "
          f"{fig['high_accuracy']:.1%} of {fig['high_records']}; fix flag named (first two fixes): "
          f"{fig['fix_flag_named']}/{fig['fix_flag_records']} ({fig['fix_flag_rate']:.1%}), first fix: "
          f"{fig['fix_first_named']}/{fig['fix_flag_records']} ({fig['fix_first_rate']:.1%}); no verdict: "
          f"{fig['no_verdict']}")
    print("by class: " + ", ".join(f"{c} {ok}/{n}" for c, (ok, n) in fig["by_class"].items()))
    print("by batch: " + ", ".join(f"{g} {ok}/{n} ({ok / n:.0%})" for g, (ok, n) in fig["by_group"].items()))
    print(f"calibration: ECE {fig['ece']:.3f}; reliability (confidence bin: records, mean confidence, accuracy): "
          + ", ".join(f"{b} {n} {conf:.2f} {acc:.0%}" for b, (n, conf, acc) in fig["calibration"].items() if n))
    labels = fig["confusion_labels"]
    short = {c: c[:9] for c in labels}
    print("confusion (rows: expected, columns: oomguard):")
    print(" " * 22 + " ".join(f"{short[c]:>9}" for c in labels))
    for c in labels:
        row = fig["confusion"].get(c, {})
        if sum(row.values()):
            print(f"{c:<22}" + " ".join(f"{row.get(g, 0) or '.':>9}" for g in labels))
    if show_misses and fig["misses"]:
        print("misses: " + ", ".join(f"{i} {e}->{g}" for i, e, g in fig["misses"]))
    print("fix flag by class (first two, first fix, of records with a flag): "
          + ", ".join(f"{c} {a}/{b}/{n}" for c, (a, b, n) in fig["fix_by_class"].items()))
    print("fix flag by batch (first two, first fix, of records with a flag): "
          + ", ".join(f"{g} {a}/{b}/{n}" for g, (a, b, n) in fig["fix_by_group"].items()))
    print("fix misses by kind: " + ", ".join(f"{k} {n}" for k, n in fig["fix_miss_kinds"].items()))
    if show_misses and fig["fix_misses"]:
        print("fix misses (record: thread's flag | class -> oomguard's class | oomguard's first fixes):")
        for m in fig["fix_misses"]:
            print(f"  {m['id']}: {m['fix_flag']} | {m['class']} -> {m['got']} | {' '.join(m['offered']) or '(no fix)'}")


def _cv_figures(rows: list[tuple]) -> dict:
    correct = [s.record["class"] == r["got"] for s, r in rows]
    high = [ok for (s, _r), ok in zip(rows, correct) if s.record.get("cause_confidence_level") == "high"]
    flagged = [(r["fix_named"], r["fix_first"]) for s, r in rows if r["fix_named"] is not None]
    by_class: dict[str, list[int]] = {}
    by_file: dict[str, list[int]] = {}
    by_group: dict[str, list[int]] = {}
    labels: list[str] = []
    confusion: dict[str, dict[str, int]] = {}
    bins = {f"{lo / 10:.1f}-{(lo + 1) / 10:.1f}": [0, 0.0, 0] for lo in range(10)}
    misses = []
    fix_misses: list[dict] = []
    fix_by_class: dict[str, list[int]] = {}  # the record's class -> [first two name it, first names it, records]
    fix_by_group: dict[str, list[int]] = {}  # the record's batch (or file), the same three counts
    for (s, r), ok in zip(rows, correct):
        exp, got = s.record["class"], r["got"]
        for key, table in ((exp, by_class), (s.record.get("_file", "?"), by_file), (s.group, by_group)):
            cell = table.setdefault(key, [0, 0])
            cell[0] += ok
            cell[1] += 1
        for c in (exp, got):
            if c not in labels:
                labels.append(c)
        confusion.setdefault(exp, {})
        confusion[exp][got] = confusion[exp].get(got, 0) + 1
        if r["got"] != "(none)":
            b = min(9, int(r["confidence"] * 10))
            key = f"{b / 10:.1f}-{(b + 1) / 10:.1f}"
            bins[key][0] += 1
            bins[key][1] += r["confidence"]
            bins[key][2] += ok
        if not ok:
            misses.append((s.record["id"], exp, got))
        if r["fix_named"] is False:
            fix_misses.append(_fix_miss(s.record, r))
        if r["fix_named"] is not None:
            for key, table in ((exp, fix_by_class), (s.group, fix_by_group)):
                cell = table.setdefault(key, [0, 0, 0])
                cell[0] += bool(r["fix_named"])
                cell[1] += bool(r["fix_first"])
                cell[2] += 1
    order = [c.value for c in __import__("oomguard.model.failures", fromlist=["FailureClass"]).FailureClass]
    labels.sort(key=lambda c: order.index(c) if c in order else len(order))
    scored = sum(n for n, _c, _k in bins.values())
    # expected calibration error: the bins' |accuracy - mean confidence|, weighted by their share of the verdicts
    ece = sum(abs(k / n - c / n) * n for n, c, k in bins.values() if n) / scored if scored else 0.0
    return {
        "records": len(rows), "correct": sum(correct), "accuracy": sum(correct) / len(rows) if rows else 0.0,
        "high_records": len(high), "high_accuracy": sum(high) / len(high) if high else 0.0,
        "fix_flag_records": len(flagged), "fix_flag_named": sum(a for a, _b in flagged),
        "fix_flag_rate": sum(a for a, _b in flagged) / len(flagged) if flagged else 0.0,
        "fix_first_named": sum(b for _a, b in flagged),
        "fix_first_rate": sum(b for _a, b in flagged) / len(flagged) if flagged else 0.0,
        "no_verdict": sum(1 for _s, r in rows if r["got"] == "(none)"),
        "by_class": {k: tuple(v) for k, v in sorted(by_class.items())},
        "by_file": {k: tuple(v) for k, v in by_file.items()},
        "by_group": {k: tuple(v) for k, v in sorted(by_group.items())},
        "calibration": {k: (n, c / n if n else 0.0, ok / n if n else 0.0) for k, (n, c, ok) in bins.items()},
        "ece": ece,
        "confusion_labels": labels, "confusion": confusion, "misses": misses,
        "fix_misses": fix_misses, "fix_miss_kinds": _miss_kinds(fix_misses),
        "fix_by_class": {k: tuple(v) for k, v in sorted(fix_by_class.items())},
        "fix_by_group": {k: tuple(v) for k, v in sorted(fix_by_group.items())},
    }


# The kinds of fix misses (issue 16 item 4): whose they are decides where the fix is (the class or the fix choice).
FIX_MISS_KINDS = ("no verdict", "class wrong, flag not offered", "class wrong, flag offered 3rd or later",
                  "class right, flag offered 3rd or later", "class right, flag not offered")


def _fix_miss(record: dict, r: dict) -> dict:
    wanted = wanted_flags(record)
    offered = next((i for i, f in enumerate(r["fixes"]) if f in wanted), None)
    right = record["class"] == r["got"]
    if r["got"] == "(none)":
        kind = FIX_MISS_KINDS[0]
    elif not right:
        kind = FIX_MISS_KINDS[1] if offered is None else FIX_MISS_KINDS[2]
    else:
        kind = FIX_MISS_KINDS[4] if offered is None else FIX_MISS_KINDS[3]
    return {"id": record["id"], "class": record["class"], "got": r["got"], "fix_flag": record["fix_flag"],
            "offered": r["fixes"][:3], "kind": kind}


def _miss_kinds(fix_misses: list[dict]) -> dict[str, int]:
    return {k: sum(1 for m in fix_misses if m["kind"] == k) for k in FIX_MISS_KINDS}


MEMORY_CLASSES = ("weights-oom", "startup-free-memory", "profile-oom", "cudagraph-oom", "runtime-oom", "no-kv-memory",
                  "kv-too-small", "host-oom", "mamba-state-limit")


def planner_share(files: list[Path] | None = None, *, as_json: bool = False) -> int:
    """How often a memory verdict's fixes are checked by the planner (issue 16 item 4: "checked by the planner when
    the model and GPU are known"): each record with its context (--launch, --model, --gpu as the record names them),
    the shipped weights, the planner's check as the CLI runs it (planning.check_diagnosis)."""
    from oomguard.diagnose.planning import check_diagnosis

    train = _trainer()
    records = train.load_corpus(files or train.failure_files())
    counts = {"memory verdicts": 0, "record names model and GPU": 0, "planner checked": 0,
              "first flag fix starts": 0, "first flag fix fails": 0, "value moved by the planner": 0,
              "some fix starts": 0, "checked from the report alone": 0, "checked on a sized stand-in": 0}
    why_not: dict[str, int] = {}
    for record in records:
        options = train.context_options(record, True)
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as fh:
            fh.write(record.get("log_excerpt") or "")
            path = fh.name
        try:
            d = diagnose([path], **options)
        finally:
            os.unlink(path)
        if not d.verdicts or d.verdicts[0].cls.value not in MEMORY_CLASSES:
            continue
        v = d.verdicts[0]
        counts["memory verdicts"] += 1
        counts["record names model and GPU"] += bool(record.get("model") and record.get("gpu"))
        # the same excerpt with no --model / --gpu / --launch: what the report alone lets the planner resolve
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as fh:
            fh.write(record.get("log_excerpt") or "")
            path = fh.name
        try:
            alone = diagnose([path])
        finally:
            os.unlink(path)
        counts["checked from the report alone"] += check_diagnosis(alone)
        if not check_diagnosis(d, model=options.get("model"), gpu=options.get("gpu")):
            reason = next((f.checked for f in v.fix if f.checked), "no checkable fix") or ""
            key = re.sub(r"\b(model|GPU) (['\"]).*?\2 (not|is)", r"\1 X \3", reason).split(" (")[0]
            key = key.removeprefix("not checked: ")
            why_not[key] = why_not.get(key, 0) + 1
            continue
        counts["planner checked"] += 1
        counts["checked on a sized stand-in"] += bool((d.planner or {}).get("stand_in"))
        flags = [f for f in v.fix if f.flag.startswith("--") and f.checked]
        if flags:
            first = flags[0]
            counts["first flag fix starts" if first.checked.startswith("starts") else "first flag fix fails"] += 1
            counts["value moved by the planner"] += "lowered from" in first.why or "raised from" in first.why
            counts["some fix starts"] += any(f.checked.startswith("starts") for f in flags)
    report = {"records": len(records), "counts": counts, "not checked because": why_not}
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    n = counts["memory verdicts"]
    print(f"{len(records)} records; {n} memory verdicts (with context); "
          + "; ".join(f"{k}: {v} ({v / n:.0%})" if n else f"{k}: {v}" for k, v in list(counts.items())[1:]))
    print("not checked because: " + ", ".join(f"{k} {v}" for k, v in sorted(why_not.items(), key=lambda kv: -kv[1])))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-only", action="store_true", help="classify the excerpts without any context")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--records", action="append", type=Path, metavar="JSONL",
                        help="record file(s) to measure (default: failures.jsonl and failures_public.jsonl)")
    parser.add_argument("--healthy", action="append", type=Path, metavar="JSONL",
                        help="healthy start-up file(s) to measure for false alarms (default: every healthy source)")
    parser.add_argument("--summary", action="store_true", help="print only the summary lines, not each record")
    parser.add_argument("--cv", action="store_true", help="leave-one-thread-out cross-validation over the corpus "
                        "(--records files, default every failure file), with the confusion matrix")
    parser.add_argument("--folds", type=int, default=None, metavar="N", help="with --cv: folds grouped by thread "
                        "(default 20; 0 = leave one thread out)")
    parser.add_argument("--cv-by", choices=("thread", "batch", "both"), default=None,
                        help="with --cv (implied): group the folds by thread (default) or leave one batch out, or both")
    parser.add_argument("--no-misses", action="store_true", help="with --cv: do not list the misses")
    parser.add_argument("--no-phase-model", action="store_true", help="with --cv: score a GPU OOM's phase with the "
                        "main model only (to compare)")
    parser.add_argument("--hand-order", action="store_true", help="with --cv: the fixes in the hand order, without "
                        "the fix ranker (the before figure of scripts/train_fix_ranker.py)")
    parser.add_argument("--planner", action="store_true", help="how often the planner checks a memory verdict's fixes "
                        "(the record's model and GPU as context) and what it says of the first one")
    args = parser.parse_args()
    if args.planner:
        return planner_share(args.records, as_json=args.json)
    if args.cv or args.cv_by:
        by = ("thread", "batch") if args.cv_by == "both" else (args.cv_by or "thread",)
        return cross_validation(args.records, args.healthy, as_json=args.json, log_only=args.log_only, folds=args.folds,
                                phase=not args.no_phase_model, by=by, show_misses=not args.no_misses,
                                ranker=not args.hand_order)
    modes = [False] if args.log_only else [False, True]
    files = args.records or [RECORDS, PUBLIC_RECORDS] + sorted(BATCH_FAILURES.glob("*.jsonl"))
    report = {}
    for path, with_context in [(f, m) for f in files for m in modes]:
        results = evaluate(with_context=with_context, records=load_records(path))
        name = f"{path.name}, " + ("with context" if with_context else "log only")
        report[name] = {"summary": summary(results), "results": [asdict(r) | {"correct": r.correct} for r in results]}
        if args.json:
            continue
        print(f"== {name} ==")
        print(f"{'id':<6} {'level':<7} {'expected':<22} {'oomguard':<22} conf  fix_flag")
        for r in [] if args.summary else results:
            mark = "ok " if r.correct else "XX "
            flag = "" if not r.fix_flag else f"{r.fix_flag}: {'named' if r.fix_named else 'NOT named'}"
            print(f"{mark}{r.id:<4} {r.level:<7} {r.expected:<22} {r.got:<22} {r.confidence:.2f}  {flag}")
        s = summary(results)
        print(f"accuracy: {s['accuracy']:.1%} of {s['records']} records; high confidence: "
              f"{s['high_accuracy']:.1%} of {s['high_records']}; fix names fix_flag: "
              f"{s['fix_flag_named']}/{s['fix_flag_records']}")
        print("by class: " + ", ".join(f"{cls} {ok}/{n}" for cls, (ok, n) in by_class(results).items()))
        print()
    healthy = healthy_false_alarms(args.healthy)
    report["healthy"] = healthy
    if not args.json:
        print(f"healthy corpus: {healthy['inputs']} start-ups, {len(healthy['false_alarms'])} false alarms "
              f"{healthy['false_alarms'] or ''}, {healthy['incomplete']} excerpts without a ready line (incomplete)")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
