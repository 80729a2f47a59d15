"""Whole-process time of ``oomguard plan --json`` on a bundled model (target: median < 0.3 s).

    python benchmarks/plan_time.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from benchlib import timed_run

ROOT = Path(__file__).resolve().parent.parent
CMD = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-model-len", "32768", "--json"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    exe = Path(sys.executable).with_name("oomguard")
    argv = [str(exe), *CMD] if exe.exists() else [sys.executable, "-m", "oomguard.cli.main", *CMD]
    times, cpu = [], []
    for _ in range(a.runs):
        r = timed_run(argv, cwd=ROOT, text=False, ok=None)
        times.append(r.seconds)
        cpu.append(r.cpu_seconds)
        if r.proc.returncode not in (0, 1):
            print(r.proc.stderr.decode(), file=sys.stderr)
            return 1
    print(f"oomguard {' '.join(CMD)}")
    print(f"runs {a.runs}: wall median {statistics.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s (target < 0.3 s)")
    print(f"CPU time (user+sys) median {statistics.median(cpu):.3f} s; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
