"""Whole-process time of `oomguard host`: the median of N runs, printed.

Runs the CLI as a fresh Python process each time (interpreter start, imports,
reading /proc and /sys, checks, output), on this machine's real root and on a
committed fake root with a launch-free topology and GPU file.

    .venv/bin/python benchmarks/host_time.py [-n 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchlib import timed_run

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "host"

CASES = {
    "real root, json": ["host", "--format", "json"],
    "real root, text": ["host"],
    "fake 2-NUMA 4x4090 + topo + GPUs, json": [
        "host",
        "--root", str(FIX / "roots" / "two_numa_4x4090"),
        "--topo", str(FIX / "topo" / "rtx4090_4x_two_sockets.txt"),
        "--nvidia-smi", str(FIX / "gpus" / "rtx4090_4x_idle.csv"),
        "--format", "json",
    ],
}


def time_once(argv: list[str], env: dict[str, str]) -> float:
    return timed_run([sys.executable, "-m", "oomguard.cli.main", *argv], env=env, what=f"oomguard {' '.join(argv)}").seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="runs per case (default 20)")
    args = parser.parse_args()
    baseline = [0.0] * args.n
    for i in range(args.n):
        baseline[i] = timed_run([sys.executable, "-c", "pass"], ok=(0,)).seconds
    print(f"python -c pass (interpreter start): median {statistics.median(baseline) * 1000:.0f} ms")
    # An installed package has its bytecode compiled; keep ours in a temporary
    # prefix (not in the tree) so the figure matches, and also time without it.
    with tempfile.TemporaryDirectory() as cache:
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = cache
        uncached = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        for label, env in (("bytecode cached", cached), ("no bytecode cache", uncached)):
            for name, argv in CASES.items():
                time_once(argv, env)  # warm the page cache (and the bytecode cache)
                runs = sorted(time_once(argv, env) for _ in range(args.n))
                p90 = runs[max(0, int(round(0.9 * len(runs))) - 1)]
                print(
                    f"oomguard {name} [{label}]: median {statistics.median(runs) * 1000:.0f} ms, "
                    f"p90 {p90 * 1000:.0f} ms over {args.n} runs"
                )


if __name__ == "__main__":
    main()
