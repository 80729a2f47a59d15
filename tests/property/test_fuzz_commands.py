"""Every command on hostile inputs: a documented exit code, no traceback, bounded, no planted secret.

A fixed, derandomized example budget per case keeps this under a minute in CI; the long
campaign with the same generators is ``benchmarks/fuzz.py``. A failure shows the argv and the
input file's text (hypothesis prints the falsifying example).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.property import fuzzlib

EXAMPLES = 10
# In CI a run may take 10 s (the campaign's bound is 30 s); a hang is cut there by SIGALRM.
CI_TIME_LIMIT_S = 10.0
CASES = [pytest.param(name, strategy, build, id=name) for name, strategy, build in fuzzlib.cases()]


@pytest.mark.parametrize("name, strategy, build", CASES)
def test_command_survives_hostile_input(name, strategy, build):
    # No shrinking in CI: the first failing example is reported as drawn (benchmarks/fuzz.py
    # is the place to minimise); it keeps a failing run as fast as a passing one.
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(text=strategy)
    def check(text):
        d = Path(tempfile.mkdtemp(prefix=f"oomguard-fuzz-{name}-"))
        try:
            argv = build(d, text)
            o = fuzzlib.judge(fuzzlib.run_inprocess(argv, env=fuzzlib.OFFLINE_ENV, time_limit_s=CI_TIME_LIMIT_S))
            assert not o.problems, f"{name}: {o.problems}\nargv: {argv}\nstderr: {o.err[-1500:]}"
        finally:
            shutil.rmtree(d, ignore_errors=True)

    check()


def test_probe_survives_hostile_http_responses():
    """probe against a loopback server answering every request with one drawn response."""
    import json

    @settings(max_examples=8, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(resp=fuzzlib.http_responses())
    def check(resp):
        with fuzzlib.ResponseServer(resp) as srv:
            argv = fuzzlib.probe_argv(srv.base_url)
            o = fuzzlib.judge(fuzzlib.run_inprocess(argv, env={fuzzlib.PROBE_KEY_ENV: fuzzlib.SECRET_API_KEY},
                                                    time_limit_s=CI_TIME_LIMIT_S))
        assert not o.problems, f"{o.problems}\nresponse: {resp}\nstderr: {o.err[-1500:]}"
        assert o.code in (0, 1), (o.code, o.err[-500:])
        doc = json.loads(o.out)  # JSON stays JSON whatever the server sent
        assert "\x1b" not in o.out and "\\u001b" not in o.out
        assert doc["verdict"] in ("pass", "fail")

    check()


def test_watch_survives_hostile_http_responses():
    """watch (remote: /metrics only) against the same drawn responses; it ends by --duration or server-gone."""

    @settings(max_examples=4, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(resp=fuzzlib.http_responses())
    def check(resp):
        with fuzzlib.ResponseServer(resp) as srv:
            argv = fuzzlib.watch_argv(srv.base_url)
            o = fuzzlib.judge(fuzzlib.run_inprocess(argv, env={fuzzlib.PROBE_KEY_ENV: fuzzlib.SECRET_API_KEY},
                                                    time_limit_s=CI_TIME_LIMIT_S))
        assert not o.problems, f"{o.problems}\nresponse: {resp}\nstderr: {o.err[-1500:]}"
        assert "\x1b" not in o.out

    check()
