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

Usage: .venv/bin/python benchmarks/diagnose_accuracy.py [--log-only] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
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
    named = None
    if fix_flag:
        wanted = "--" + fix_flag.lstrip("-").replace("_", "-")
        named = bool(top) and wanted in [f.flag for f in top.fix[:2]]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-only", action="store_true", help="classify the excerpts without any context")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--records", action="append", type=Path, metavar="JSONL",
                        help="record file(s) to measure (default: failures.jsonl and failures_public.jsonl)")
    parser.add_argument("--healthy", action="append", type=Path, metavar="JSONL",
                        help="healthy start-up file(s) to measure for false alarms (default: every healthy source)")
    parser.add_argument("--summary", action="store_true", help="print only the summary lines, not each record")
    args = parser.parse_args()
    modes = [False] if args.log_only else [False, True]
    files = args.records or [RECORDS, PUBLIC_RECORDS]
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
