"""The long fuzz campaign of the one launch reader: hostile launches of every form, every command.

The generators are ``tests/property/fuzz_launches.py`` (Kubernetes objects of every kind, compose
files, Helm values, ``--config`` YAML with explicit tags, JSON-valued flags). Each drawn launch is
written to a file and one command (plan, check, check --fix, fit --from, host --launch, export
launch) runs on it in a fresh interpreter (``benchmarks/benchlib.py``'s child runner, as fuzz.py's). A run is judged
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

import sys
from pathlib import Path

from benchlib import ROOT, fuzz_args, fuzz_main, run_child
from tests.property import fuzz_launches, fuzzlib


def _case(build, src: Path):
    def run_one(d, value):
        return fuzzlib.judge(run_child(build(d, value), fuzzlib.OFFLINE_ENV, src)), value[0]

    return run_one


def main() -> int:
    args = fuzz_args(__doc__.splitlines()[0], examples=200, failures="fuzz-launch-failures.jsonl", src=True)
    src = Path(args.src).resolve() / "src" if args.src else ROOT / "src"  # the child runs with PYTHONPATH=src
    cases = [(n, s, _case(b, src)) for n, s, b in fuzz_launches.cases() if not args.case or n in args.case]
    return fuzz_main(args, cases)


if __name__ == "__main__":
    sys.exit(main())
