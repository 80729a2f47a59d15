"""``oomguard watch`` against the real vLLM 0.32 CPU server.

One dedicated server (it is stopped mid-watch): the watch runs as a
subprocess with ``--format json`` while a few threads drive completions
through it. It must see ``/metrics`` and the server's process RSS, fire the
KV alert set to a low threshold, compare the live KV pool with the plan of
the same launch, and, when the server is stopped, end on its own with a
``server-gone`` report carrying the last samples (exit 3), not hang.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]


def _drive(base_url: str, model: str, n: int, errors: list) -> list[threading.Thread]:
    def one() -> None:
        try:
            r = httpx.post(
                base_url + "/v1/completions",
                json={"model": model, "prompt": "hello " * 100, "max_tokens": 800, "ignore_eos": True},
                timeout=120,
            )
            if r.status_code != 200:
                errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
        except httpx.HTTPError as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def test_watch_sees_load_alerts_and_ends_cleanly_when_the_server_stops(vllm_server_factory, tiny_model_dir, tmp_path):
    server = vllm_server_factory()
    launch = tmp_path / "start_api.sh"
    launch.write_text(f"vllm serve {tiny_model_dir} --enforce-eager --kv-cache-memory-bytes 64M --max-model-len 1024\n")
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "oomguard.cli.main",
            "watch",
            "--base-url",
            server.base_url,
            "--interval",
            "0.25",
            "--duration",
            "120",
            "--alert-kv",
            "0.01",
            "--for",
            "0.5s",
            "--launch",
            str(launch),
            "--gpu",
            "A100-80GB",
            "--format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        time.sleep(2.0)  # a few idle samples first
        errors: list[str] = []
        for t in _drive(server.base_url, server.model, 16, errors):
            t.join(timeout=90)
        assert errors == []
        time.sleep(1.0)
        assert watch.poll() is None, watch.stderr.read()  # still watching a live server
        stopped = time.monotonic()
        server.stop()
        out, err = watch.communicate(timeout=30)  # must end by itself, promptly
        ended_after = time.monotonic() - stopped
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 3, err
    report = json.loads(out)
    assert report["ended_by"] == "server-gone"
    assert ended_after < 30
    # samples arrived from /metrics and from the server's process tree
    assert report["samples"]["metrics"] >= 8 and report["samples"]["rss"] >= 8
    peaks = report["peaks"]
    assert peaks["engine"]["running"]["value"] >= 1
    assert 0.01 < peaks["engine"]["kv_cache_usage"]["value"] < 1
    assert peaks["server_rss_bytes"]["value"] > 100 * 2**20
    # the low threshold fired, and is reported in the events (stderr) and the summary
    assert any(a["rule"] == "kv-cache-high" and a["fired_at"] is not None for a in report["alerts"])
    assert "ALERT kv-cache-high" in err
    # the live pool (vllm:cache_config_info) matches the plan of the same launch
    pc = report["plan_comparison"]
    assert pc["live_kv_cache_tokens"] == pc["predicted_kv_cache_tokens"] == 131072
    assert "pool" not in pc["warnings"]
    # a clean report: the reason and the last samples of each source
    gone = report["server_gone"]
    assert "exited" in gone["reason"] or "refused" in gone["reason"]
    assert "engine" in gone["last_samples"] and "server" in gone["last_samples"]
    assert gone["last_samples"]["engine"]["kv_cache_tokens"] == 131072
    assert report["events"][-1]["kind"] == "server-gone"
