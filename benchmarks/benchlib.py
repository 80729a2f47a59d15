"""What the benchmark scripts share: timing a child process, and the fuzz campaigns' runner.

- ``timed_run``: one child process, its wall time, its CPU time (user + system, from the kernel's
  child accounting) and the largest child's peak RSS so far; a figure per run, for the scripts that
  print best / median of N (cli_startup, host_time, plan_time, diagnose_throughput).
- The fuzz campaigns (fuzz.py, fuzz_launches.py): each drawn input runs one ``oomguard`` command
  in a fresh interpreter (``run_child``: a hang is killed at the time limit, the peak RSS is that
  run's own), judged as in the property tests (``tests/property/fuzzlib.py``), counted per problem
  kind (``campaign``) and printed as one table (``fuzz_main``).

Scripts import it as ``from benchlib import ...`` (run as ``python benchmarks/NAME.py``, their own
folder is first on sys.path).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the fuzz generators live in tests/property


# -- timing one child process ---------------------------------------------------------------


@dataclass(frozen=True)
class TimedRun:
    """One child process: what it returned, and what it cost."""

    proc: subprocess.CompletedProcess
    seconds: float  # wall clock
    cpu_seconds: float  # user + system of this child (the kernel's child accounting)
    peak_rss_kib: int  # ru_maxrss of children: the largest child so far (an upper bound for this one)


def timed_run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, text: bool = True,
              ok: Iterable[int] | None = (0, 1), what: str | None = None) -> TimedRun:
    """Run ``cmd`` to its end and time it. An exit code outside ``ok`` stops the benchmark with the
    command (or ``what``) and its stderr's tail; ``ok=None`` accepts any exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=text, env=env, cwd=cwd, **({"errors": "replace"} if text else {}))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if ok is not None and proc.returncode not in tuple(ok):
        err = proc.stderr if text else proc.stderr.decode(errors="replace")
        raise SystemExit(f"{what or ' '.join(map(str, cmd))} exited {proc.returncode}: {err[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return TimedRun(proc, wall, cpu, after.ru_maxrss)


# -- the fuzz campaigns' child runner ---------------------------------------------------------

CHILD = r"""
import resource, sys, json
argv = json.loads(sys.argv[1])
try:
    from oomguard.cli.main import main
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
finally:
    sys.stderr.flush()
    sys.stderr.write("\n@@RSS %d\n" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))
sys.exit(rc)
"""

COLUMNS = ("runs", "tracebacks", "caught-crashes", "bad-exit", "over-time", "over-memory", "leaks")


def run_child(argv: list[str], env: dict[str, str], src: Path = ROOT / "src"):
    """``oomguard ARGV`` in a fresh interpreter on the package under ``src``, as a fuzz outcome (not yet judged)."""
    from tests.property import fuzzlib

    # The child's address space is capped (3x the judged 1 GiB): a runaway input fails in its own
    # process with MemoryError (counted as over-memory) instead of waking the machine's OOM killer.
    cap = 3 * fuzzlib.MEMORY_LIMIT_BYTES

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    full_env = {**os.environ, **env, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argv)], capture_output=True, text=True,
                              errors="replace", env=full_env, timeout=fuzzlib.TIME_LIMIT_S + 5, preexec_fn=cap_memory)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return fuzzlib.Outcome(argv, None, out, err, time.perf_counter() - t0, 0)
    took = time.perf_counter() - t0
    err, rss = proc.stderr, 0
    if "\n@@RSS " in err:
        err, _, tail = err.rpartition("\n@@RSS ")
        try:
            rss = int(tail.split()[0])
        except (ValueError, IndexError):
            rss = 0
        # the interpreter's own traceback (if any) is printed after our line
        err += tail.partition("\n")[2]
    tb = err if "Traceback (most recent call last)" in err else None
    return fuzzlib.Outcome(argv, proc.returncode, proc.stdout, err, took, rss, tb)


def kind_of(problem: str) -> str:
    """The table column a judged problem counts in."""
    for word, kind in (("caught crash", "caught-crashes"), ("traceback", "tracebacks"), ("exit code", "bad-exit"),
                       ("over time", "over-time"), ("over memory", "over-memory"), ("RSS", "over-memory"),
                       ("secret", "leaks")):
        if word in problem:
            return kind
    return "other"


# One drawn value -> (the judged outcome, the input as the failures file shows it).
RunOne = Callable[[Path, object], tuple]


def campaign(name: str, strategy, run_one: RunOne, examples: int, seed: int, failures: list[dict]) -> Counter:
    """``examples`` values drawn from ``strategy`` (derandomised by ``seed``, no shrinking), each run by
    ``run_one`` in a fresh temporary folder; the counts per column, and up to 5 failures per case."""
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
            o, shown = run_one(d, value)
            counts["runs"] += 1
            kinds = {kind_of(p) for p in o.problems}  # an "internal error" is judged a caught crash
            for k in kinds:
                counts[k] += 1
            if kinds and len([f for f in failures if f["case"] == name]) < 5:
                # the child's own peak, not this process's growth, is the memory figure here
                failures.append({"case": name, "problems": o.problems, "argv": o.argv, "input": shown,
                                 "stderr_tail": o.err[-2000:], "seconds": round(o.seconds, 2),
                                 "peak_rss_mib": o.grew_bytes >> 20})
        finally:
            shutil.rmtree(d, ignore_errors=True)

    one()
    return counts


def fuzz_args(description: str, *, examples: int, failures: str, src: bool = False) -> argparse.Namespace:
    """The campaigns' command line: --examples, --seed, --case (repeatable), --failures[, --src]."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--examples", type=int, default=examples, help=f"inputs per case (default {examples})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", action="append", default=[], help="run only these cases (repeatable)")
    ap.add_argument("--failures", default=failures, help="where the failing examples go")
    if src:
        ap.add_argument("--src", help="a directory holding another checkout's src/ to run instead of this one")
    return ap.parse_args()


def fuzz_main(args: argparse.Namespace, cases: list[tuple[str, object, RunOne]]) -> int:
    """Run each case's campaign, print a row per case and the total, write the failures; exit status 1
    when any problem was found."""
    failures: list[dict] = []
    total: Counter = Counter()
    print(f"{'case':<22}" + "".join(f"{c:>15}" for c in COLUMNS) + f"{'seconds':>10}")
    t_all = time.perf_counter()
    for name, strategy, run_one in cases:
        t0 = time.perf_counter()
        counts = campaign(name, strategy, run_one, args.examples, args.seed, failures)
        total.update(counts)
        print(f"{name:<22}" + "".join(f"{counts.get(c, 0):>15}" for c in COLUMNS) + f"{time.perf_counter() - t0:>10.0f}",
              flush=True)
    print(f"{'TOTAL':<22}" + "".join(f"{total.get(c, 0):>15}" for c in COLUMNS) + f"{time.perf_counter() - t_all:>10.0f}")
    with open(args.failures, "w", encoding="utf-8") as fh:
        for f in failures:
            fh.write(json.dumps(f) + "\n")
    print(f"failing examples (up to 5 per case): {args.failures}")
    return 1 if any(total.get(c, 0) for c in COLUMNS[1:]) else 0
