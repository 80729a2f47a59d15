"""SSE framing and the per-request record of a streamed completion."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from oomguard.probe.client import ProbeClient, normalize_base_url
from oomguard.probe.stream import MalformedSSE, RequestRecord, SSEParser, stream_request


def test_parser_events_comments_and_multiline():
    p = SSEParser()
    assert p.feed(": keep-alive") is None
    assert p.feed("event: message") is None
    assert p.feed("data: {\"a\":") is None
    assert p.feed("data: 1}") is None
    assert p.feed("") == b'{"a":\n1}'
    assert p.feed("") is None
    assert p.feed("data:[DONE]\r") is None
    assert p.flush() == b"[DONE]"


def test_parser_rejects_garbage_lines():
    with pytest.raises(MalformedSSE):
        SSEParser().feed("{\"choices\": []}")


def _run(body: str | None = None, status: int = 200, ctype: str = "text/event-stream", json_body=None, deadline=5.0):
    def handler(request: httpx.Request) -> httpx.Response:
        if json_body is not None:
            return httpx.Response(status, json=json_body)
        return httpx.Response(status, text=body, headers={"content-type": ctype})

    async def go():
        client = ProbeClient(normalize_base_url("http://h"), transport=httpx.MockTransport(handler))
        rec = RequestRecord(id=1, stage="s", prompt_tokens=5, max_tokens=3, t_start=0.0)
        await stream_request(client, "/completions", {"stream": True}, rec, clock_zero=time.perf_counter(), deadline_s=deadline)
        await client.aclose()
        return rec

    return asyncio.run(go())


GOOD = (
    'data: {"choices":[{"index":0,"text":"a"}]}\n\n'
    'data: {"choices":[{"index":0,"text":""}]}\n\n'
    'data: {"choices":[{"index":0,"text":"c","finish_reason":"length"}]}\n\n'
    'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\n'
    "data: [DONE]\n\n"
)


def test_good_stream_records_tokens_ttft_and_usage():
    rec = _run(GOOD)
    assert rec.ok and rec.done_seen and rec.usage_seen
    assert rec.output_chunks == 3  # the empty-text chunk is a token too (half a UTF-8 char)
    assert rec.output_tokens == 3 and rec.usage_prompt_tokens == 5
    assert rec.ttft_s is not None and len(rec.itl_s) == 2
    d = rec.to_json()
    assert d["itl_p50_s"] is not None and "itl_s" not in d


def test_chat_deltas_count():
    body = (
        'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
        'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
        "data: [DONE]\n\n"
    )
    rec = _run(body)
    assert rec.ok and rec.output_chunks == 2 and not rec.usage_seen


@pytest.mark.parametrize(
    "body, word",
    [
        ('data: {"choices":[{"text":"a"}]}\n\n', "without [DONE]"),
        ('data: {"choices":[{"text":"a"}]}\n\ndata: {oops\n\n', "not JSON"),
        ('{"choices": []}\n\n', "not an SSE line"),
        ('data: {"id": "x"}\n\n', "without choices"),
        ('data: [1, 2]\n\n', "not an object"),
    ],
)
def test_broken_streams(body, word):
    rec = _run(body)
    assert not rec.ok
    assert rec.cls == "stream-broken"
    assert word in rec.error


def test_error_inside_stream_is_classified():
    body = 'data: {"error": {"message": "This model\'s maximum context length is 1024 tokens.", "code": 400}}\n\n'
    rec = _run(body)
    assert rec.cls == "context-too-long" and "inside the stream" in rec.error


def test_http_error_and_wrong_content_type():
    rec = _run(status=404, json_body={"error": {"message": "The model `x` does not exist."}})
    assert rec.cls == "model-not-found" and rec.status == 404
    rec = _run('{"choices": []}', ctype="application/json")
    assert rec.cls == "stream-broken" and "content-type" in rec.error


def test_deadline_bounds_a_slow_transport():
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(10)
        return httpx.Response(200)

    async def go():
        client = ProbeClient(normalize_base_url("http://h"), transport=httpx.MockTransport(slow))
        rec = RequestRecord(id=1, stage="s", prompt_tokens=1, max_tokens=1, t_start=0.0)
        t = time.perf_counter()
        await stream_request(client, "/completions", {}, rec, clock_zero=t, deadline_s=0.2)
        await client.aclose()
        return rec, time.perf_counter() - t

    rec, took = asyncio.run(go())
    assert rec.cls == "timeout" and took < 2.0
