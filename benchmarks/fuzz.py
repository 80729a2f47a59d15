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

import sys

from benchlib import fuzz_args, fuzz_main, run_child
from tests.property import fuzzlib


def _http_case(build):
    """probe / watch against a loopback server that answers with the drawn responses."""
    def run_one(d, value):
        with fuzzlib.ResponseServer(value) as srv:
            o = run_child(build(srv.base_url), {fuzzlib.PROBE_KEY_ENV: fuzzlib.SECRET_API_KEY, **fuzzlib.OFFLINE_ENV})
        return fuzzlib.judge(o), repr(value)[:4000]

    return run_one


def _file_case(build):
    """The drawn input written under the run's folder, one command on it."""
    def run_one(d, value):
        o = run_child(build(d, value), fuzzlib.OFFLINE_ENV)
        return fuzzlib.judge(o), value if isinstance(value, str) else repr(value)[:4000]

    return run_one


def main() -> int:
    args = fuzz_args(__doc__.splitlines()[0], examples=40, failures="fuzz-failures.jsonl")
    cases = [(n, s, _file_case(b)) for n, s, b in fuzzlib.cases()] + [
        ("probe-http", fuzzlib.http_responses(), _http_case(fuzzlib.probe_argv)),
        ("watch-http", fuzzlib.http_responses(), _http_case(fuzzlib.watch_argv))]
    return fuzz_main(args, [c for c in cases if not args.case or c[0] in args.case])


if __name__ == "__main__":
    sys.exit(main())
