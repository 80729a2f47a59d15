"""The long fuzz campaign: every command on hostile inputs, each run in its own process.

The generators are the property tests' (``tests/property/fuzzlib.py``: launch scripts, vLLM
YAML configs, config.json, vLLM logs, nvidia-smi CSV, ``nvidia-smi topo -m``, HTTP responses
for ``probe``). Each drawn input is written to a file and one ``oomguard`` command runs on it in
a fresh interpreter, so a hang is killed at the time limit and the peak RSS is that run's own.
A run is judged as in the tests: exit code in {0, 1, 2, 3}, no traceback, no ``internal error``
(a crash the CLI caught), at most 30 s and 1 GiB, no planted secret in stdout or stderr.

    python benchmarks/fuzz.py [--examples 40] [--seed 0] [--case NAME ...] [--failures fuzz-failures.jsonl]

Prints per case: runs, tracebacks, caught crashes, bad exit codes, over-time, over-memory, leaks; the first
example of each problem. Exit status 1 when any problem was found.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.property import fuzzlib  # noqa: E402

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


# The child's address space is capped (3x the judged 1 GiB): a runaway input fails in its own
# process with MemoryError (counted as over-memory) instead of waking the machine's OOM killer.
CHILD_ADDRESS_SPACE_BYTES = 3 * fuzzlib.MEMORY_LIMIT_BYTES


def _cap_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE_BYTES, CHILD_ADDRESS_SPACE_BYTES))


def run_child(argv: list[str], env: dict[str, str]) -> fuzzlib.Outcome:
    full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT / "src")}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argv)], capture_output=True, text=True,
                              errors="replace", env=full_env, timeout=fuzzlib.TIME_LIMIT_S + 5, preexec_fn=_cap_memory)
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
    for word, kind in (("caught crash", "caught-crashes"), ("traceback", "tracebacks"), ("exit code", "bad-exit"),
                       ("over time", "over-time"), ("over memory", "over-memory"), ("RSS", "over-memory"),
                       ("secret", "leaks")):
        if word in problem:
            return kind
    return "other"


def campaign(name: str, strategy, build, examples: int, seed: int, failures: list[dict]) -> Counter:
    from hypothesis import HealthCheck, Phase, given, settings, seed as hseed

    counts: Counter = Counter()

    @hseed(seed)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate])
    @given(value=strategy)
    def one(value):
        d = Path(tempfile.mkdtemp(prefix=f"oomguard-fuzz-{name}-"))
        try:
            if name in ("probe-http", "watch-http"):
                with fuzzlib.ResponseServer(value) as srv:
                    argv = build(srv.base_url)
                    o = run_child(argv, {fuzzlib.PROBE_KEY_ENV: fuzzlib.SECRET_API_KEY, **fuzzlib.OFFLINE_ENV})
            else:
                argv = build(d, value)
                o = run_child(argv, fuzzlib.OFFLINE_ENV)
            fuzzlib.judge(o)
            # the child's own peak, not this process's growth, is the memory figure here
            counts["runs"] += 1
            kinds = {kind_of(p) for p in o.problems}
            for k in kinds:
                counts[k] += 1
            if kinds and len([f for f in failures if f["case"] == name]) < 5:
                failures.append({"case": name, "problems": o.problems, "argv": argv,
                                 "input": value if isinstance(value, str) else repr(value)[:4000],
                                 "stderr_tail": o.err[-2000:], "seconds": round(o.seconds, 2),
                                 "peak_rss_mib": o.grew_bytes >> 20})
        finally:
            shutil.rmtree(d, ignore_errors=True)

    one()
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=40, help="inputs per case (default 40)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", action="append", default=[], help="run only these cases (repeatable)")
    ap.add_argument("--failures", default="fuzz-failures.jsonl", help="where the failing examples go")
    args = ap.parse_args()
    cases = [(n, s, b) for n, s, b in fuzzlib.cases()] + [("probe-http", fuzzlib.http_responses(), fuzzlib.probe_argv),
                                                           ("watch-http", fuzzlib.http_responses(), fuzzlib.watch_argv)]
    if args.case:
        cases = [c for c in cases if c[0] in args.case]
    failures: list[dict] = []
    total: Counter = Counter()
    cols = ("runs", "tracebacks", "caught-crashes", "bad-exit", "over-time", "over-memory", "leaks")
    print(f"{'case':<22}" + "".join(f"{c:>15}" for c in cols) + f"{'seconds':>10}")
    t_all = time.perf_counter()
    for name, strategy, build in cases:
        t0 = time.perf_counter()
        counts = campaign(name, strategy, build, args.examples, args.seed, failures)
        total.update(counts)
        print(f"{name:<22}" + "".join(f"{counts.get(c, 0):>15}" for c in cols) + f"{time.perf_counter() - t0:>10.0f}",
              flush=True)
    print(f"{'TOTAL':<22}" + "".join(f"{total.get(c, 0):>15}" for c in cols) + f"{time.perf_counter() - t_all:>10.0f}")
    with open(args.failures, "w", encoding="utf-8") as fh:
        for f in failures:
            fh.write(json.dumps(f) + "\n")
    print(f"failing examples (up to 5 per case): {args.failures}")
    return 1 if any(total.get(c, 0) for c in cols[1:]) else 0


if __name__ == "__main__":
    sys.exit(main())
