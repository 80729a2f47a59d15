"""Diagnose with scan workers against without, on large crash loops with failures planted at random offsets.

``diagnose/ahead.py`` runs a large log's survey in worker processes (by default from 3 CPUs and 64 MiB;
``OOMGUARD_SCAN_JOBS=N`` forces N). Its promise is the one-process report, byte for byte. Each case writes a crash
loop of start-ups that die in the profile run (~``--mib`` MiB, past the parallel floor), plants one to three other
failure logs from ``tests/fixtures/logs`` at random byte offsets (at a line start, or cutting a line), and runs
``oomguard diagnose FILE --format json`` (and text) in a fresh interpreter with ``OOMGUARD_SCAN_JOBS=2`` and
``=1``. Judged: the same exit code and stdout bytes, each run judged as the fuzz campaigns judge (no traceback,
no ``internal error``, exit in {0, 1, 2, 3}, at most 30 s and 1 GiB).

    python benchmarks/fuzz_scan_jobs.py [--cases 4] [--seed 0] [--mib 70]

Prints one row per case and the totals; exit status 1 on any mismatch or problem. The machine is shared: a
few cases only (each writes ~70 MB to a temporary folder and reads it four times).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from benchlib import ROOT, run_child

from tests.property import fuzzlib

FIXTURES = ROOT / "tests" / "fixtures" / "logs"
PLANTS = sorted(p for p in FIXTURES.glob("*.log") if "profile-oom" not in p.name)


def _unit(rng: random.Random) -> bytes:
    head = (FIXTURES / "healthy" / "v0.9.2-v1-profile.log").read_text().splitlines(keepends=True)[:12]
    tail = (FIXTURES / "v1-profile-oom.log").read_text().splitlines(keepends=True)[2:]
    pid = str(rng.randint(100, 99999))
    return "".join(head + tail).replace("pid=141", f"pid={pid}").encode()


def crash_loop(path: Path, size: int, rng: random.Random) -> list[str]:
    """A crash loop of about ``size`` bytes with 1-3 fixtures planted at random offsets; their names."""
    units = [_unit(rng) for _ in range(16)]
    out = bytearray()
    while len(out) < size:
        out += units[rng.randrange(len(units))]
    planted = []
    for _ in range(rng.randint(1, 3)):
        fixture = rng.choice(PLANTS)
        at = rng.randrange(len(out))
        if rng.random() < 0.7:  # at a line start; else cutting the line it lands in
            at = out.rfind(b"\n", 0, at) + 1
        out[at:at] = fixture.read_bytes()
        planted.append(f"{fixture.name}@{at}")
    path.write_bytes(bytes(out))
    return planted


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mib", type=int, default=70)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    totals = {"runs": 0, "mismatches": 0, "problems": 0}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "crashloop.log"
        for case in range(args.cases):
            planted = crash_loop(log, args.mib << 20, rng)
            fmt = "json" if case % 2 == 0 else "text"
            outs = {}
            for jobs in ("2", "1"):
                o = fuzzlib.judge(run_child(["diagnose", str(log), "--format", fmt],
                                            {**fuzzlib.OFFLINE_ENV, "OOMGUARD_SCAN_JOBS": jobs}))
                totals["runs"] += 1
                totals["problems"] += bool(o.problems)
                outs[jobs] = o
            same = outs["2"].code == outs["1"].code and outs["2"].out == outs["1"].out
            totals["mismatches"] += not same
            print(f"case {case} {fmt:<4} {log.stat().st_size >> 20} MiB planted {', '.join(planted)}: "
                  f"exit {outs['2'].code}/{outs['1'].code}, {outs['2'].seconds:.1f}s/{outs['1'].seconds:.1f}s, "
                  f"{'same' if same else 'MISMATCH'}"
                  + "".join(f"; jobs={j}: {'; '.join(o.problems)}" for j, o in outs.items() if o.problems), flush=True)
            if not same:
                (Path.cwd() / f"scan-jobs-mismatch-{case}.txt").write_text(
                    f"planted {planted}\n--- jobs=2\n{outs['2'].out}\n--- jobs=1\n{outs['1'].out}\n")
    print(f"TOTAL runs {totals['runs']}, mismatches {totals['mismatches']}, runs with problems {totals['problems']}")
    return 1 if totals["mismatches"] or totals["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
