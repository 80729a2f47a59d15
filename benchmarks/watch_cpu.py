"""The CPU ``oomguard watch`` itself costs at a 1 s interval (target: under 2% of one core).

A loopback HTTP server (its own process) serves a real scrape of the vLLM
0.32 CPU server's ``/metrics`` (tests/unit/watch/data/, 50 kB, 609 lines).
The watch runs as a subprocess against it, on this host, so every sampler
this machine allows is active: ``/metrics``, the server process tree's RSS
(psutil), the kernel log (``/dev/kmsg`` or ``dmesg``), and NVML or
``nvidia-smi`` where present. Its CPU time comes from ``os.wait4`` (that
child only). Start-up (interpreter, imports, first contact) is taken out by
running each mode twice, for ``--short`` and ``--short + --seconds``
seconds, and dividing the difference in CPU time by the difference in
wall-clock time. Three modes: ``--format json`` (no view), plain lines, and
the live rich table (stdout on a pseudo-terminal).

    python benchmarks/watch_cpu.py [--seconds 30] [--short 5] [--interval 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METRICS = ROOT / "tests" / "unit" / "watch" / "data" / "vllm-0.32.0-metrics.txt"

SERVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
body = open(sys.argv[1], "rb").read()
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        data = body if self.path == "/metrics" else b""
        self.send_response(200 if self.path in ("/metrics", "/health") else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def run_watch(base_url: str, seconds: float, interval: float, mode: str) -> tuple[float, float, int]:
    """(cpu seconds, wall seconds, exit code) of one watch run."""
    args = [
        sys.executable,
        "-m",
        "oomguard.cli.main",
        "watch",
        "--base-url",
        base_url,
        "--interval",
        str(interval),
        "--duration",
        str(seconds),
        "--alert-kv",
        "off",
    ]
    if mode == "json":
        args += ["--format", "json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    started = time.monotonic()
    if mode == "live":
        import pty

        master, slave = pty.openpty()
        p = subprocess.Popen(args, stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
        os.close(slave)
        # drain the terminal so the watch never blocks on a full pty
        while True:
            try:
                if not os.read(master, 65536):
                    break
            except OSError:
                break
        os.close(master)
    else:
        p = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, cwd=ROOT
        )
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    return usage.ru_utime + usage.ru_stime, wall, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="measured span (default 30)")
    ap.add_argument("--short", type=float, default=5.0, help="the start-up baseline run (default 5)")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--modes", default="json,lines,live")
    args = ap.parse_args()

    server = subprocess.Popen([sys.executable, "-c", SERVER, str(METRICS)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        base_url = f"http://127.0.0.1:{port}"
        print(f"loopback /metrics server pid {server.pid} on {base_url} serving {METRICS.stat().st_size:,} bytes")
        print(
            f"interval {args.interval:g}s; steady state = (CPU of a {args.short + args.seconds:g}s run - CPU of a {args.short:g}s run) / wall difference"
        )
        print(
            f"{'mode':8} {'short cpu s':>11} {'long cpu s':>10} {'wall diff s':>11} {'steady % of a core':>19} {'whole run %':>11}"
        )
        worst = 0.0
        for mode in args.modes.split(","):
            c1, w1, rc1 = run_watch(base_url, args.short, args.interval, mode)
            c2, w2, rc2 = run_watch(base_url, args.short + args.seconds, args.interval, mode)
            if rc1 != 0 or rc2 != 0:
                print(f"{mode}: watch exited {rc1}/{rc2}", file=sys.stderr)
                return 1
            steady = 100.0 * (c2 - c1) / (w2 - w1)
            worst = max(worst, steady)
            print(f"{mode:8} {c1:11.2f} {c2:10.2f} {w2 - w1:11.1f} {steady:19.2f} {100.0 * c2 / w2:11.2f}")
        verdict = "PASS" if worst < 2.0 else "FAIL"
        print(
            f"watch CPU at a {args.interval:g}s interval: {worst:.2f}% of one core in the worst mode (target < 2%): {verdict}"
        )
        return 0 if worst < 2.0 else 1
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
