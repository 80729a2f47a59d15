"""Generators of hostile inputs for every command, and one in-process runner that judges a run.

Shared by the property tests (``tests/property/test_fuzz_commands.py``, a fixed example budget)
and the long campaign (``benchmarks/fuzz.py``). Each generator is a hypothesis strategy that
draws the *text* of one input kind; a case writes it to a file and runs one command on it. A
run is judged by :func:`judge`: exit code in the documented set, no traceback, within the time
and memory bounds, and none of the planted secrets in anything printed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

EXIT_CODES = {0, 1, 2, 3}
# Commands whose documented set is larger: watch also exits 4 (server unreachable).
EXIT_CODES_BY_COMMAND = {"watch": {0, 1, 2, 3, 4}}
TIME_LIMIT_S = 30.0
MEMORY_LIMIT_BYTES = 1 << 30

# Secrets planted in inputs; none may appear in any output. Distinctive so that a hit is a leak.
SECRET_API_KEY = "zqFUZZapikey7731"
SECRET_HF = "hf_zqFUZZhftokenABCDEFGH1234"
SECRET_JSON = "zqFUZZjsonpw5519"
SECRET_URL = "zqFUZZurlpw0042"
SECRET_BEARER = "zqFUZZbearer88A1"
SECRETS = (SECRET_API_KEY, SECRET_HF, SECRET_JSON, SECRET_URL, SECRET_BEARER)

MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16", "rope_theta": 500000.0,
}

# -- building blocks ------------------------------------------------------------------------

_WEIRD_NUMBERS = ["0", "-1", "1e999", "nan", "inf", "-inf", "1.2.3", ".", "", "9" * 400, "0x10", "1_000",
                  "2**40", "1e-320", "  7 ", "八", "١٢٣"]
_NUMBERS = st.one_of(st.integers(-10, 1 << 40).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                     st.sampled_from(_WEIRD_NUMBERS))
_WORDS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_FLAGS = ["--max-model-len", "--gpu-memory-utilization", "--tensor-parallel-size", "--max-num-seqs",
          "--max-num-batched-tokens", "--kv-cache-dtype", "--block-size", "--swap-space", "--cpu-offload-gb",
          "--dtype", "--quantization", "--pipeline-parallel-size", "--enforce-eager", "--enable-prefix-caching",
          "--kv-cache-memory-bytes", "--served-model-name", "--port", "--no-such-flag", "--max-model-len=",
          "-tp", "--limit-mm-per-prompt", "--hf-overrides", "--speculative-config"]

_SECRET_BITS = [
    f"--api-key {SECRET_API_KEY}",
    f"--api-key={SECRET_API_KEY}",
    f"--hf-token {SECRET_HF}",
    "--kv-transfer-config '{\"kv_connector\":\"X\",\"kv_connector_extra_config\":{\"password\":\"" + SECRET_JSON + "\"}}'",
    "--kv-transfer-config '{\"kv_connector\":\"X\",\"kv_connector_extra_config\":{\"url\":\"http://u:" + SECRET_URL + "@h:1\"}}'",
]


@st.composite
def flag_words(draw) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 8))):
        flag = draw(st.sampled_from(_FLAGS))
        kind = draw(st.integers(0, 3))
        if kind == 0:
            parts.append(f"{flag} {draw(_NUMBERS)}")
        elif kind == 1:
            parts.append(f"{flag} {json.dumps(draw(_WORDS))}")
        elif kind == 2:
            parts.append(flag)
        else:
            parts.append(f"{flag}={draw(_NUMBERS)}")
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(_SECRET_BITS)))
    return " ".join(parts)


@st.composite
def launch_scripts(draw) -> str:
    """A start_api.sh: env lines, variables, quoting oddities, one vllm serve, planted secrets."""
    lines = ["#!/bin/bash"]
    if draw(st.booleans()):
        lines.append(f"export HF_TOKEN={SECRET_HF}")
    if draw(st.booleans()):
        lines.append('MODEL="${MODEL:-Qwen/Qwen3-8B}"')
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from([
            'X=a; X="$X$X"; X="$X$X"; X="$X$X"', "Y=$'tab\\there'", "echo `date`", "set -euo pipefail",
            "if [ -n \"$A\" ]; then", "fi", "exec \\", "# comment with --api-key " + SECRET_API_KEY,
        ])))
    model = draw(st.sampled_from(["Qwen/Qwen3-8B", "$MODEL", "/nonexistent/model", '"Qwen/Qwen3-8B"', ""]))
    cont = draw(st.sampled_from([" ", " \\\n  "]))
    lines.append(f"vllm serve {model}{cont}{draw(flag_words())}")
    if draw(st.booleans()):
        lines.append(draw(_WORDS))
    return "\n".join(lines) + "\n"


@st.composite
def yaml_configs(draw) -> str:
    """A vLLM --config YAML: typed oddities (lists, dates, nesting), aliases, secrets."""
    key = draw(st.sampled_from(["max-model-len", "gpu-memory-utilization", "tensor-parallel-size", "max_num_seqs",
                                "kv-cache-dtype", "api-key", "model", "unknown-key"]))
    value = draw(st.one_of(_NUMBERS, st.sampled_from(["[1, 2]", "{a: 1}", "2024-01-01", "null", "true", "~",
                                                      "&a [*a]", "!!python/object:os.system x", "'" + SECRET_API_KEY + "'"])))
    body = [f"model: Qwen/Qwen3-8B", f"{key}: {value}"]
    if draw(st.booleans()):
        body.append(f"api-key: {SECRET_API_KEY}")
    if draw(st.booleans()):
        body.append("nested: " + "[" * draw(st.integers(1, 200)))
    if draw(st.booleans()):
        body.append('a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]')
    return "\n".join(body) + "\n"


@st.composite
def model_configs(draw) -> str:
    """config.json: the Llama config with one field made hostile (or the whole file broken)."""
    cfg = dict(MODEL_CONFIG)
    field_ = draw(st.sampled_from(sorted(cfg) + ["rope_scaling", "quantization_config", "text_config"]))
    bad = draw(st.one_of(
        st.sampled_from([0, -1, 1e308, 10**30, None, "", "nan", [], {}, True, "bfloat16", 2.5]),
        st.floats(allow_nan=True, allow_infinity=True), st.integers(-(1 << 70), 1 << 70)))
    cfg[field_] = bad
    text = json.dumps(cfg, allow_nan=True)
    mode = draw(st.integers(0, 5))
    if mode == 0:
        text = text[: draw(st.integers(0, len(text)))]
    elif mode == 1:
        text = "[" * 5000 + "]" * 5000
    return text


_LOG_LINES = [
    "INFO 05-01 10:00:00 [gpu_model_runner.py:1] Model loading took {n} GiB and 3.2 seconds",
    "INFO 05-01 10:00:01 [kv_cache_utils.py:1] GPU KV cache size: {n} tokens",
    "INFO 05-01 10:00:01 [kv_cache_utils.py:1] Maximum concurrency for {n} tokens per request: {n}x",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} GiB. GPU 0 has a total capacity of {n} GiB of which {n} MiB is free.",
    "ValueError: To serve at least one request with the models's max seq len ({n}), ({n} GiB KV cache is needed, which is larger than the available KV cache memory ({n} GiB).",
    "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered",
    "Out of memory: Killed process {n} (python3) total-vm:{n}kB, anon-rss:{n}kB",
    "INFO 05-01 10:00:02 [api_server.py:1] non-default args: {{'api_key': ['" + SECRET_API_KEY + "'], 'model': 'x'}}",
    "Authorization: Bearer " + SECRET_BEARER,
    "HF_TOKEN=" + SECRET_HF,
    "ERROR 05-01 10:00:03 [core.py:1] EngineCore encountered an issue. See stack trace (above) for the root cause.",
    "INFO:     Uvicorn running on http://0.0.0.0:8000",
    "显存不足 OOM 了",
]


@st.composite
def log_texts(draw) -> str:
    """A vLLM log: real line shapes with hostile numbers, noise, escapes, very long lines."""
    out = []
    for _ in range(draw(st.integers(0, 25))):
        tmpl = draw(st.sampled_from(_LOG_LINES + ["{w}"]))
        out.append(tmpl.format(n=draw(_NUMBERS), w=draw(_WORDS)))
    if draw(st.booleans()):
        out.append("x" * draw(st.sampled_from([10, 70000, 300000])))
    if draw(st.booleans()):
        out.append("\x1b[31mred\x1b[0m \x00\x01 \udcff".encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    return "\n".join(out) + ("\n" if draw(st.booleans()) else "")


@st.composite
def nvidia_smi_texts(draw) -> str:
    rows = ["index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]"] if draw(st.booleans()) else []
    for i in range(draw(st.integers(0, 9))):
        rows.append(f"{draw(_NUMBERS)}, NVIDIA A100-SXM4-80GB, {draw(_NUMBERS)} MiB, {draw(_NUMBERS)} MiB, {draw(_NUMBERS)}")
    if draw(st.booleans()):
        rows.append(draw(_WORDS))
    return "\n".join(rows) + "\n"


@st.composite
def topo_texts(draw) -> str:
    n = draw(st.integers(0, 9))
    cells = ["X", "NV12", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "??", ""]
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity"
    rows = [head]
    for i in range(draw(st.integers(0, n + 2))):
        rows.append(f"GPU{i}\t" + "\t".join(draw(st.sampled_from(cells)) for _ in range(n)) + f"\t{draw(_NUMBERS)}\t{draw(_NUMBERS)}")
    return "\n".join(rows) + "\n"


# -- running and judging ------------------------------------------------------------------------


@dataclass
class Outcome:
    argv: list[str]
    code: int | None
    out: str
    err: str
    seconds: float
    grew_bytes: int
    traceback: str | None = None
    problems: list[str] = field(default_factory=list)
    time_limit_s: float = TIME_LIMIT_S


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class OverTime(BaseException):
    """Raised by the alarm inside a run that outlived its time limit (BaseException: no
    ``except Exception`` in the code under test swallows it)."""


def _alarm(signum, frame):  # noqa: ARG001
    raise OverTime()


def run_inprocess(argv: list[str], env: dict[str, str] | None = None, time_limit_s: float = TIME_LIMIT_S) -> Outcome:
    """``oomguard ARGV`` in this process, stdout/stderr captured; an escaping exception is a traceback.

    A run past ``time_limit_s`` is interrupted by SIGALRM (main thread only) and judged over time.
    """
    import signal

    from oomguard.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    before, t0 = _peak_rss(), time.perf_counter()
    code: int | None = None
    tb = None
    over = False
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse's own usage errors
                code = exc.code if isinstance(exc.code, int) else 2
    except OverTime:
        over = True
    except BaseException:  # noqa: BLE001 - that is the finding
        tb = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    took = time.perf_counter() - t0
    return Outcome(list(argv), code, out.getvalue(), err.getvalue(), max(took, time_limit_s + 0.001) if over else took,
                   max(0, _peak_rss() - before), tb, time_limit_s=time_limit_s)


def judge(o: Outcome, *, secrets: tuple[str, ...] = SECRETS) -> Outcome:
    if o.traceback is not None:
        o.problems.append("traceback: " + o.traceback.strip().splitlines()[-1])
    elif o.code is None and o.seconds > o.time_limit_s:
        pass  # interrupted; reported as over time below
    elif o.code not in EXIT_CODES_BY_COMMAND.get(o.argv[0] if o.argv else "", EXIT_CODES):
        allowed = EXIT_CODES_BY_COMMAND.get(o.argv[0] if o.argv else "", EXIT_CODES)
        o.problems.append(f"exit code {o.code!r} not in {sorted(allowed)}")
    if "Traceback (most recent call last)" in o.err + o.out:
        o.problems.append("a traceback was printed")
    if o.seconds > o.time_limit_s:
        o.problems.append(f"over time: took {o.seconds:.1f}s (> {o.time_limit_s:.0f}s)")
    if o.grew_bytes > MEMORY_LIMIT_BYTES:
        o.problems.append(f"peak RSS grew {o.grew_bytes >> 20} MiB (> 1 GiB)")
    for s in secrets:
        if s in o.out or s in o.err:
            o.problems.append(f"planted secret {s[:10]}... printed")
    return o


def write(dirpath: Path, name: str, text: str) -> Path:
    path = dirpath / name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


def model_dir(dirpath: Path, config_text: str | None = None) -> Path:
    d = dirpath / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(config_text if config_text is not None else json.dumps(MODEL_CONFIG))
    return d


# Each case: (name, strategy, build(tmpdir, text) -> argv). Commands never reach the network:
# models are local config dirs, HF_HUB_OFFLINE is set, probe only talks to loopback.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OOMGUARD_LLM_BASE_URL": ""}


def cases():
    def plan(d, t):
        return ["plan", str(write(d, "start_api.sh", t)), "--model", str(model_dir(d)), "--gpu", "A100-80GB"]

    def check(d, t):
        return ["check", str(write(d, "start_api.sh", t)), "--model", str(model_dir(d)), "--gpu", "A100-80GB",
                "--format", "json"]

    def check_yaml(d, t):
        return ["check", str(write(d, "config.yaml", t)), "--model", str(model_dir(d)), "--gpu", "H100"]

    def fit_from(d, t):
        return ["fit", "--from", str(write(d, "start_api.sh", t)), "--model", str(model_dir(d)), "--gpu", "A100-80GB"]

    def plan_config(d, t):
        return ["plan", "--model", str(model_dir(d, t)), "--gpu", "A100-80GB", "--max-model-len", "8192"]

    def diagnose(d, t):
        return ["diagnose", str(write(d, "vllm.log", t)), "--format", "json"]

    def bundle(d, t):
        return ["bundle", str(write(d, "vllm.log", t))]

    def diagnose_smi(d, t):
        return ["diagnose", str(write(d, "nvidia-smi.csv", t))]

    def host_topo(d, t):
        return ["host", "--root", str(d), "--topo", str(write(d, "topo.txt", t)), "--format", "json"]

    def check_topo(d, t):
        return ["check", "--gpu", "A100-80GB", "--topo", str(write(d, "topo.txt", t)), "--", "vllm", "serve",
                str(model_dir(d)), "--tensor-parallel-size", "2"]

    def export_launch(d, t):
        return ["export", "launch", str(write(d, "start_api.sh", t)), "--to", "kubernetes"]

    def host_launch(d, t):
        return ["host", "--root", str(d), "--launch", str(write(d, "start_api.sh", t))]

    return [
        ("plan-launch", launch_scripts(), plan),
        ("check-launch", launch_scripts(), check),
        ("check-yaml", yaml_configs(), check_yaml),
        ("fit-from", launch_scripts(), fit_from),
        ("plan-config-json", model_configs(), plan_config),
        ("diagnose-log", log_texts(), diagnose),
        ("bundle-log", log_texts(), bundle),
        ("diagnose-nvidia-smi", nvidia_smi_texts(), diagnose_smi),
        ("host-topo", topo_texts(), host_topo),
        ("check-topo", topo_texts(), check_topo),
        ("export-launch", launch_scripts(), export_launch),
        ("host-launch", launch_scripts(), host_launch),
    ]


# -- HTTP responses (probe) ------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    stream: bool = False  # send the body as chunked SSE for POSTs that ask for a stream


_BODIES = [
    b"", b"{}", b"[]", b"null", b'{"error": {"message": "EngineCore encountered an issue. See stack trace (above)"}}',
    b'{"data": [{"id": "tiny\x1b]0;x\x07", "max_model_len": 1e999}]}', b'{"data": "not a list"}',
    b'{"data": [{"id": null, "max_model_len": "8192"}]}', b'{"choices": [{"text": "\x1b[2Jhi"}]}',
    b"<html>502 Bad Gateway</html>", b"[" * 100000, b'{"object": "list", "data": [' + b" " * 200000,
    b'{"error": "Unauthorized", "key": "' + SECRET_BEARER.encode() + b'"}',
]
_SSE = [
    b'data: {"choices": [{"text": "a"}]}\n\n', b"data: [DONE]\n\n", b": ping\n\n", b"data: {not json\n\n",
    b"event: x\n", b"garbage line\n", b'data: {"error": {"message": "CUDA out of memory", "code": 500}}\n\n',
    b"data: " + b"x" * 70000 + b"\n\n", b'data: {"choices": []}\n\n', b'data: {"usage": {"completion_tokens": "x"}}\n\n',
]


@st.composite
def http_responses(draw) -> Response:
    import gzip
    import zlib

    status = draw(st.sampled_from([200, 200, 200, 201, 204, 301, 400, 401, 404, 413, 429, 500, 502, 503, 599]))
    stream = draw(st.booleans())
    if stream:
        body = b"".join(draw(st.lists(st.sampled_from(_SSE), max_size=12)))
        ctype = draw(st.sampled_from(["text/event-stream", "text/event-stream; charset=utf-8", "application/json"]))
    else:
        body = draw(st.one_of(st.sampled_from(_BODIES), st.binary(max_size=300)))
        ctype = draw(st.sampled_from(["application/json", "text/plain", "text/html; charset=latin-1", ""]))
    headers = [("Content-Type", ctype)] if ctype else []
    enc = draw(st.sampled_from(["", "", "gzip", "deflate", "br", "gzip, gzip", "identity", "bogus"]))
    if enc == "gzip":
        body = gzip.compress(body)
    elif enc == "deflate":
        body = zlib.compress(body)
    if enc:
        headers.append(("Content-Encoding", enc))
    return Response(status, tuple(headers), body, stream)


class ResponseServer:
    """Loopback HTTP/1.1 server that answers every request with one drawn response."""

    def __init__(self, response: Response, host: str = "127.0.0.1"):
        import socket
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        resp = response

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                return None

            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                try:
                    self.send_response(resp.status)
                    for k, v in resp.headers:
                        self.send_header(k, v)
                    if resp.stream and self.command == "POST":
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for i in range(0, len(resp.body), 4096):
                            part = resp.body[i:i + 4096]
                            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self.send_header("Content-Length", str(len(resp.body)))
                        self.end_headers()
                        self.wfile.write(resp.body)
                except OSError:
                    self.close_connection = True

            do_GET = do_POST = _answer

        class Quiet(ThreadingHTTPServer):
            daemon_threads = True
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

            def handle_error(self, request, client_address):
                return None

        self._httpd = Quiet((host, 0), Handler)
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{shown}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()


PROBE_KEY_ENV = "OOMGUARD_FUZZ_PROBE_KEY"


def probe_argv(base_url: str) -> list[str]:
    return ["probe", "--base-url", base_url, "--api-key-env", PROBE_KEY_ENV, "--max-model-len", "64",
            "--concurrency", "2", "--output-tokens", "4", "--timeout", "1", "--stall-timeout", "1",
            "--duration", "6", "--sample-interval", "0.2", "--no-local", "--no-progress", "--format", "json"]


def watch_argv(base_url: str) -> list[str]:
    return ["watch", "--base-url", base_url, "--api-key-env", PROBE_KEY_ENV, "--interval", "0.2", "--duration", "2",
            "--remote", "--gone-after", "1s", "--format", "json"]
