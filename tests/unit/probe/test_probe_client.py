"""URL normalisation, redaction and error classification at the HTTP boundary."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from oomguard.errors import InputError
from oomguard.probe.classes import ProbeClass
from oomguard.probe.client import (
    ClientFailure,
    ProbeClient,
    Redactor,
    classify_exception,
    classify_status,
    normalize_base_url,
    proxy_for,
)


@pytest.mark.parametrize(
    "given, root, had_v1, doubled",
    [
        ("http://h:8000", "http://h:8000", False, False),
        ("http://h:8000/", "http://h:8000", False, False),
        ("http://h:8000/v1", "http://h:8000", True, False),
        ("http://h:8000/v1/", "http://h:8000", True, False),
        ("http://h:8000/v1/v1", "http://h:8000", True, True),
        ("http://h:8000//v1//v1/", "http://h:8000", True, True),
        ("h:8000", "http://h:8000", False, False),
        ("https://gw.example/llm/v1", "https://gw.example/llm", True, False),
        ("http://h:8000/v1/chat/completions", "http://h:8000", True, False),
    ],
)
def test_normalize_base_url(given, root, had_v1, doubled):
    u = normalize_base_url(given)
    assert u.root == root
    assert u.api == root + "/v1"
    assert u.had_v1 is had_v1
    assert u.doubled_v1 is doubled


def test_normalize_notes_and_port():
    u = normalize_base_url("localhost:9000/v1/completions")
    assert u.port == 9000 and u.host == "localhost"
    assert any("assumed http" in n for n in u.notes)
    assert any("endpoint path" in n for n in u.notes)
    assert normalize_base_url("https://x").port == 443


def test_normalize_drops_userinfo():
    u = normalize_base_url("http://user:hunter2pass@h:8000/v1")
    assert "hunter2pass" not in u.given + u.root + u.api


@pytest.mark.parametrize("bad", ["", "   ", "ftp://h/v1", "http://:80", "http://h:notaport"])
def test_normalize_rejects(bad):
    with pytest.raises(InputError):
        normalize_base_url(bad)


def test_redactor_replaces_key_forms_and_bearer():
    r = Redactor([" sk-secret-abcdef123\n"])
    text = "key= sk-secret-abcdef123\n; stripped sk-secret-abcdef123; Authorization: Bearer other-token-xyz"
    out = r(text)
    assert "sk-secret-abcdef123" not in out
    assert "other-token-xyz" not in out
    assert "Bearer ***" in out


def test_redactor_scrubs_nested_and_ignores_tiny_keys():
    r = Redactor(["abcdef-key", "ab"])
    obj = {"a": ["x abcdef-key y", {"abcdef-key": 1}], "n": 3}
    assert "abcdef-key" not in json.dumps(r.scrub(obj))
    assert r("about a tab") == "about a tab"  # a 2-char "key" must not shred text


@pytest.mark.parametrize(
    "status, body, cls",
    [
        (401, {"error": "Unauthorized"}, ProbeClass.AUTH),
        (403, {"error": {"message": "forbidden"}}, ProbeClass.AUTH),
        (404, {"error": {"message": "The model `x` does not exist."}}, ProbeClass.MODEL_NOT_FOUND),
        (404, {"detail": "Not Found"}, ProbeClass.BAD_URL),
        (
            400,
            {"error": {"message": "This model's maximum context length is 1024 tokens. However, your prompt contains 2000 input tokens"}},
            ProbeClass.CONTEXT_TOO_LONG,
        ),
        (400, {"error": {"message": "Input length (2000) exceeds model's maximum context length (1024)."}}, ProbeClass.CONTEXT_TOO_LONG),
        (400, {"error": {"message": "temperature must be >= 0"}}, ProbeClass.BAD_REQUEST),
        (422, {"detail": [{"msg": "field required"}]}, ProbeClass.BAD_REQUEST),
        (500, "<html>boom</html>", ProbeClass.SERVER_ERROR),
        (503, {"error": {"message": "engine dead"}}, ProbeClass.SERVER_ERROR),
    ],
)
def test_classify_status(status, body, cls):
    assert classify_status(status, body).cls is cls


def _req() -> httpx.Request:
    return httpx.Request("GET", "http://h/")


@pytest.mark.parametrize(
    "exc, mid, cls, word",
    [
        (httpx.ConnectError("[Errno 111] Connection refused", request=_req()), False, ProbeClass.UNREACHABLE, "refused"),
        (httpx.ConnectError("[Errno -2] Name or service not known", request=_req()), False, ProbeClass.UNREACHABLE, "DNS"),
        (httpx.ConnectError("[SSL: WRONG_VERSION_NUMBER] wrong version number", request=_req()), False, ProbeClass.UNREACHABLE, "TLS"),
        (httpx.ConnectTimeout("timed out", request=_req()), False, ProbeClass.UNREACHABLE, "firewall"),
        (httpx.ReadTimeout("timed out", request=_req()), False, ProbeClass.TIMEOUT, "did not answer"),
        (httpx.ReadTimeout("timed out", request=_req()), True, ProbeClass.TIMEOUT, "stalled"),
        (httpx.RemoteProtocolError("peer closed connection", request=_req()), True, ProbeClass.STREAM_BROKEN, "mid-stream"),
        (httpx.ReadError("", request=_req()), False, ProbeClass.SERVER_ERROR, "without answering"),
        (httpx.ProxyError("502 Bad Gateway", request=_req()), False, ProbeClass.UNREACHABLE, "proxy"),
        (asyncio.TimeoutError(), False, ProbeClass.TIMEOUT, "time bound"),
    ],
)
def test_classify_exception(exc, mid, cls, word):
    failure = classify_exception(exc, mid_stream=mid)
    assert failure.cls is cls
    assert word.lower() in failure.detail.lower()


def test_proxy_for_respects_no_proxy():
    u = normalize_base_url("http://10.0.0.5:8000")
    assert proxy_for(u, {"HTTP_PROXY": "http://p:3128"}) == "http://p:3128"
    assert proxy_for(u, {"http_proxy": "http://p:3128", "no_proxy": "10.0.0.5"}) is None
    assert proxy_for(u, {"HTTP_PROXY": "http://p:3128", "NO_PROXY": "*"}) is None
    assert proxy_for(u, {"HTTPS_PROXY": "http://p:3128"}) is None  # http URL, only https proxy set
    v = normalize_base_url("http://gpu01.lab.example:8000")
    assert proxy_for(v, {"HTTP_PROXY": "http://p", "NO_PROXY": ".lab.example"}) is None


def test_client_sends_bearer_and_translates_errors():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        if request.url.path == "/boom":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return httpx.Response(200, json={"ok": True})

    async def go():
        async with ProbeClient(normalize_base_url("http://h/v1"), "k-123456", transport=httpx.MockTransport(handler)) as c:
            status, body = await c.get("/models")
            assert (status, body) == (200, {"ok": True})
            with pytest.raises(ClientFailure) as info:
                await c.get("/boom", api=False)
            return info.value

    failure = asyncio.run(go())
    assert failure.cls is ProbeClass.UNREACHABLE
    assert seen[0] == "Bearer k-123456"
