"""Test doubles for watch: a loopback HTTP server serving recorded vLLM 0.32 ``/metrics``.

``data/vllm-0.32.0-metrics.txt`` is a real scrape of the vLLM 0.32 CPU
server (tiny model, six requests in flight). The server rewrites the four
series the watch reads (KV usage, running, waiting, preemptions) from
settable attributes, so a test can script a load pattern. ``hang`` makes it
accept connections and never answer; ``close()`` makes it go away.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

METRICS_TEXT = (Path(__file__).parent / "data" / "vllm-0.32.0-metrics.txt").read_text()

_SERIES = {
    "kv": re.compile(r"^(vllm:kv_cache_usage_perc\{[^}]*\}) \S+$", re.M),
    "running": re.compile(r"^(vllm:num_requests_running\{[^}]*\}) \S+$", re.M),
    "waiting": re.compile(r"^(vllm:num_requests_waiting\{[^}]*\}) \S+$", re.M),
    "preemptions": re.compile(r"^(vllm:num_preemptions_total\{[^}]*\}) \S+$", re.M),
}


def render_metrics(
    kv: float = 0.0, running: float = 0, waiting: float = 0, preemptions: float = 0, text: str = METRICS_TEXT
) -> str:
    values = {"kv": kv, "running": running, "waiting": waiting, "preemptions": preemptions}
    for name, rx in _SERIES.items():
        text = rx.sub(lambda m, v=values[name]: f"{m.group(1)} {float(v)!r}", text)
    return text


class FakeVllmServer:
    """``with FakeVllmServer() as s: s.kv = 0.95; ... s.base_url``"""

    def __init__(self) -> None:
        self.kv = 0.0
        self.running = 0.0
        self.waiting = 0.0
        self.preemptions = 0.0
        self.hang = False
        self.status = 200
        self.scrapes = 0
        self.on_scrape = None  # called with the scrape number before answering (scripted load)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                return None

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if fake.hang:
                    time.sleep(30)
                    return
                if self.path == "/metrics":
                    fake.scrapes += 1
                    if fake.on_scrape is not None:
                        fake.on_scrape(fake.scrapes)
                    body = render_metrics(fake.kv, fake.running, fake.waiting, fake.preemptions).encode()
                    self.send_response(fake.status)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                elif self.path == "/health":
                    body = b""
                    self.send_response(200)
                else:
                    body = b'{"detail":"Not Found"}'
                    self.send_response(404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def wait_scrapes(self, n: int, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while self.scrapes < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.scrapes >= n

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeVllmServer:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        except OSError:
            pass


def refused_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
