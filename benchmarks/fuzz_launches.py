"""The long fuzz campaign of the one launch reader: hostile launches of every form, every command.

The generators are ``tests/property/fuzz_launches.py`` (Kubernetes objects of every kind, compose
files, Helm values, ``--config`` YAML with explicit tags, JSON-valued flags). Each drawn launch is
written to a file and one command (plan, check, check --fix, fit --from, host --launch, export
launch) runs on it in a fresh interpreter (``benchmarks/fuzz.py``'s child runner). A run is judged
as in the tests (exit code in {0, 1, 2, 3}, no traceback, at most 30 s and 1 GiB, no planted
secret printed), and an ``internal error`` (exit 3 from the last line of defence) counts as a
caught crash.

    python benchmarks/fuzz_launches.py [--examples 200] [--seed 0] [--case launch-helm ...] [--src DIR]

``--src DIR`` runs the same campaign against another checkout's ``src`` (``git archive REV src |
tar -x -C DIR``): the figures before a change, beside the figures after it.

Prints per case: runs, tracebacks, caught crashes, bad exit codes, over time, over memory, leaks.
Exit status 1 when any problem was found; the first failing inputs go to --failures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.property import fuzz_launches, fuzzlib  # noqa: E402


def _fuzz_runner():
    spec = importlib.util.spec_from_file_location("oomguard_bench_fuzz", ROOT / "benchmarks" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def campaign(runner, name, strategy, build, examples: int, seed: int, failures: list[dict]) -> Counter:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    counts: Counter = Counter()

    @hseed(seed)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate])
    @given(value=strategy)
    def one(value):
        d = Path(tempfile.mkdtemp(prefix=f"oomguard-fuzz-{name}-"))
        try:
            argv = build(d, value)
            o = fuzzlib.judge(runner.run_child(argv, fuzzlib.OFFLINE_ENV))
            counts["runs"] += 1
            kinds = {runner.kind_of(p) for p in o.problems}
            if "internal error" in o.err:
                kinds.add("caught-crashes")
            for k in kinds:
                counts[k] += 1
            if kinds and len([f for f in failures if f["case"] == name]) < 5:
                failures.append({"case": name, "problems": o.problems, "argv": argv, "input": value[0],
                                 "stderr_tail": o.err[-2000:], "seconds": round(o.seconds, 2)})
        finally:
            shutil.rmtree(d, ignore_errors=True)

    one()
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200, help="inputs per case (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", action="append", default=[], help="run only these cases (repeatable)")
    ap.add_argument("--failures", default="fuzz-launch-failures.jsonl", help="where the failing examples go")
    ap.add_argument("--src", help="a directory holding another checkout's src/ to run instead of this one")
    args = ap.parse_args()
    runner = _fuzz_runner()
    if args.src:
        runner.ROOT = Path(args.src).resolve()  # the child runs with PYTHONPATH=ROOT/src
    cases = [c for c in fuzz_launches.cases() if not args.case or c[0] in args.case]
    failures: list[dict] = []
    total: Counter = Counter()
    cols = ("runs", "tracebacks", "caught-crashes", "bad-exit", "over-time", "over-memory", "leaks")
    print(f"{'case':<22}" + "".join(f"{c:>15}" for c in cols) + f"{'seconds':>10}")
    for name, strategy, build in cases:
        t0 = time.perf_counter()
        counts = campaign(runner, name, strategy, build, args.examples, args.seed, failures)
        total.update(counts)
        print(f"{name:<22}" + "".join(f"{counts.get(c, 0):>15}" for c in cols) + f"{time.perf_counter() - t0:>10.0f}",
              flush=True)
    print(f"{'total':<22}" + "".join(f"{total.get(c, 0):>15}" for c in cols))
    if failures:
        with open(args.failures, "w", encoding="utf-8") as fh:
            for f in failures:
                fh.write(json.dumps(f) + "\n")
        print(f"first failing inputs: {args.failures}")
    return 1 if any(total.get(c, 0) for c in cols[1:]) else 0


if __name__ == "__main__":
    sys.exit(main())
