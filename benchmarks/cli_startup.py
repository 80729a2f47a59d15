"""Start-up cost of the CLI: plan --json, check, diagnose and fit beside a bare `python -c pass`.

Each command runs as a fresh process of the same interpreter (through the installed ``oomguard``
console script, as a user runs it; ``python -m oomguard.cli.main`` where there is none), N times; the median wall time and
the median CPU time (user + system, from the kernel's child accounting) are printed with their
ratio to `python -c pass`. CPU time is the steadier figure on a shared machine (wall time includes
waiting for a core); the issue's target is plan --json within 5x python -c pass.

Bytecode is cached in a temporary prefix (an installed package has its .pyc files; this tree's
environment sets PYTHONDONTWRITEBYTECODE), so the figures are those of an installed oomguard.

    .venv/bin/python benchmarks/cli_startup.py [-n 15] [--imports] [--src DIR]

Inputs are the repository's fixtures: a catalog model and GPU (plan, fit), scenario S1's launch
script and model directory (plan, check), a clean start-up log and a failing one (KV cache too
small for max_model_len) for diagnose.

Best (the least disturbed run) and median of N, and the load average before and after, are
printed: on a shared machine the ratio of the best runs is the figure to compare. ``--src DIR``
(repeatable) also measures another checkout's ``src`` (``git archive REV src | tar -x -C DIR``) with
the same interpreter, interleaved with this tree run for run, for a before/after under one load.

``--imports`` also prints the slowest imports of ``plan --json`` (python -X importtime, cumulative).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import timed_run

REPO = Path(__file__).resolve().parents[1]
LOG = REPO / "tests" / "fixtures" / "logs" / "v1-clean-start.log"
FAILING_LOG = REPO / "tests" / "fixtures" / "logs" / "v1-kv-too-small.log"
SCRIPT = REPO / "tests" / "scenarios" / "s1" / "start_api.sh"
MODEL = REPO / "tests" / "scenarios" / "s1" / "model"

# The command a user runs: the installed console script (no runpy), else python -m.
_ENTRY = Path(sys.executable).with_name("oomguard")
OOMGUARD = [str(_ENTRY)] if _ENTRY.exists() else ["-m", "oomguard.cli.main"]

CASES = {
    "python -c pass": ["-c", "pass"],
    "import oomguard": ["-c", "import oomguard"],
    "plan --json": [*OOMGUARD, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--json"],
    "plan S1 script --json": [*OOMGUARD, "plan", str(SCRIPT), "--model", str(MODEL), "--gpu", "A100-80GB", "--json"],
    "check S1 script": [*OOMGUARD, "check", str(SCRIPT), "--model", str(MODEL), "--gpu", "A100-80GB",
                        "--format", "json"],
    "diagnose clean log": [*OOMGUARD, "diagnose", str(LOG), "--format", "json"],
    "diagnose failing log": [*OOMGUARD, "diagnose", str(FAILING_LOG), "--format", "json"],
    "fit": [*OOMGUARD, "fit", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--context", "32768", "--format", "json"],
    "--help": [*OOMGUARD, "--help"],
}


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    r = timed_run([sys.executable, *args], env=env, text=False, what=" ".join(args))
    return r.seconds, r.cpu_seconds


def _table(samples: dict[str, list[tuple[float, float]]], n: int) -> list[str]:
    results = {name: (min(w for w, _ in runs), min(c for _, c in runs),
                      statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
               for name, runs in samples.items()}
    base = results["python -c pass"]

    def ratio(a: float, b: float) -> str:
        return f"{a / b:7.1f}" if b else f"{'nan':>7}"

    lines = [f"{'case':24} {'best wall':>9} {'x pass':>7} {'best cpu':>8} {'x pass':>7} | {'med wall':>8} {'x pass':>7} "
             f"{'med cpu':>7} {'x pass':>7}   (ms, {n} runs)"]
    for name, (bw, bc, mw, mc) in results.items():
        lines.append(f"{name:24} {bw * 1000:9.0f} {ratio(bw, base[0])} {bc * 1000:8.0f} {ratio(bc, base[1])} | "
                     f"{mw * 1000:8.0f} {ratio(mw, base[2])} {mc * 1000:7.0f} {ratio(mc, base[3])}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="runs per case (default 15)")
    ap.add_argument("--imports", action="store_true", help="print the slowest imports of plan --json")
    ap.add_argument("--src", action="append", default=[],
                    help="a directory holding another checkout's src/ (repeatable): measured in the same rounds as "
                         "this tree, interleaved, for a before/after under the same load")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="oomguard-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPYCACHEPREFIX=cache, HF_HUB_OFFLINE="1")
        trees = {"this tree": env}
        for src in opts.src:
            trees[src] = dict(env, PYTHONPATH=str(Path(src).resolve() / "src"))
        load_before = os.getloadavg()
        for tree_env in trees.values():
            for args in CASES.values():  # warm: write the bytecode, fill the page cache
                _run(args, tree_env)
        # Interleaved rounds: a burst of load on the machine hits every case (and every tree) alike.
        samples = {tree: {k: [] for k in CASES} for tree in trees}
        for _ in range(opts.n):
            for name, args in CASES.items():
                for tree, tree_env in trees.items():
                    samples[tree][name].append(_run(args, tree_env))
        load_after = os.getloadavg()
        print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after ({os.cpu_count()} CPUs); "
              f"{sys.executable} (Python {sys.version.split()[0]})")
        for tree in trees:
            if len(trees) > 1:
                print(f"\n{tree}:")
            print("\n".join(_table(samples[tree], opts.n)))
        if opts.imports:
            done = subprocess.run([sys.executable, "-X", "importtime", *CASES["plan --json"]], capture_output=True,
                                  env=env, text=True)
            rows = []
            for line in done.stderr.splitlines():
                parts = line[len("import time:"):].split("|") if line.startswith("import time:") else []
                if len(parts) == 3 and parts[0].strip().isdigit():
                    rows.append((int(parts[1]), int(parts[0]), parts[2].rstrip()))
            print("\nslowest imports of plan --json (cumulative us, self us):")
            for cum, self_us, name in sorted(rows, reverse=True)[:25]:
                print(f"  {cum:8} {self_us:8}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
