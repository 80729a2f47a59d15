"""probe's --model and --base-url through the real CLI (issue 20): an unknown --model is bad input
with the did-you-mean and the hint to --served-model-name; IPv6 base URLs work, malformed ones are
one-line bad input. The IPv6 case talks to a real HTTP server on ::1 (loopback only)."""

from __future__ import annotations

import json
import socket

import pytest

from oomguard.probe.client import normalize_base_url
from tests.conftest import run_cli
from tests.property import fuzzlib


def test_unknown_model_is_bad_input_with_both_hints():
    p = run_cli("probe", "--base-url", "http://127.0.0.1:9", "--model", "my-served-llama", "--no-local",
                env={"HF_HUB_OFFLINE": "1"}, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    (line,) = p.stderr.strip().splitlines()
    assert "--model:" in line and "oomguard models" in line
    assert "--served-model-name my-served-llama" in line


@pytest.mark.parametrize("command", [
    ["diagnose", "tests/fixtures/logs/v1-clean-start.log"],
    ["bundle", "tests/fixtures/logs/v1-clean-start.log"],
    ["watch", "--base-url", "http://127.0.0.1:9", "--duration", "1"],
    ["export", "launch", "--to", "docker", "--", "vllm", "serve", "Qwen/Qwen3-8B"],
])
def test_unknown_model_is_bad_input_everywhere(command):
    at = command.index("--") if "--" in command else len(command)
    argv = [*command[:at], "--model", "NoSuch/Model-7B", *command[at:]]
    p = run_cli(*argv, env={"HF_HUB_OFFLINE": "1"}, timeout=30)
    assert p.returncode == 2, (command, p.returncode, p.stderr)
    assert "did you mean" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("url, root", [
    ("http://[::1]:8000", "http://[::1]:8000"),
    ("[::1]:8000/v1", "http://[::1]:8000"),
    ("http://user:pw@[::1]:8000/v1/chat/completions", "http://[::1]:8000"),
    ("http://[fe80::1%25eth0]:8000", "http://[fe80::1%25eth0]:8000"),
])
def test_ipv6_urls_keep_their_brackets(url, root):
    u = normalize_base_url(url)
    assert u.root == root and u.port == 8000 and "pw" not in u.given


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1]:99999", "http://h:abc", "http://[]:80"])
def test_malformed_urls_are_one_line_bad_input(url):
    p = run_cli("probe", "--base-url", url, "--no-local", timeout=30)
    assert p.returncode == 2, (url, p.returncode, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "internal error" not in p.stderr


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_probe_against_a_server_on_ipv6_loopback():
    body = json.dumps({"object": "list", "data": [{"id": "tiny", "max_model_len": 64}]}).encode()
    resp = fuzzlib.Response(200, (("Content-Type", "application/json"),), body)
    with fuzzlib.ResponseServer(resp, host="::1") as srv:
        assert srv.base_url.startswith("http://[::1]:")
        argv = fuzzlib.probe_argv(srv.base_url)
        p = run_cli(*argv, env={fuzzlib.PROBE_KEY_ENV: "k"}, timeout=60)
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads(p.stdout)
    assert doc["verdict"] in ("pass", "fail") and "internal error" not in p.stderr
