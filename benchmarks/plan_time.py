"""Whole-process time of ``oomguard plan --json`` on a bundled model (target: median < 0.3 s).

    python benchmarks/plan_time.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
        t0 = time.perf_counter()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(argv, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
        if proc.returncode not in (0, 1):
            print(proc.stderr.decode(), file=sys.stderr)
            return 1
    print(f"oomguard {' '.join(CMD)}")
    print(f"runs {a.runs}: wall median {statistics.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s (target < 0.3 s)")
    print(f"CPU time (user+sys) median {statistics.median(cpu):.3f} s; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
