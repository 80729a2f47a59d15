"""The message catalog (src/oomguard/data/vllm_messages.json) measured: size, load time, per-line cost, recognition.

Prints

- the catalog's size (templates, by class, unclassed, releases, bytes on disk);
- its load time: ``catalog()`` in fresh interpreters (``--load-runs``, best and median, CPU seconds
  beside wall seconds: the machine is shared);
- the matcher's cost per candidate line (CPU microseconds, memo cleared) on the labelled corpus's
  candidate lines and on the candidate lines of ``benchmarks/diagnose_throughput.py``'s generated
  logs (``--throughput-mb`` MB of each kind, generated under /tmp and removed);
- how many corpus *anchor lines* (lines that carry a ``sig:`` cue, diagnose's own recognisers) the
  catalog recognises, by the record's labelled class, and whether the catalog's class agrees.

Usage: .venv/bin/python benchmarks/message_catalog.py [--load-runs 5] [--throughput-mb 20] [--no-anchors]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from oomguard.diagnose.lines import parse_line  # noqa: E402
from oomguard.diagnose.parsers import messages  # noqa: E402


def corpus() -> list[dict]:
    files = sorted((ROOT / "tests" / "data" / "diagnose" / "failures").glob("*.jsonl")) + sorted(
        (ROOT / "tests" / "data" / "calibration").glob("failures*.jsonl"))
    out = []
    for f in files:
        for raw in f.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                out.append(json.loads(raw))
    return out


def candidate_texts(text: str) -> list[str]:
    out = []
    for i, raw in enumerate(text.splitlines()):
        line = parse_line("x", i, raw)
        if messages.is_candidate(line):
            out.append(line.raw.strip())
    return out


def size_report() -> None:
    data = json.loads(messages.CATALOG_FILE.read_text(encoding="utf-8"))
    by_class = collections.Counter(m["c"] or "(unclassed)" for m in data["messages"])
    failing = [m for m in data["messages"] if m["x"] != "warning"]
    print(f"catalog: {len(data['messages'])} templates ({len(failing)} raised or logged as errors, "
          f"{len(data['messages']) - len(failing)} warnings), releases {', '.join(data['releases'])}, "
          f"{messages.CATALOG_FILE.stat().st_size / 1e6:.2f} MB")
    print("  by class: " + ", ".join(f"{c} {n}" for c, n in by_class.most_common()))
    print(f"  unclassed errors (no rule places them): {sum(1 for m in failing if m['c'] is None)}")


def load_report(runs: int) -> None:
    code = ("import time; from oomguard.diagnose.parsers import messages; "
            "t0 = time.perf_counter(); c0 = time.process_time(); c = messages.catalog(); "
            "print(time.perf_counter() - t0, time.process_time() - c0, len(c))")
    wall, cpu = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        wall.append(float(out[0]))
        cpu.append(float(out[1]))
    print(f"load (catalog(): read + index, after the imports, fresh process, {runs} runs): wall best {min(wall) * 1e3:.0f} ms, median "
          f"{statistics.median(wall) * 1e3:.0f} ms; CPU best {min(cpu) * 1e3:.0f} ms, median "
          f"{statistics.median(cpu) * 1e3:.0f} ms")


def per_line(texts: list[str], label: str) -> None:
    if not texts:
        print(f"per line ({label}): no candidate lines")
        return
    messages.catalog()
    messages.match_text.cache_clear()
    c0 = time.process_time()
    for t in texts:
        messages.match_text(t)
    cpu = time.process_time() - c0
    distinct = len(set(texts))
    print(f"per line ({label}): {len(texts)} candidate lines, {distinct} distinct, "
          f"{cpu / max(distinct, 1) * 1e6:.0f} us CPU per distinct line (memoised repeats cost nothing)")


def throughput_lines(size_mb: int) -> None:
    import diagnose_throughput as bench

    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("serving", "crash-loop", "distinct-errors"):
            path = bench.generate_log(kind, size_mb, Path(tmp))
            lines = 0
            texts = []
            with open(path, encoding="utf-8", errors="replace") as fh:
                for i, raw in enumerate(fh):
                    lines += 1
                    line = parse_line("x", i, raw)
                    if messages.is_candidate(line):
                        texts.append(line.raw.strip())
            buf = messages.LineBuffer.new()
            for i, t in enumerate(texts):
                buf.add(parse_line("x", i, t))
            kept = [t for _f, _n, t, _p in buf.lines()]
            print(f"{kind} {size_mb} MB: {lines} lines, {len(texts)} candidates (before the prefilter), "
                  f"{len(kept)} kept by the bounded buffer")
            per_line(kept, f"{kind}, the buffer's lines")


def anchors_report(records: list[dict]) -> None:
    from oomguard.diagnose import features
    from oomguard.diagnose.diagnosis import diagnose

    seen = collections.Counter()
    known = collections.Counter()
    agree = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for r in records:
            text = r.get("log_excerpt") or ""
            path = Path(tmp) / "r.log"
            path.write_text(text, encoding="utf-8")
            d = diagnose([str(path)])
            col, ctx = d.collector, d.context
            lines = text.splitlines()
            label = r.get("class") or r.get("failure_class")
            for cue in features.extract(col, ctx):
                if not (cue.anchor and cue.feature.startswith("sig:")) or cue.line < 1 or cue.line > len(lines):
                    continue
                seen[label] += 1
                m = messages.match_text(parse_line("x", cue.line, lines[cue.line - 1]).raw.strip())
                if m is not None and m.failure_class is not None:
                    known[label] += 1
                    agree[label] += m.failure_class == label
    total, hit, ok = sum(seen.values()), sum(known.values()), sum(agree.values())
    print(f"corpus anchor lines (sig: cues): {total}; the catalog recognises {hit} ({hit / max(total, 1):.0%}), "
          f"its class is the record's label on {ok}")
    for c, n in seen.most_common():
        print(f"  {c:24} {n:4} lines, recognised {known[c]:4}, class agrees {agree[c]:4}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load-runs", type=int, default=5)
    parser.add_argument("--throughput-mb", type=int, default=20)
    parser.add_argument("--no-anchors", action="store_true", help="skip the corpus anchor-line count (slowest)")
    args = parser.parse_args()
    size_report()
    load_report(args.load_runs)
    records = corpus()
    per_line([t for r in records for t in candidate_texts(r.get("log_excerpt") or "")], "labelled corpus")
    if args.throughput_mb:
        throughput_lines(args.throughput_mb)
    if not args.no_anchors:
        anchors_report(records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
