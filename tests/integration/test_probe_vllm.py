"""``oomguard probe`` against the real vLLM 0.32 CPU server (tiny random Llama, loopback).

The passing case: every chain check passes, the long-prompt and concurrency
stages complete with exact prompt lengths, ``/metrics`` and the server's RSS
are sampled, the plan comparison sees vLLM's own pool, the HTML report is
written. Then the failures real vLLM produces on demand, each with its class:
a wrong model id, a missing key on a server started with ``--api-key``, a
doubled ``/v1``, a prompt over max-model-len. Prompts and outputs are tiny so
the file runs in about a minute on two cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vllm

from vllm_server import TEST_API_KEY as KEY  # noqa: E402  (the key of the shared keyed server)
# The fixture server: --kv-cache-memory-bytes 128M at 1 KiB/token (tiny model, float32) =
# 131,072 tokens, in CPU blocks of 128.
from vllm_server import TINY_KV_TOKENS  # noqa: E402
FAST = ["--output-tokens", "8", "--sample-interval", "0.2", "--timeout", "30", "--duration", "120", "--no-progress"]


def oomguard_probe(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "oomguard.cli.main", "probe", "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"no JSON (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.returncode, result, proc.stdout + proc.stderr


def checks(result: dict) -> dict:
    return {c["check"]: c for c in result["chain"]}


def test_probe_passes_on_real_vllm(vllm_server, tmp_path):
    report = tmp_path / "probe.html"
    rc, r, _ = oomguard_probe(
        "--base-url", vllm_server.base_url + "/v1", "--concurrency", "4",
        "--kv-cache-tokens", str(TINY_KV_TOKENS), "--block-size", "128", "--report", str(report), *FAST,
    )
    assert rc == 0, json.dumps(r["findings"], indent=1)
    assert r["verdict"] == "pass" and r["class"] is None
    failed = [c for c in r["chain"] if not c["ok"]]
    assert failed == [], failed
    assert checks(r)["error-400"]["detail"].startswith("HTTP 400")
    assert "does not exist" in checks(r)["error-404"]["detail"]

    stages = {s["name"]: s for s in r["stages"]}
    assert list(stages) == ["long-prompt", "concurrency-2", "concurrency-4"]
    assert stages["long-prompt"]["prompt_tokens"] == 1024 - 8
    # /tokenize-built prompts are exact: the server counted the very same number of tokens.
    assert all(q["usage_prompt_tokens"] == 1016 for q in r["requests"])
    assert all(q["output_tokens"] == 8 and q["ttft_s"] is not None for q in r["requests"])
    assert stages["concurrency-4"]["requests_ok"] == 4 and stages["concurrency-4"]["ttft_p99_s"] > 0

    assert r["server"]["pid"] == vllm_server.pid and r["server"]["alive_after"] is True
    assert r["samples"]["metrics"] and r["samples"]["rss"]
    assert r["peak"]["rss"]["rss_bytes"] > 200 * 2**20  # API server + EngineCore on CPU
    assert r["peak"]["metrics"]["kv_cache_tokens"] == TINY_KV_TOKENS
    assert r["peak"]["metrics"]["prefix_cache_hit_rate"] < 0.5  # prompts differ from the first block
    pc = r["plan_comparison"]
    assert pc["observed_kv_cache_tokens"] == TINY_KV_TOKENS and pc["kv_cache_tokens_difference"] == 0
    assert pc["kv_tokens_needed_at_claim"] == 4 * 1024

    html = report.read_text()
    assert "oomguard probe: PASS" in html and html.count("<svg") >= 3


def test_wrong_model_id_suggests_the_served_name(vllm_server):
    rc, r, _ = oomguard_probe("--base-url", vllm_server.base_url, "--served-model-name", "tinyllama", *FAST)
    assert rc == 1 and r["class"] == "model-not-found"
    c = checks(r)["models"]
    assert "--served-model-name tiny" in c["fix"]
    assert r["stages"] == []


def test_doubled_v1_is_a_bad_url(vllm_server):
    rc, r, _ = oomguard_probe("--base-url", vllm_server.base_url + "/v1/v1", *FAST)
    assert rc == 1 and r["class"] == "bad-url"
    c = checks(r)["base-url"]
    assert "answered HTTP 404" in c["detail"]  # the real server's answer to /v1/v1/models
    assert c["fix"].startswith(f"use --base-url {vllm_server.base_url}/v1")


def test_prompt_over_max_model_len_is_context_too_long(vllm_server):
    rc, r, _ = oomguard_probe("--base-url", vllm_server.base_url, "--max-model-len", "2048", "--concurrency", "1", *FAST)
    assert rc == 1 and r["class"] == "context-too-long"
    assert checks(r)["max-model-len"]["ok"] is False
    (req,) = r["requests"]
    assert req["status"] == 400 and "maximum context length is 1024" in req["error"]
    assert r["server"]["alive_after"] is True


def test_api_key_missing_then_right(vllm_server_with_key):
    server = vllm_server_with_key
    rc, r, text = oomguard_probe("--base-url", server.base_url, *FAST)
    assert rc == 1 and r["class"] == "auth"
    c = checks(r)["auth"]
    assert "--api-key" in c["detail"] and "--api-key-env" in c["fix"]

    env = {"ITEST_VLLM_KEY": KEY}
    rc, r, text = oomguard_probe(
        "--base-url", server.base_url, "--api-key-env", "ITEST_VLLM_KEY", "--concurrency", "2", *FAST, env=env
    )
    assert rc == 0, r["findings"]
    assert checks(r)["auth"]["detail"] == "a key was sent and accepted"
    assert KEY not in text

    rc, r, text = oomguard_probe("--base-url", server.base_url, "--api-key-env", "ITEST_VLLM_KEY", *FAST, env={"ITEST_VLLM_KEY": KEY + "\n"})
    assert rc == 1 and r["class"] == "auth" and "whitespace" in checks(r)["auth"]["detail"]
    assert KEY not in text


def test_engine_core_killed_under_load_is_an_engine_crash_with_the_log_diagnosed(vllm_server_factory, tmp_path):
    """Real vLLM: SIGKILL the EngineCore while the probe's load runs; probe says the engine crashed
    and, with --server-log, puts diagnose's reading of the real log in its report (issue 11.9)."""
    import signal
    import time

    import httpx
    import psutil

    server = vllm_server_factory()
    out = tmp_path / "probe.json"
    try:
        cores = [p for p in psutil.Process(server.pid).children(recursive=True)
                 if "EngineCore" in " ".join(p.cmdline()) or "EngineCore" in p.name()]
        assert cores, [p.cmdline() for p in psutil.Process(server.pid).children(recursive=True)]
        with open(out, "w") as fh:
            probe = subprocess.Popen(
                [sys.executable, "-m", "oomguard.cli.main", "probe", "--format", "json", "--base-url", server.base_url,
                 # a load far longer than the wait for it (40 waves of 900-token completions): the kill
                 # ends it; CI's fast clean machine finished 4 waves before the metrics poll saw one
                 "--concurrency", "2", "--waves", "40", "--output-tokens", "900", "--prompt-tokens", "64", "--server-log",
                 str(server.log_path), "--sample-interval", "0.2", "--timeout", "30", "--duration", "120",
                 "--no-progress"],
                stdout=fh, stderr=subprocess.PIPE, text=True)
            # wait until stage 2's requests are running in the engine, then kill it under them
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and probe.poll() is None:
                text = httpx.get(server.url("/metrics"), timeout=5).text
                running = [ln for ln in text.splitlines() if ln.startswith("vllm:num_requests_running")]
                if running and float(running[0].rsplit(" ", 1)[1]) >= 1:
                    break
                time.sleep(0.2)
            assert probe.poll() is None, "the probe ended before its load reached the engine"
            for p in cores:
                p.send_signal(signal.SIGKILL)
            _, err = probe.communicate(timeout=180)
        r = json.loads(out.read_text())
        assert probe.returncode == 1, (r["summary"], err[-2000:])
        assert r["engine_crashed"] is True, (r["summary"], r["notes"])
        assert any("engine crashed" in f["summary"] for f in r["findings"]) or "engine crashed" in r["summary"]
        assert r["server_log"]["file"] == str(server.log_path) and r["server_log"]["summary"]
    finally:
        server.stop()
