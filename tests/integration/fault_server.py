"""A loopback HTTP server that looks like vLLM until told to misbehave.

It serves ``/health``, ``/v1/models``, ``/v1/completions`` (plain and SSE),
``/v1/chat/completions``, ``/tokenize`` and ``/metrics`` the way vLLM 0.32
shapes them, and injects the faults real vLLM will not produce on demand:

``reset``        cut the TCP connection (RST) after two stream chunks
``stall``        send one chunk, then nothing until the server stops
``500``          answer HTTP 500 with an OpenAI error body
``malformed``    a stream whose payload is not JSON
``no-done``      a stream that ends cleanly without ``data: [DONE]``
``never-answer`` accept, read the request, never respond (every path)
``oom``          answer 500 "CUDA out of memory" and report unhealthy afterwards
``preempt``      serve normally but count a preemption per streamed request in /metrics
``no-choices``   a stream chunk without ``choices`` (S2's "reading choices")
``trickle``      after one chunk, only SSE keep-alive comments, forever (defeats read timeouts)
``slow``         every token takes 50 ms (a run that outlasts ``--duration``)
``trickle-body`` ``/v1/models`` (and every non-streamed answer) sent one byte every 50 ms
                 (each read returns in time, the call never ends: a per-read timeout is no bound)
``endless-body`` ``/v1/models`` is an endless chunked body (bytes as fast as the socket takes them)
``gzip-bomb``    ``/v1/models`` is 4 MiB of gzip that inflates to 4 GiB of zeros
``escapes``      model ids, error messages and stream text carry terminal escape sequences
``engine-dead``  load requests get vLLM's EngineDeadError 500 ("EngineCore encountered an
                 issue"), after which /health answers 503
``long-line``    a stream line that never ends (no newline, ever)
``many-events``  a stream of empty-text events that never sends [DONE]

``where`` limits a fault to stage-2 load (requests whose prompt is a list of
token ids), so the client chain passes and the runner's handling is tested;
``where="all"`` applies it to every request it fits. Threads are daemons and
``stop()`` releases stalled handlers, so a test never waits on this server.
"""

from __future__ import annotations

import gzip
import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "tiny"
MAX_MODEL_LEN = 1024
ESCAPE = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"  # set the window title, clear the screen, turn red
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
_BOMB: bytes | None = None


def gzip_bomb() -> bytes:
    """4 GiB of zeros as gzip (about 4 MiB): one 16 MiB member compressed once, repeated 256 times.

    A multi-member body is valid gzip (RFC 1952) and costs milliseconds to build.
    """
    global _BOMB
    if _BOMB is None:
        _BOMB = gzip.compress(b"\0" * (1 << 24), compresslevel=9) * 256
    return _BOMB


class _State:
    def __init__(self, fault: str, where: str, api_key: str | None, max_model_len: int):
        self.fault = fault
        self.where = where
        self.api_key = api_key
        self.max_model_len = max_model_len
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.preemptions = 0
        self.requests = 0
        self.dead = False
        self.auth_headers: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, *args: Any) -> None:  # keep test output clean
        return None

    @property
    def st(self) -> _State:
        return self.server.state

    # -- plumbing ---------------------------------------------------------

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"null")
        except ValueError:
            return None

    def _send(self, status: int, body: Any, ctype: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, typ: str = "BadRequestError") -> None:
        self._send(status, {"error": {"message": message, "type": typ, "param": None, "code": status}})

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _reset(self) -> None:
        # SO_LINGER 0: close() sends RST, the client sees a connection reset.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass

    def _bad_body(self) -> None:
        fault = self.st.fault
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if fault == "gzip-bomb":
            bomb = gzip_bomb()
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            try:
                self.wfile.write(bomb)
            except OSError:
                pass
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if fault == "trickle-body":
                self._chunk("{")
                while not self.st.stop.wait(0.05):
                    self._chunk(" ")
            else:
                self._chunk('{"object": "list", "data": [')
                block = " " * 65536
                while not self.st.stop.is_set():
                    self._chunk(block)
        except OSError:
            pass
        self.close_connection = True

    def _never(self) -> None:
        self.st.stop.wait(120)
        self.close_connection = True

    def _authorized(self) -> bool:
        if self.st.api_key is None or not self.path.startswith("/v1"):
            return True
        got = self.headers.get("Authorization", "")
        self.st.auth_headers.append(got)
        return got == f"Bearer {self.st.api_key}"

    def _applies(self, body: Any) -> bool:
        if self.st.where == "all":
            return True
        return isinstance(body, dict) and isinstance(body.get("prompt"), list)

    # -- routes -------------------------------------------------------------

    def do_GET(self) -> None:
        if self.st.fault == "never-answer":
            return self._never()
        if not self._authorized():
            return self._send(401, {"error": "Unauthorized"})
        if self.path == "/health":
            return self._send(500 if self.st.dead else 200, "" if not self.st.dead else {"error": "engine dead"})
        if self.path == "/health" and self.st.fault == "engine-dead" and self.st.dead:
            return self._send(503, "")
        if self.path == "/v1/models" and self.st.fault in ("trickle-body", "endless-body", "gzip-bomb"):
            return self._bad_body()
        if self.path == "/v1/models" and self.st.fault == "escapes":
            return self._send(200, {"object": "list", "data": [{"id": MODEL + ESCAPE, "object": "model", "root": ESCAPE,
                                                                 "max_model_len": self.st.max_model_len}]})
        if self.path == "/v1/models":
            return self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": MODEL, "object": "model", "root": "/models/tiny-llama", "max_model_len": self.st.max_model_len}
                    ],
                },
            )
        if self.path == "/metrics":
            with self.st.lock:
                running, pre = self.st.running, self.st.preemptions
            usage = min(1.0, running * 0.2)
            text = (
                "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                "# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{engine="0",model_name="tiny"}} {running}.0\n'
                "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
                "# TYPE vllm:num_requests_waiting gauge\n"
                'vllm:num_requests_waiting{engine="0",model_name="tiny"} 0.0\n'
                "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
                "# TYPE vllm:kv_cache_usage_perc gauge\n"
                f'vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} {usage}\n'
                "# HELP vllm:num_preemptions Cumulative number of preemption from the engine.\n"
                "# TYPE vllm:num_preemptions counter\n"
                f'vllm:num_preemptions_total{{engine="0",model_name="tiny"}} {pre}.0\n'
                "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                "# TYPE vllm:cache_config_info gauge\n"
                'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="512"} 1.0\n'
            )
            return self._send(200, text, "text/plain; version=0.0.4")
        return self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = self._body()
        if self.st.fault == "never-answer":
            return self._never()
        if not self._authorized():
            return self._send(401, {"error": "Unauthorized"})
        if self.path == "/tokenize":
            words = str((body or {}).get("prompt", "")).split()
            return self._send(200, {"count": len(words), "max_model_len": self.st.max_model_len, "tokens": [3 + (sum(map(ord, w)) % 500) for w in words]})
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            return self._send(404, {"detail": "Not Found"})
        if not isinstance(body, dict):
            return self._error(400, "invalid JSON body")
        if body.get("model") != MODEL:
            return self._error(404, f"The model `{body.get('model')}` does not exist. Valid aliases: {MODEL}.", "NotFoundError")
        prompt = body.get("prompt")
        n_prompt = len(prompt) if isinstance(prompt, list) else len(str(prompt or body.get("messages")).split())
        max_tokens = int(body.get("max_tokens") or 16)
        if max_tokens > self.st.max_model_len:
            return self._error(400, f"max_tokens={max_tokens} cannot be greater than max_model_len={self.st.max_model_len}. Please request fewer output tokens.")
        if n_prompt + max_tokens > self.st.max_model_len:
            return self._error(
                400,
                f"This model's maximum context length is {self.st.max_model_len} tokens. However, your prompt contains "
                f"{n_prompt} input tokens, which exceeds this limit. Please reduce the length of the input prompt.",
            )
        applies = self._applies(body)
        fault = self.st.fault if applies else "ok"
        if fault == "engine-dead":
            self.st.dead = True
            return self._error(500, ENGINE_DEAD, "InternalServerError")
        if fault in ("trickle-body", "endless-body") and not body.get("stream") and self.st.where == "all":
            return self._bad_body()
        if fault == "500":
            return self._error(500, "internal server error (injected)", "InternalServerError")
        if fault == "oom":
            self.st.dead = True
            return self._error(500, "CUDA out of memory. Tried to allocate 2.00 GiB", "InternalServerError")
        chat = self.path.endswith("chat/completions")
        if not body.get("stream"):
            choice = {"index": 0, "finish_reason": "length", **({"message": {"role": "assistant", "content": "hi"}} if chat else {"text": "hi"})}
            return self._send(200, {"id": "x", "object": "text_completion", "choices": [choice], "usage": {"prompt_tokens": n_prompt, "completion_tokens": 1, "total_tokens": n_prompt + 1}})
        self._stream(body, fault, chat, n_prompt, max_tokens)

    def _stream(self, body: dict, fault: str, chat: bool, n_prompt: int, max_tokens: int) -> None:
        with self.st.lock:
            self.st.running += 1
            self.st.requests += 1
            if fault == "preempt":
                self.st.preemptions += 1
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(max_tokens):
                if fault == "reset" and i == 2:
                    return self._reset()
                if fault == "stall" and i == 1:
                    self.st.stop.wait(120)
                    return self._reset()
                if fault == "trickle" and i == 1:
                    while not self.st.stop.wait(0.05):
                        self._chunk(": ping\n\n")
                    return self._reset()
                if fault == "slow":
                    time.sleep(0.05)
                if fault == "long-line" and i == 1:
                    while not self.st.stop.is_set():
                        self._chunk("x" * 65536)
                    return self._reset()
                if fault == "many-events" and i == 1:
                    empty = {"index": 0, "finish_reason": None, **({"delta": {"content": ""}} if chat else {"text": ""})}
                    line = "data: " + json.dumps({"id": "x", "choices": [empty]}) + "\n\n"
                    while not self.st.stop.is_set():
                        self._chunk(line * 64)
                    return self._reset()
                if fault == "escapes":
                    text = "a" + ESCAPE
                    choice = {"index": 0, "finish_reason": None, **({"delta": {"content": text}} if chat else {"text": text})}
                    self._chunk("data: " + json.dumps({"id": "x", "choices": [choice]}) + "\n\n")
                    continue
                if fault == "malformed" and i == 1:
                    self._chunk("data: {this is not json\n\n")
                    continue
                if fault == "no-choices" and i == 1:
                    self._chunk('data: {"id": "x", "object": "text_completion"}\n\n')
                    continue
                choice = {"index": 0, "finish_reason": None, **({"delta": {"content": "a"}} if chat else {"text": "a"})}
                self._chunk("data: " + json.dumps({"id": "x", "choices": [choice]}) + "\n\n")
                time.sleep(0.002)
            if fault != "no-done":
                usage = {"prompt_tokens": n_prompt, "completion_tokens": max_tokens, "total_tokens": n_prompt + max_tokens}
                self._chunk("data: " + json.dumps({"id": "x", "choices": [], "usage": usage}) + "\n\n")
                self._chunk("data: [DONE]\n\n")
            self._end_chunks()
        except OSError:
            self.close_connection = True
        finally:
            with self.st.lock:
                self.st.running -= 1


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:  # resets are the point here
        return None


class FaultServer:
    """``with FaultServer("reset") as srv: ... srv.base_url``"""

    def __init__(self, fault: str = "ok", *, where: str = "load", api_key: str | None = None, max_model_len: int = MAX_MODEL_LEN):
        self.state = _State(fault, where, api_key, max_model_len)
        self._httpd = _QuietServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.state = self.state  # type: ignore[attr-defined]
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.state.stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def closed_port() -> int:
    """A loopback port with nothing listening (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
