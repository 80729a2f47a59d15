"""``oomguard probe`` end to end on the fault server: exit codes, JSON contract, redaction, HTML.

The HTML check opens the report in a real headless Chromium (Debian's
``chromium`` package) and reads the screenshot's pixels: the charts must draw
in their series colours. It is skipped when no Chromium is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))

from fault_server import FaultServer  # noqa: E402

from oomguard.cli.main import main  # noqa: E402

KEY = "sk-probe-test-key-0123456789"
FAST = ["--sample-interval", "0.1", "--timeout", "2", "--stall-timeout", "2", "--duration", "20", "--no-progress"]


def probe_cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["probe", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_pass_exit_zero_and_json_contract(capsys):
    with FaultServer("ok") as srv:
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url + "/v1", "--max-model-len", "256", "--concurrency", "2", "--format", "json", *FAST)
    assert rc == 0
    d = json.loads(out)
    for key in ("verdict", "class", "chain", "stages", "samples", "peak", "plan_comparison"):
        assert key in d
    assert d["verdict"] == "pass" and d["class"] is None and d["plan_comparison"] is None
    assert {"check", "ok", "detail", "fix"} <= set(d["chain"][0])
    s = d["stages"][0]
    for key in ("prompt_tokens", "concurrency", "requests_ok", "requests_failed", "ttft_p50_s", "ttft_p99_s"):
        assert key in s
    assert all("t" in row for rows in d["samples"].values() for row in rows)
    assert "metrics" in d["samples"] and "client" in d["samples"]


def test_fail_exit_one_with_class(capsys):
    with FaultServer("reset") as srv:
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "256", "--format", "json", *FAST)
    assert rc == 1
    d = json.loads(out)
    assert d["verdict"] == "fail" and d["class"] == "stream-broken"


def test_plan_comparison_from_kv_cache_tokens(capsys):
    with FaultServer("ok") as srv:
        rc, out, _ = probe_cli(
            capsys, "--base-url", srv.base_url, "--max-model-len", "256", "--concurrency", "4",
            "--kv-cache-tokens", "8192", "--block-size", "16", "--format", "json", *FAST,
        )
    pc = json.loads(out)["plan_comparison"]
    assert pc["predicted_kv_cache_tokens"] == 8192 and pc["observed_kv_cache_tokens"] == 8192
    assert pc["claimed_concurrency"] == 4 and pc["kv_tokens_needed_at_claim"] == 4 * 256


@pytest.mark.parametrize(
    "args, env, word",
    [
        (["--api-key-env", "OOMGUARD_TEST_NO_SUCH_VAR"], {}, "not set"),
        (["--concurrency", "0"], {}, "--concurrency must be positive"),
        (["--duration", "-1"], {}, "--duration must be positive"),
    ],
)
def test_bad_input_exit_two(capsys, monkeypatch, args, env, word):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    rc, out, err = probe_cli(capsys, "--base-url", "http://127.0.0.1:1", *args)
    assert rc == 2 and word in err and "Traceback" not in err


def test_bad_url_exit_two(capsys):
    rc, _, err = probe_cli(capsys, "--base-url", "ftp://x/v1")
    assert rc == 2 and "scheme" in err


@pytest.mark.parametrize("key_value, cls", [(KEY, None), ("wrong-" + KEY, "auth"), (KEY + "\n", "auth")])
def test_key_never_appears_in_any_output(capsys, monkeypatch, tmp_path, key_value, cls):
    monkeypatch.setenv("PROBE_KEY", key_value)
    report = tmp_path / "r.html"
    with FaultServer("ok", api_key=KEY) as srv:
        outputs = []
        for fmt in ("json", "text"):
            rc, out, err = probe_cli(
                capsys, "--base-url", srv.base_url, "--api-key-env", "PROBE_KEY", "--max-model-len", "128",
                "--concurrency", "2", "--format", fmt, "--report", str(report), *FAST,
            )
            outputs += [out, err, report.read_text()]
        sent = [h for h in srv.state.auth_headers if h]
    blob = "\n".join(outputs)
    for secret in {key_value, key_value.strip(), KEY}:
        assert secret not in blob
    assert json.loads(outputs[0])["class"] == cls
    if cls is None:
        assert sent and all(h == f"Bearer {KEY}" for h in sent)  # the key was really used


def test_report_is_self_contained(capsys, tmp_path):
    report = tmp_path / "r.html"
    with FaultServer("preempt") as srv:
        probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "512", "--output-tokens", "60", "--concurrency", "8", "--report", str(report), *FAST)
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 4
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html and "<script" not in html
    for title in ("KV-cache usage", "Requests in flight", "TTFT distribution", "Server process tree RSS"):
        assert title in html


# -- the report in a real browser --------------------------------------------------------


def _png_rgb(path: Path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) into rows of pixels."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="no chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(capsys, tmp_path):
    report = tmp_path / "r.html"
    with FaultServer("preempt") as srv:
        probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "512", "--output-tokens", "60", "--concurrency", "8", "--report", str(report), *FAST)
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,1600",
            f"--screenshot={shot}", "--enable-logging=stderr", "--v=0", report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stderr[-2000:]
    assert "Uncaught" not in proc.stderr and "Failed to load resource" not in proc.stderr
    width, bpp, rows = _png_rgb(shot)
    # The KV-usage and in-flight series are drawn in #1f77b4 (blue) and #d62728 (red).
    def count(rgb: tuple[int, int, int]) -> int:
        target = bytes(rgb)
        return sum(
            1 for row in rows for x in range(0, width * bpp, bpp) if row[x : x + 3] == target
        )

    non_white = sum(1 for row in rows[::4] for x in range(0, width * bpp, bpp * 4) if row[x : x + 3] != b"\xff\xff\xff")
    assert non_white > 1000, "blank screenshot"
    assert count((0x1F, 0x77, 0xB4)) > 200, "series lines not drawn"
    assert count((0xD6, 0x27, 0x28)) > 50


def test_launch_supplies_claims_plan_and_secrets(capsys, tmp_path):
    launch = tmp_path / "start_api.sh"
    launch.write_text(
        "#!/bin/bash\nexport VLLM_API_KEY=env-key-should-not-leak\n"
        "vllm serve Qwen/Qwen2.5-0.5B-Instruct --served-model-name tiny \\\n"
        "  --max-model-len 256 --max-num-seqs 2 --api-key sk-launch-secret-999\n"
    )
    with FaultServer("ok", api_key="sk-launch-secret-999") as srv:
        import os

        os.environ["PROBE_LAUNCH_KEY"] = "sk-launch-secret-999"
        try:
            rc, out, err = probe_cli(
                capsys, "--base-url", srv.base_url, "--launch", str(launch), "--gpu-memory-gib", "24",
                "--api-key-env", "PROBE_LAUNCH_KEY", "--format", "json", *FAST,
            )
        finally:
            del os.environ["PROBE_LAUNCH_KEY"]
    d = json.loads(out)
    assert rc == 0, d["findings"]
    assert d["server"]["probed_max_model_len"] == 256 and d["server"]["model"] == "tiny"
    assert [s["concurrency"] for s in d["stages"]] == [1, 2]  # --max-num-seqs 2 is the claim
    pc = d["plan_comparison"]
    assert pc["source"].startswith("oomguard plan of") and pc["predicted_kv_cache_tokens"] > 0
    assert pc["observed_kv_cache_tokens"] == 8192 and pc["claimed_concurrency"] == 2
    assert "sk-launch-secret-999" not in out + err and "env-key-should-not-leak" not in out + err


def test_launch_without_gpu_notes_why_no_plan(capsys, tmp_path):
    launch = tmp_path / "start_api.sh"
    launch.write_text("vllm serve Qwen/Qwen2.5-0.5B-Instruct --served-model-name tiny --max-model-len 128\n")
    with FaultServer("ok") as srv:
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url, "--launch", str(launch), "--concurrency", "1", "--format", "json", *FAST)
    d = json.loads(out)
    assert rc == 0 and d["plan_comparison"] is None
    assert any("--gpu" in n for n in d["notes"])


def test_launch_file_missing_is_bad_input(capsys, tmp_path):
    rc, _, err = probe_cli(capsys, "--base-url", "http://127.0.0.1:1", "--launch", str(tmp_path / "nope.sh"))
    assert rc == 2 and "nope.sh" in err
