"""Failures at the HTTP boundary, classified: third-party errors become a probe class here.

httpx (and, under the optional fast transport, aiohttp) raise their own
exceptions; an HTTP error answer carries vLLM's or a gateway's error body.
Both are turned into a :class:`ClientFailure` with a :class:`ProbeClass` and
a one-line reason that names what happened (refused, DNS, TLS, stalled, cut
mid-stream, context too long, ...), so nothing past this module needs to know
which library failed.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from typing import Any

from oomguard.probe.classes import ProbeClass


@dataclass
class ClientFailure(Exception):
    """A request that did not produce a usable answer, already classified."""

    cls: ProbeClass
    detail: str
    status: int | None = None
    body: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.cls.value}: {self.detail}"


def _chain_text(exc: BaseException) -> str:
    """The messages of an exception and its causes, joined (httpx wraps OSErrors)."""
    seen: list[str] = []
    cur: BaseException | None = exc
    while cur is not None and len(seen) < 6:
        seen.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    return " <- ".join(seen)


def _reason(exc: BaseException) -> str:
    """The first non-empty message along the cause chain (httpx often wraps an empty one)."""
    cur: BaseException | None = exc
    for _ in range(6):
        if cur is None:
            break
        if str(cur):
            return str(cur)
        if isinstance(cur, ConnectionResetError):
            return "connection reset by peer"
        cur = cur.__cause__ or cur.__context__
    return type(exc).__name__


def _has_cause(exc: BaseException, kind: type) -> bool:
    cur: BaseException | None = exc
    for _ in range(8):
        if cur is None:
            return False
        if isinstance(cur, kind):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _aiohttp_cause(exc: BaseException) -> str | None:
    """The aiohttp exception behind an httpx one (the optional fast transport maps them
    coarsely: a server disconnect arrives as ConnectTimeout)."""
    cur: BaseException | None = exc.__cause__
    for _ in range(4):
        if cur is None:
            return None
        if type(cur).__module__.startswith("aiohttp"):
            return type(cur).__name__
        cur = cur.__cause__ or cur.__context__
    return None


def classify_exception(exc: BaseException, *, mid_stream: bool = False) -> ClientFailure:
    """Map an httpx (or asyncio) exception to a probe class and a plain reason."""
    import asyncio

    import httpx

    text = _chain_text(exc)
    low = text.lower()
    aio = _aiohttp_cause(exc)
    if aio in ("ServerDisconnectedError", "ClientPayloadError", "ClientOSError", "ContentLengthError", "TransferEncodingError"):
        why = _reason(exc.__cause__ or exc)
        if mid_stream:
            return ClientFailure(ProbeClass.STREAM_BROKEN, f"connection cut mid-stream ({why})")
        return ClientFailure(ProbeClass.SERVER_ERROR, f"server closed the connection without answering ({why})")
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not isinstance(
        exc, httpx.TimeoutException
    ):
        return ClientFailure(ProbeClass.TIMEOUT, "request exceeded its time bound")
    if isinstance(exc, httpx.ConnectTimeout):
        return ClientFailure(
            ProbeClass.UNREACHABLE,
            "connect timed out: the host dropped the connection attempt (firewall, wrong host or port)",
        )
    if isinstance(exc, httpx.PoolTimeout):
        return ClientFailure(ProbeClass.TIMEOUT, "no free connection in the client pool in time")
    if isinstance(exc, httpx.ReadTimeout):
        if mid_stream:
            return ClientFailure(ProbeClass.TIMEOUT, "the stream stalled: no bytes within the stall timeout")
        return ClientFailure(
            ProbeClass.TIMEOUT, "the server accepted the connection but did not answer within the read timeout"
        )
    if isinstance(exc, httpx.WriteTimeout):
        return ClientFailure(ProbeClass.TIMEOUT, "sending the request timed out")
    if isinstance(exc, httpx.ProxyError):
        return ClientFailure(ProbeClass.UNREACHABLE, f"the HTTP proxy failed: {exc}")
    if isinstance(exc, httpx.ConnectError):
        if _has_cause(exc, ssl.SSLError) or "ssl" in low or "certificate" in low:
            return ClientFailure(ProbeClass.UNREACHABLE, f"TLS handshake failed: {exc}")
        if any(
            s in low
            for s in (
                "name or service not known",
                "nodename nor servname",
                "temporary failure in name resolution",
                "no address associated",
                "getaddrinfo failed",
                "name resolution",
            )
        ):
            return ClientFailure(ProbeClass.UNREACHABLE, f"DNS lookup failed: {exc}")
        if "refused" in low:
            return ClientFailure(
                ProbeClass.UNREACHABLE, "connection refused: nothing listens on that host and port"
            )
        return ClientFailure(ProbeClass.UNREACHABLE, f"cannot connect: {exc}")
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        why = _reason(exc)
        if mid_stream:
            return ClientFailure(ProbeClass.STREAM_BROKEN, f"connection cut mid-stream ({why})")
        return ClientFailure(ProbeClass.SERVER_ERROR, f"server closed the connection without answering ({why})")
    if isinstance(exc, httpx.LocalProtocolError):
        return ClientFailure(ProbeClass.BAD_REQUEST, f"the client could not send the request: {exc}")
    if isinstance(exc, httpx.WriteError):
        return ClientFailure(ProbeClass.SERVER_ERROR, f"server closed the connection while we sent: {exc}")
    if isinstance(exc, httpx.HTTPError):
        return ClientFailure(ProbeClass.SERVER_ERROR, f"{type(exc).__name__}: {exc}")
    return ClientFailure(ProbeClass.UNKNOWN, text)


def error_message(body: Any) -> str:
    """The human message inside vLLM/OpenAI error bodies of any vintage."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(err.get(key), str):
                    return err[key]
        if isinstance(err, str):
            return err
        detail = body.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):
            return str(detail[0].get("msg", detail[0]))
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str):
        return body[:300]
    return ""


_CONTEXT = re.compile(
    r"maximum context length|exceeds (the )?model'?s maximum|context length|max_model_len|"
    r"too long|maximum number of tokens",
    re.IGNORECASE,
)


# What vLLM answers once its engine process died: V1's EngineDeadError
# (vllm/v1/engine/exceptions.py, 0.8+: "EngineCore encountered an issue. See stack trace
# (above) for the root cause.", HTTP 500 or an error event inside the stream) and V0's
# AsyncEngineDeadError ("Background loop has errored already.", 0.6-0.7).
_ENGINE_DEAD = re.compile(
    r"EngineCore encountered an issue|EngineDeadError|Background loop has errored|"
    r"Background loop is not running|engine core (?:process )?(?:died|is dead)",
    re.IGNORECASE,
)
ENGINE_CRASHED = "the engine crashed"


def engine_crashed(text: str | None) -> bool:
    """The server's words say its engine process died (the API server may still answer)."""
    return bool(text) and _ENGINE_DEAD.search(text) is not None


def classify_status(status: int, body: Any) -> ClientFailure:
    """Map a non-2xx answer to a class; the message is kept for the evidence."""
    msg = error_message(body) or f"HTTP {status}"
    if status >= 500 and engine_crashed(msg):
        return ClientFailure(
            ProbeClass.SERVER_ERROR, f"HTTP {status}: {ENGINE_CRASHED} ({msg[:200]})", status=status, body=body,
            extra={"engine_crashed": True},
        )
    if status in (401, 403):
        return ClientFailure(ProbeClass.AUTH, f"HTTP {status}: {msg}", status=status, body=body)
    if status == 404 and ("model" in msg.lower() and "exist" in msg.lower()):
        return ClientFailure(ProbeClass.MODEL_NOT_FOUND, msg, status=status, body=body)
    if status == 404:
        return ClientFailure(ProbeClass.BAD_URL, f"HTTP 404: {msg}", status=status, body=body)
    if status in (400, 413, 422) and _CONTEXT.search(msg):
        return ClientFailure(ProbeClass.CONTEXT_TOO_LONG, msg, status=status, body=body)
    if 400 <= status < 500:
        return ClientFailure(ProbeClass.BAD_REQUEST, f"HTTP {status}: {msg}", status=status, body=body)
    return ClientFailure(ProbeClass.SERVER_ERROR, f"HTTP {status}: {msg}", status=status, body=body)
