"""probe bounded by construction and safe to print (issue 13.3, 13.4, 11.9).

Against the loopback fault server: bounds that must be finite, escape sequences a server
sends, JSON that stays JSON whatever the key holds, and ``--server-log`` feeding diagnose.
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))

from fault_server import ESCAPE, FaultServer  # noqa: E402

from oomguard.cli.main import main  # noqa: E402
from oomguard.probe.classify import ClientFailure  # noqa: E402
from oomguard.probe.client import _Decoder  # noqa: E402

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
FAST = ["--sample-interval", "0.1", "--timeout", "2", "--stall-timeout", "2", "--duration", "20", "--no-progress"]


def probe_cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["probe", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("opt", ["--timeout", "--duration", "--stall-timeout", "--request-timeout",
                                 "--connect-timeout", "--sample-interval", "--gpu-margin-gib", "--max-gpu-mem-gib"])
@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e999"])
def test_bounds_must_be_finite(capsys, opt, value):
    rc, out, err = probe_cli(capsys, "--base-url", "http://127.0.0.1:9", f"{opt}={value}")
    assert rc == 2
    assert "finite" in err and opt in err
    assert "Traceback" not in err and out == ""


def test_a_bound_over_a_day_is_refused(capsys):
    rc, _, err = probe_cli(capsys, "--base-url", "http://127.0.0.1:9", "--duration", "1e9")
    assert rc == 2 and "at most 86400" in err


def test_terminal_escapes_never_reach_the_output(capsys, tmp_path):
    report = tmp_path / "r.html"
    with FaultServer("escapes", where="all") as srv:
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "64", "--report", str(report), *FAST)
        rc_json, out_json, _ = probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "64", "--format", "json", *FAST)
    for text in (out, out_json, report.read_text()):
        assert "\x1b" not in text and "\x07" not in text
        assert "\\u001b" not in text  # not even JSON-escaped: stripped before serialization
    assert "pwned" in out  # the printable rest stays readable
    json.loads(out_json)


@pytest.mark.parametrize("key", ['k"ey\\with-quote-123', "back\\slash\\key-123", 'sk-"quoted"-0123456789abcdef'])
def test_json_stays_json_whatever_the_key_holds(capsys, monkeypatch, key):
    monkeypatch.setenv("PROBE_KEY", key)
    with FaultServer("ok", api_key="something-else") as srv:  # refused: the key shows up in errors
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url, "--api-key-env", "PROBE_KEY", "--format", "json", *FAST)
    assert rc == 1
    d = json.loads(out)  # the old text-level redactor ate the backslash of \" here
    assert d["class"] == "auth"
    assert key not in out and json.dumps(key)[1:-1] not in out


def test_engine_crash_with_server_log_takes_the_logs_class(capsys, tmp_path):
    log = tmp_path / "server.log"
    log.write_text((LOGS / "v1-runtime-oom.log").read_text())
    with FaultServer("engine-dead") as srv:
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "256", "--server-log", str(log),
                               "--format", "json", *FAST)
    assert rc == 1
    d = json.loads(out)
    assert d["engine_crashed"] is True
    assert d["class"] == "runtime-oom", d["summary"]
    assert "engine crashed" in d["summary"] and "server log says runtime-oom" in d["summary"]
    assert d["server_log"]["verdicts"][0]["class"] == "runtime-oom"
    assert any(str(log) in e for e in d["findings"][0]["evidence"])


def test_engine_crash_text_and_html_show_the_log_verdict(capsys, tmp_path):
    log = tmp_path / "server.log"
    log.write_text((LOGS / "v1-runtime-oom.log").read_text())
    report = tmp_path / "r.html"
    with FaultServer("engine-dead") as srv:
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "256", "--server-log", str(log),
                               "--report", str(report), *FAST)
    assert rc == 1
    assert "server log" in out and "runtime-oom" in out
    html = report.read_text()
    assert "<h2>Server log</h2>" in html and "runtime-oom" in html


def test_engine_crash_without_a_log_says_so_and_points_at_server_log(capsys):
    with FaultServer("engine-dead") as srv:
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "256", *FAST)
    assert rc == 1
    assert "engine crashed" in out and "--server-log" in out


def test_server_log_that_cannot_be_read_is_bad_input_before_the_load(capsys, tmp_path):
    rc, _, err = probe_cli(capsys, "--base-url", "http://127.0.0.1:9", "--server-log", str(tmp_path / "missing.log"))
    assert rc == 2 and "missing.log" in err
    rc, _, err = probe_cli(capsys, "--base-url", "http://127.0.0.1:9", "--server-log", str(tmp_path))
    assert rc == 2 and "not a regular file" in err


def test_healthy_probe_with_a_clean_log_passes(capsys, tmp_path):
    log = tmp_path / "server.log"
    log.write_text((LOGS / "v1-clean-start.log").read_text())
    with FaultServer("ok") as srv:
        rc, out, _ = probe_cli(capsys, "--base-url", srv.base_url, "--max-model-len", "256", "--concurrency", "2",
                               "--server-log", str(log), "--format", "json", *FAST)
    d = json.loads(out)
    assert rc == 0 and d["verdict"] == "pass"
    assert d["server_log"]["verdicts"] == []


# --- the decoder's cap, without a server -------------------------------------------------------


def test_decoder_stops_a_single_member_bomb_at_the_cap():
    bomb = gzip.compress(b"\0" * (64 << 20))  # one member, 64 MiB inflated, ~64 KiB on the wire
    d = _Decoder("gzip", 1 << 20)
    with pytest.raises(ClientFailure, match="over 1 MiB after decompression"):
        for i in range(0, len(bomb), 16384):
            d.feed(bomb[i:i + 16384])
    assert d.out <= (1 << 20) + 1


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS])
def test_decoder_reads_both_deflate_forms(wbits):
    c = zlib.compressobj(wbits=wbits)
    data = c.compress(b'{"a": 1}') + c.flush()
    assert _Decoder("deflate", 1 << 20).feed(data) == b'{"a": 1}'


def test_decoder_refuses_what_it_did_not_ask_for():
    with pytest.raises(ClientFailure, match="did not ask for"):
        _Decoder("br", 1 << 20)
    with pytest.raises(ClientFailure, match="not valid gzip"):
        _Decoder("gzip", 1 << 20).feed(b"this is not gzip at all")


def test_escape_constant_is_what_the_server_sends():
    assert "\x1b" in ESCAPE
