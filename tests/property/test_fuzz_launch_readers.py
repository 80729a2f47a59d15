"""The one launch reader on hostile launches of every form: one-line errors, never a crash.

Per reader (Kubernetes, compose, Helm values, ``--config`` YAML with explicit tags, JSON-valued
flags; generators in ``fuzz_launches.py``):

- the reader itself, strict and lenient, on many drawn inputs: it returns launches or raises
  ``OomguardError`` (exit 2 with one line); any other exception is a crash site;
- every command that takes a launch (plan, check, check --fix, fit --from, host --launch, export)
  on fewer drawn inputs, judged like the other fuzz cases: a documented exit code, no ``internal
  error``, no traceback, bounded time and memory, no planted secret printed.

Budgets are fixed and derandomized (the same examples every run) so CI time stays bounded; the
long campaign with the same generators is ``benchmarks/fuzz_launches.py``. No case is xfail.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.property import fuzz_launches, fuzzlib

READER_EXAMPLES = 60
COMMAND_EXAMPLES = 12
CI_TIME_LIMIT_S = 10.0


def _settings(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])


@pytest.mark.parametrize("reader", sorted(fuzz_launches.READERS))
def test_reader_raises_only_input_errors(reader):
    from oomguard.errors import OomguardError
    from oomguard.inputs.reader import read_launches

    strategy, name = fuzz_launches.READERS[reader]

    @_settings(READER_EXAMPLES)
    @given(text=strategy, lenient=st.booleans())
    def check(text, lenient):
        d = Path(tempfile.mkdtemp(prefix=f"oomguard-fuzz-{reader}-"))
        try:
            path = fuzzlib.write(d, name, text)
            try:
                launches = read_launches(path, lenient=lenient)
            except OomguardError as exc:
                assert "\n" not in str(exc).strip(), str(exc)
                return
            for launch in launches:
                launch.to_dict()  # every value has a source, and the structure serialises
                launch.report_notes()
        finally:
            shutil.rmtree(d, ignore_errors=True)

    check()


@pytest.mark.parametrize("reader", sorted(fuzz_launches.READERS))
def test_every_command_survives_hostile_launches(reader):
    strategy, name = fuzz_launches.READERS[reader]

    @_settings(COMMAND_EXAMPLES)
    @given(text=strategy, command=st.sampled_from(fuzz_launches.COMMANDS))
    def check(text, command):
        d = Path(tempfile.mkdtemp(prefix=f"oomguard-fuzz-{reader}-"))
        try:
            path = fuzzlib.write(d, name, text)
            argv = fuzz_launches.command_argv(command, str(path), d)
            o = fuzzlib.judge(fuzzlib.run_inprocess(argv, env=fuzzlib.OFFLINE_ENV, time_limit_s=CI_TIME_LIMIT_S))
            assert "internal error" not in o.err, f"{reader}/{command}: {o.err[-1500:]}\n--- input:\n{text[:3000]}"
            assert not o.problems, f"{reader}/{command}: {o.problems}\nargv: {argv}\nstderr: {o.err[-1500:]}"
        finally:
            shutil.rmtree(d, ignore_errors=True)

    check()
