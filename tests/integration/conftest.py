"""Fixtures for integration tests that run the real vLLM CPU server.

See tests/integration/vllm_server.py for what each fixture yields and how to use it:
``vllm_venv``, ``tiny_model_dir``, ``vllm_server``, ``vllm_server_factory``, ``vllm_failing_run``.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

# vllm_server.py sits beside this file; make it importable whether or not tests/ is a package.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import vllm_server as vs  # noqa: E402


@pytest.fixture(scope="session")
def vllm_venv() -> Path:
    return vs.require_vllm()


@pytest.fixture(scope="session")
def tiny_model_dir(vllm_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return vs.build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny")


@pytest.fixture(scope="session")
def _vllm_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vllm-logs")


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir: Path, _vllm_logs: Path):
    server = vs.start_server(tiny_model_dir, _vllm_logs / "server-main.log")
    try:
        yield server
    finally:
        server.stop()


# One key-protected server for every test that needs one (a server start is the costliest step
# of the suite on 2 cores).


@pytest.fixture(scope="session")
def vllm_server_with_key(tiny_model_dir: Path, _vllm_logs: Path):
    server = vs.start_server(tiny_model_dir, _vllm_logs / "server-key.log", ["--api-key", vs.TEST_API_KEY])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def vllm_server_factory(tiny_model_dir: Path, _vllm_logs: Path):
    started: list[vs.VllmServer] = []
    counter = itertools.count(1)

    def factory(extra_args=(), *, model_dir=None, **kwargs) -> vs.VllmServer:
        log_path = _vllm_logs / f"server-extra-{next(counter)}.log"
        server = vs.start_server(model_dir or tiny_model_dir, log_path, extra_args, **kwargs)
        started.append(server)
        return server

    try:
        yield factory
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="session")
def vllm_failing_run(tiny_model_dir: Path, _vllm_logs: Path):
    counter = itertools.count(1)

    def run(extra_args=(), *, model_dir=None, **kwargs) -> vs.FailedRun:
        log_path = _vllm_logs / f"failing-run-{next(counter)}.log"
        return vs.run_expect_failure(model_dir or tiny_model_dir, log_path, extra_args, **kwargs)

    return run
