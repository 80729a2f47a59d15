"""Streaming completions: a strict SSE reader and one timed request.

vLLM streams ``data: {json}`` events separated by blank lines and ends with
``data: [DONE]``; with ``stream_options.include_usage`` the last JSON chunk
carries ``usage``. Anything else (a line that is not an SSE field, a payload
that is not JSON, an end without ``[DONE]``, a cut connection) is a broken
stream: S2's "non-streaming works, streaming fails". Errors raised inside a
stream arrive as ``data: {"error": {...}}`` and are classified like HTTP errors.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from oomguard.probe.classes import ProbeClass
from oomguard.probe.classify import ClientFailure, classify_exception, classify_status
from oomguard.probe.client import MAX_BODY_BYTES, _Decoder, decode_bytes, read_capped

if TYPE_CHECKING:
    from oomguard.probe.client import ProbeClient

DONE = "[DONE]"
_DONE = b"[DONE]"
_IDENTITY = {"Accept-Encoding": "identity"}
_FIELDS = ("data", "event", "id", "retry")
# Bounds on what one stream may send (a server is not trusted to end it). vLLM's longest
# line is one chunk with logprobs, a few KiB; its events are one per token plus the role,
# usage and [DONE] ones (fewer with speculative decoding).
MAX_SSE_LINE_BYTES = 1 << 20
MAX_EVENT_SLACK = 64


def max_events(max_tokens: int) -> int:
    """Data events one stream of ``max_tokens`` may carry: 2 per token plus slack."""
    return 2 * max(0, int(max_tokens or 0)) + MAX_EVENT_SLACK


def max_stream_bytes(max_tokens: int) -> int:
    """Bytes one stream may carry in all: 64 MiB plus 16 KiB per requested token."""
    return (64 << 20) + 16384 * max(0, int(max_tokens or 0))


class MalformedSSE(Exception):
    pass


class SSEParser:
    """Line-at-a-time SSE decoder returning each event's data payload (bytes, as received).

    Works on bytes: ``json.loads`` takes them as they are, and the common line
    (``data: {...}``) costs one ``startswith`` and one slice.
    """

    def __init__(self, max_event_bytes: int = MAX_SSE_LINE_BYTES) -> None:
        self._data: list[bytes] = []
        self._size = 0
        self._max = max_event_bytes

    def _add(self, value: bytes) -> None:
        self._size += len(value)
        if self._size > self._max:
            raise MalformedSSE(f"one event's data is over {self._max // 1024} KiB")
        self._data.append(value)

    def feed(self, line: bytes | str) -> bytes | None:
        """Feed one line (without its newline). Returns a complete payload or None."""
        if isinstance(line, str):
            line = line.encode()
        if line.startswith(b"data: "):
            self._add(line[6:].rstrip(b"\r"))
            return None
        line = line.rstrip(b"\r")
        if not line:
            if not self._data:
                return None
            payload = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            self._data, self._size = [], 0
            return payload
        if line.startswith(b":"):
            return None  # comment / keep-alive
        name, sep, value = line.partition(b":")
        if not sep or name.decode(errors="replace") not in _FIELDS:
            raise MalformedSSE(f"not an SSE line: {line[:120].decode(errors='replace')!r}")
        if name == b"data":
            self._add(value[1:] if value.startswith(b" ") else value)
        return None

    def flush(self) -> bytes | None:
        """A payload left without its terminating blank line (tolerated at EOF)."""
        if not self._data:
            return None
        payload, self._data, self._size = b"\n".join(self._data), [], 0
        return payload


@dataclass
class RequestRecord:
    """One request as the load generator saw it. Times are seconds since run start."""

    id: int
    stage: str
    prompt_tokens: int
    max_tokens: int
    t_start: float
    t_end: float = 0.0
    ok: bool = False
    status: int | None = None
    cls: str | None = None
    error: str | None = None
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    output_chunks: int = 0
    usage_prompt_tokens: int | None = None
    usage_completion_tokens: int | None = None
    done_seen: bool = False
    usage_seen: bool = False

    @property
    def latency_s(self) -> float:
        return max(0.0, self.t_end - self.t_start)

    @property
    def output_tokens(self) -> int:
        return self.usage_completion_tokens if self.usage_completion_tokens is not None else self.output_chunks

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("itl_s")
        d["class"] = d.pop("cls")
        itl = sorted(self.itl_s)
        d["itl_mean_s"] = sum(itl) / len(itl) if itl else None
        d["itl_p50_s"] = itl[len(itl) // 2] if itl else None
        d["itl_max_s"] = itl[-1] if itl else None
        d["latency_s"] = self.latency_s
        d["output_tokens"] = self.output_tokens
        return d

    def fail(self, failure: ClientFailure) -> None:
        self.ok = False
        self.cls = failure.cls.value
        self.error = failure.detail
        if failure.status is not None:
            self.status = failure.status


def chunk_text(chunk: dict[str, Any]) -> str | None:
    """Text of a completions or chat chunk; None when the chunk has no choices."""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices:
        return None
    c0 = choices[0] if isinstance(choices[0], dict) else {}
    if "text" in c0:
        return c0.get("text") or ""
    delta = c0.get("delta")
    if isinstance(delta, dict):
        return delta.get("content") or delta.get("reasoning_content") or ""
    return ""


async def stream_request(
    client: ProbeClient,
    path: str,
    payload: dict[str, Any],
    record: RequestRecord,
    *,
    clock_zero: float,
    deadline_s: float,
    on_first_token: Any = None,
) -> RequestRecord:
    """Send one streaming request and fill ``record``. Never raises; never outlives ``deadline_s``."""
    try:
        await asyncio.wait_for(
            _stream(client, path, payload, record, clock_zero, on_first_token),
            timeout=max(0.001, deadline_s),
        )
    except ClientFailure as failure:
        record.fail(failure)
    except (asyncio.TimeoutError, TimeoutError):
        record.fail(
            ClientFailure(ProbeClass.TIMEOUT, f"request did not finish within {deadline_s:.1f}s")
        )
    except asyncio.CancelledError:
        record.fail(ClientFailure(ProbeClass.TIMEOUT, "cancelled at the run's time bound"))
        record.t_end = time.perf_counter() - clock_zero
        raise
    except Exception as exc:  # noqa: BLE001 - a probe must classify, not crash
        record.fail(classify_exception(exc, mid_stream=record.ttft_s is not None))
    record.t_end = time.perf_counter() - clock_zero
    return record


async def _stream(
    client: ProbeClient,
    path: str,
    payload: dict[str, Any],
    record: RequestRecord,
    clock_zero: float,
    on_first_token: Any,
) -> None:
    parser = SSEParser()
    last_token_t: float | None = None
    headers_seen = False
    try:
        async with client.http.stream("POST", client.full(path), json=payload, headers=_IDENTITY) as resp:
            headers_seen = True
            record.status = resp.status_code
            if resp.status_code >= 400:
                raw = await read_capped(resp, MAX_BODY_BYTES)
                raise classify_status(resp.status_code, decode_bytes(raw, resp.status_code, resp.headers.get("content-type", "")))
            ctype = resp.headers.get("content-type", "")
            if "text/event-stream" not in ctype:
                raw = await read_capped(resp, MAX_BODY_BYTES)
                body = decode_bytes(raw, resp.status_code, ctype)
                raise ClientFailure(
                    ProbeClass.STREAM_BROKEN,
                    f"asked for a stream but got content-type {ctype or 'none'!r}",
                    status=resp.status_code,
                    body=body,
                )
            # Lines are split here rather than with aiter_lines(): two fewer generator layers
            # per chunk, and a chunk is one token, so this is the probe's hottest loop.
            # We asked for identity; a server that compresses anyway goes through the capped decoder.
            encoding = resp.headers.get("content-encoding", "identity").lower()
            total_cap = max_stream_bytes(record.max_tokens)
            decoder = _Decoder(encoding, total_cap) if encoding not in ("", "identity") else None
            # (A response whose body is already in memory, as in tests, is read via aiter_bytes.)
            in_memory = resp.is_stream_consumed or hasattr(resp, "_content")
            chunks = resp.aiter_bytes() if in_memory else resp.aiter_raw()
            events_cap = max_events(record.max_tokens)
            events = 0
            received = 0
            pending = b""
            async for chunk in chunks:
                if decoder is not None and not in_memory:
                    chunk = decoder.feed(chunk)
                received += len(chunk)
                if received > total_cap:
                    raise ClientFailure(ProbeClass.STREAM_BROKEN, f"the stream sent over {total_cap >> 20} MiB for "
                                        f"{record.max_tokens} tokens; the probe stopped reading it")
                pending += chunk
                if b"\n" not in chunk:
                    if len(pending) > MAX_SSE_LINE_BYTES:
                        raise ClientFailure(ProbeClass.STREAM_BROKEN,
                                            f"malformed SSE: a line over {MAX_SSE_LINE_BYTES >> 10} KiB without a newline")
                    continue
                *complete, pending = pending.split(b"\n")
                if len(pending) > MAX_SSE_LINE_BYTES:
                    raise ClientFailure(ProbeClass.STREAM_BROKEN,
                                        f"malformed SSE: a line over {MAX_SSE_LINE_BYTES >> 10} KiB without a newline")
                for raw in complete:
                    if len(raw) > MAX_SSE_LINE_BYTES:
                        raise ClientFailure(ProbeClass.STREAM_BROKEN, f"malformed SSE: a line over {MAX_SSE_LINE_BYTES >> 10} KiB")
                    try:
                        data = parser.feed(raw)
                    except MalformedSSE as exc:
                        raise ClientFailure(ProbeClass.STREAM_BROKEN, f"malformed SSE: {exc}") from None
                    if data is None:
                        continue
                    events += 1
                    if events > events_cap:
                        raise ClientFailure(ProbeClass.STREAM_BROKEN, f"the stream sent more than {events_cap} events "
                                            f"for max_tokens={record.max_tokens} without [DONE]")
                    if _handle(data, record, clock_zero, on_first_token, last_token_t):
                        last_token_t = time.perf_counter() - clock_zero
                    if record.done_seen:
                        break
                if record.done_seen:
                    # Read the body to its end so the connection goes back to the pool; a
                    # server that keeps the stream open after [DONE] only loses its connection.
                    try:
                        await asyncio.wait_for(_drain(chunks), timeout=1.0)
                    except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - the answer is complete
                        pass
                    break
            if not record.done_seen and pending:
                try:
                    data = parser.feed(pending)
                except MalformedSSE as exc:
                    raise ClientFailure(ProbeClass.STREAM_BROKEN, f"malformed SSE: {exc}") from None
                if data is not None:
                    _handle(data, record, clock_zero, on_first_token, last_token_t)
            if not record.done_seen:
                tail = parser.flush()
                if tail is not None:
                    _handle(tail, record, clock_zero, on_first_token, last_token_t)
            if not record.done_seen:
                raise ClientFailure(
                    ProbeClass.STREAM_BROKEN,
                    f"stream ended without [DONE] after {record.output_chunks} chunks",
                    status=record.status,
                )
    except ClientFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - translated at the boundary
        raise classify_exception(exc, mid_stream=headers_seen) from None
    record.ok = True


def _snip(data: bytes) -> str:
    return repr(data[:120].decode("utf-8", errors="replace"))


async def _drain(chunks: Any) -> None:
    async for _ in chunks:
        pass


def _handle(
    data: bytes,
    record: RequestRecord,
    clock_zero: float,
    on_first_token: Any,
    last_token_t: float | None,
) -> bool:
    """Account one SSE payload; True when it carried generated text."""
    if data.strip() == _DONE:
        record.done_seen = True
        return False
    try:
        chunk = json.loads(data)
    except ValueError:
        raise ClientFailure(ProbeClass.STREAM_BROKEN, f"malformed SSE: payload is not JSON: {_snip(data)}") from None
    if not isinstance(chunk, dict):
        raise ClientFailure(ProbeClass.STREAM_BROKEN, f"malformed SSE: payload is not an object: {_snip(data)}")
    if "error" in chunk and not chunk.get("choices"):
        err = chunk["error"]
        code = err.get("code") if isinstance(err, dict) else None
        status = code if isinstance(code, int) and code >= 400 else 500
        failure = classify_status(status, chunk)
        failure.detail = f"error inside the stream: {failure.detail}"
        raise failure
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        record.usage_seen = True
        if isinstance(usage.get("prompt_tokens"), int):
            record.usage_prompt_tokens = usage["prompt_tokens"]
        if isinstance(usage.get("completion_tokens"), int):
            record.usage_completion_tokens = usage["completion_tokens"]
    text = chunk_text(chunk)
    if text is None:
        if not isinstance(usage, dict):
            raise ClientFailure(
                ProbeClass.STREAM_BROKEN, "chunk without choices (what clients report as 'reading choices')"
            )
        return False
    # An empty text still marks a generated token (byte-level BPE can emit
    # half a UTF-8 character), so every chunk with choices counts.
    now = time.perf_counter() - clock_zero
    record.output_chunks += 1
    if record.ttft_s is None:
        record.ttft_s = now - record.t_start
        if on_first_token is not None:
            on_first_token(record)
    elif last_token_t is not None:
        record.itl_s.append(now - last_token_t)
    return True

