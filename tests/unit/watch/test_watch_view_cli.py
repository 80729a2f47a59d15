"""What the operator sees: the live table, plain lines, the JSON contract, exit codes, bad input."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from rich.console import Console
from watch_fakes import FakeVllmServer, refused_port

from oomguard.probe.client import normalize_base_url
from oomguard.watch.config import WatchConfig, parse_duration
from oomguard.watch.monitor import Monitor
from oomguard.watch.sources import open_sources
from oomguard.watch.view import LineView, LiveView, sparkline

ROOT = Path(__file__).resolve().parents[3]


def oomguard(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "oomguard.cli.main", "watch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_sparkline_and_durations():
    assert sparkline([0, 0.5, 1.0], 0, 1) == "▁▅█"
    assert sparkline([3, 3, 3]) == "▁▁▁"
    assert len(sparkline(list(range(100)), width=30)) == 30
    assert parse_duration("90") == 90 and parse_duration("1m30s") == 90 and parse_duration("250ms") == 0.25
    assert parse_duration("1.5h") == 5400


def _monitor_with_view(view, srv, scrapes=8):
    cfg = WatchConfig(url=normalize_base_url(srv.base_url), interval_s=0.1, duration_s=60, hold_s=0.2, local=False)

    async def go():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        threading.Thread(
            target=lambda: srv.wait_scrapes(scrapes) and loop.call_soon_threadsafe(stop.set), daemon=True
        ).start()
        return await Monitor(cfg, open_sources(cfg), view).run(stop)

    return asyncio.run(go())


def test_live_view_draws_the_table():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=140, color_system=None)
    with FakeVllmServer() as srv:
        srv.kv, srv.running, srv.waiting = 0.97, 5, 2
        _monitor_with_view(LiveView(console), srv)
    out = buf.getvalue()
    assert "oomguard watch" in out and "KV cache" in out and "97.0%" in out
    assert "running / waiting" in out and "5 / 2" in out
    assert "FIRING" in out and "ALERT kv-cache-high" in out


def test_line_view_prints_events_and_status():
    buf = io.StringIO()
    with FakeVllmServer() as srv:
        srv.kv = 0.95
        _monitor_with_view(LineView(buf, status_every_s=0.2), srv)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("oomguard watch http://127.0.0.1:")
    assert any("KV cache 95.0%" in ln for ln in lines)
    assert any("ALERT kv-cache-high" in ln for ln in lines)


def test_cli_json_contract_and_server_gone_exit_code():
    srv = FakeVllmServer()
    srv.kv, srv.preemptions = 0.2, 1
    threading.Thread(target=lambda: srv.wait_scrapes(6) and srv.close(), daemon=True).start()
    started = time.monotonic()
    p = oomguard(
        "--base-url",
        srv.base_url + "/v1",
        "--interval",
        "0.2",
        "--duration",
        "60",
        "--remote",
        "--gone-after",
        "0.5s",
        "--alert-kv",
        "0.1",
        "--for",
        "0.4s",
        "--format",
        "json",
    )
    assert time.monotonic() - started < 40
    assert p.returncode == 3, p.stderr
    d = json.loads(p.stdout)
    assert d["ended_by"] == "server-gone" and d["base_url"] == srv.base_url
    assert d["alerts"][0]["rule"] == "kv-cache-high"
    assert d["server_gone"]["last_samples"]["engine"]["kv_cache_usage"] == 0.2
    assert "ALERT kv-cache-high" in p.stderr and "server gone" in p.stderr  # events on stderr


def test_cli_text_summary_and_exit_codes():
    with FakeVllmServer() as srv:
        srv.kv = 0.5
        p = oomguard("--base-url", srv.base_url, "--interval", "0.1", "--duration", "0.5", "--remote")
        assert p.returncode == 0, p.stderr
        assert "ended by duration" in p.stdout and "alerts: none fired" in p.stdout
        srv.kv = 0.95
        p = oomguard("--base-url", srv.base_url, "--interval", "0.1", "--duration", "3", "--remote", "--for", "0.2s")
        assert p.returncode == 1 and "fired at" in p.stdout
    p = oomguard("--base-url", f"http://127.0.0.1:{refused_port()}", "--duration", "5")
    assert p.returncode == 3 and "unreachable" in p.stdout


def test_cli_bad_input_is_one_line_exit_2():
    for args, needle in (
        (["--base-url", "http://x:1", "--interval", "soon"], "--interval 'soon' is not a duration"),
        (["--base-url", "http://x:1", "--alert-kv", "2"], "--alert-kv '2'"),
        (["--base-url", "ftp://x"], "scheme must be http or https"),
        (["--base-url", "http://x:1", "--launch", "/nonexistent/start_api.sh", "--remote"], "no such file"),
    ):
        p = oomguard(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert needle in p.stderr and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


def test_cli_compares_with_the_plan_of_a_launch(tmp_path):
    model = ROOT / "tests" / "unit" / "watch" / "data" / "tiny"  # the recorded server's model (KV 512 B/token)
    good = tmp_path / "start_api.sh"
    good.write_text(f"vllm serve {model} --enforce-eager --kv-cache-memory-bytes 64M --max-model-len 1024\n")
    small = tmp_path / "small.sh"
    small.write_text(f"vllm serve {model} --enforce-eager --kv-cache-memory-bytes 16M --max-model-len 1024\n")
    with FakeVllmServer() as srv:
        p = oomguard(
            "--base-url",
            srv.base_url,
            "--interval",
            "0.1",
            "--duration",
            "3",
            "--remote",
            "--launch",
            str(good),
            "--gpu",
            "A100-80GB",
            "--format",
            "json",
        )
        assert p.returncode == 0, p.stderr
        pc = json.loads(p.stdout)["plan_comparison"]
        assert pc["predicted_kv_cache_tokens"] == pc["live_kv_cache_tokens"] == 131072
        assert pc["warnings"] == []
        p = oomguard(
            "--base-url",
            srv.base_url,
            "--interval",
            "0.1",
            "--duration",
            "3",
            "--remote",
            "--launch",
            str(small),
            "--gpu",
            "A100-80GB",
        )
        assert "KV pool drift: the server allocated 131,072 tokens, the plan predicted 32,768" in p.stdout
        # the same comparison from vLLM flags given directly
        p = oomguard(
            "--base-url",
            srv.base_url,
            "--interval",
            "0.1",
            "--duration",
            "3",
            "--remote",
            "--gpu",
            "A100-80GB",
            "--model",
            str(model),
            "--kv-cache-memory-bytes",
            "16M",
            "--format",
            "json",
        )
        assert json.loads(p.stdout)["plan_comparison"]["predicted_kv_cache_tokens"] == 32768, p.stderr
