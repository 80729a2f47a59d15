"""The probe's HTTP side: base-URL normalisation, one pooled client, bounded bodies.

Everything that touches the network goes through :class:`ProbeClient`, which
wraps one ``httpx.AsyncClient`` (connection pooling, explicit timeouts on
every phase). The transport is injectable so unit tests run on
``httpx.MockTransport`` without sockets. Third-party exceptions are translated
at this boundary into a class and a one-line reason (``classify.py``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from oomguard.errors import InputError
from oomguard.probe.classes import ProbeClass
from oomguard.probe.classify import (  # noqa: F401 - re-exported: the boundary's public names
    ClientFailure,
    classify_exception,
    classify_status,
    error_message,
)
from oomguard.redact import MASK
from oomguard.redact import Redactor as Redactor  # noqa: PLC0414 - the one redactor, under the probe's old name

if TYPE_CHECKING:  # httpx is imported lazily: `oomguard --help` must stay light
    import httpx

# Endpoint paths people paste as a "base URL"; we cut them off and say so.
_ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models", "/embeddings")
REDACTED = MASK
# Largest body (after decompression) the probe reads from a non-streamed answer. vLLM's
# biggest, /metrics with every histogram of a multi-engine server, is well under 1 MiB.
MAX_BODY_BYTES = 8 << 20
# What the probe accepts as Content-Encoding: it decodes these itself, with an output cap.
ACCEPT_ENCODING = "gzip, deflate"


@dataclass(frozen=True)
class ServerURL:
    """A base URL split into the server root and its OpenAI ``/v1`` prefix.

    ``root`` serves ``/health``, ``/metrics`` and ``/tokenize``; ``api`` is
    ``root + "/v1"``. ``doubled_v1`` and ``notes`` record what was wrong with
    the URL as given, so the chain can report it with the fix.
    """

    given: str
    root: str
    api: str
    had_v1: bool
    doubled_v1: bool
    notes: tuple[str, ...] = ()

    @property
    def host(self) -> str:
        return urlsplit(self.root).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.root)
        if parts.port:
            return parts.port
        return 443 if parts.scheme == "https" else 80

    @property
    def scheme(self) -> str:
        return urlsplit(self.root).scheme


def normalize_base_url(text: str) -> ServerURL:
    """Accept ``host:port``, ``http://host:port``, ``.../v1``, ``.../v1/v1``, endpoint URLs."""
    raw = (text or "").strip()
    if not raw:
        raise InputError("--base-url is empty")
    notes: list[str] = []
    if "://" not in raw:
        raw = "http://" + raw
        notes.append("no scheme given; assumed http://")
    try:
        parts = urlsplit(raw)
    except ValueError as exc:  # "Invalid IPv6 URL": an unclosed [ ... ]
        raise InputError(f"--base-url {text!r}: {exc} (an IPv6 address is written in brackets, "
                         "http://[::1]:8000)") from None
    if parts.scheme not in ("http", "https"):
        raise InputError(f"--base-url {text!r}: scheme must be http or https")
    if not parts.hostname:
        raise InputError(f"--base-url {text!r}: no host")
    try:
        parts.port  # noqa: B018 - raises on a non-numeric port
    except ValueError as exc:
        raise InputError(f"--base-url {text!r}: {exc}") from None
    path = re.sub(r"/+", "/", parts.path).rstrip("/")
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            notes.append(f"base URL included the endpoint path {suffix!r}; cut it off")
            break
    segments = [s for s in path.split("/") if s]
    n_v1 = 0
    while segments and segments[-1] == "v1":
        segments.pop()
        n_v1 += 1
    prefix = "/" + "/".join(segments) if segments else ""
    # Drop user:password@ from what we keep; it must never reach output.
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # IPv6 keeps its brackets
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    root = urlunsplit((parts.scheme, netloc, prefix, "", ""))
    given = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return ServerURL(
        given=given,
        root=root,
        api=root + "/v1",
        had_v1=n_v1 >= 1,
        doubled_v1=n_v1 >= 2,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class Timeouts:
    """Seconds. ``read`` bounds each wait for bytes, so it is also the stall limit."""

    connect: float = 5.0
    read: float = 30.0
    write: float = 30.0
    pool: float = 30.0

    def to_httpx(self) -> httpx.Timeout:
        import httpx

        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


def proxy_for(url: ServerURL, env: dict[str, str] | None = None) -> str | None:
    """The proxy variable that would carry requests to ``url``, if any (httpx's rules)."""
    env = dict(os.environ if env is None else env)
    lower = {k.lower(): v for k, v in env.items() if v}
    key = "https_proxy" if url.scheme == "https" else "http_proxy"
    proxy = lower.get(key) or lower.get("all_proxy")
    if not proxy:
        return None
    no_proxy = lower.get("no_proxy", "")
    host = url.host.lower()
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return None
        bare = entry.split("://")[-1].split(":")[0].lstrip(".")
        if host == bare or host.endswith("." + bare):
            return None
    return proxy


TRANSPORTS = ("auto", "httpx", "aiohttp")


def load_transport(kind: str, url: ServerURL, *, trust_env: bool, max_connections: int) -> tuple[Any, str]:
    """The transport for stage 2's streams: (transport or None for httpx's own, a description).

    httpx's own HTTP/1.1 stack parses each SSE chunk in pure Python (h11); with
    one chunk per generated token that is most of the probe's CPU. The optional
    ``httpx-aiohttp`` transport (``pip install httpx-aiohttp (an oomguard dependency)``) parses in C
    and keeps httpx's API. It is not used when a proxy from the environment
    applies (it would bypass it); the client chain always uses httpx's own.
    """
    if kind not in TRANSPORTS:
        raise InputError(f"--http-transport must be one of {', '.join(TRANSPORTS)}")
    if kind == "httpx":
        return None, "httpx (h11)"
    if trust_env and proxy_for(url) is not None:
        return None, "httpx (h11; a proxy from the environment applies, which aiohttp would bypass)"
    try:
        import httpx
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        if kind == "aiohttp":
            raise InputError("--http-transport aiohttp needs httpx-aiohttp: pip install httpx-aiohttp (an oomguard dependency)") from None
        return None, "httpx (h11; pip install httpx-aiohttp (an oomguard dependency) for a cheaper client)"
    return AiohttpTransport(limits=httpx.Limits(max_connections=max_connections)), "httpx over aiohttp (httpx-aiohttp)"


class ProbeClient:
    """One pooled async HTTP client for the whole probe, with the key attached.

    ``trust_env`` follows the environment's proxy variables like the user's
    own OpenAI client would; the chain retries without them to tell "the proxy
    is in the way" from "the server is down".
    """

    def __init__(
        self,
        url: ServerURL,
        api_key: str | None = None,
        *,
        timeouts: Timeouts | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        trust_env: bool = True,
        max_connections: int = 64,
        max_body_bytes: int = MAX_BODY_BYTES,
    ):
        import httpx

        self.url = url
        self.timeouts = timeouts or Timeouts()
        self.max_body_bytes = max_body_bytes
        headers = {"User-Agent": "oomguard-probe", "Accept-Encoding": ACCEPT_ENCODING}
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.AsyncClient(
            headers=headers,
            timeout=self.timeouts.to_httpx(),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
            trust_env=trust_env,
            follow_redirects=False,
        )

    @property
    def http(self) -> httpx.AsyncClient:
        return self._http

    def full(self, path: str, *, api: bool = True) -> str:
        if path.startswith("http://") or path.startswith("https://"):
            return path
        return (self.url.api if api else self.url.root) + path

    async def request(
        self, method: str, path: str, *, api: bool = True, json: Any = None, timeout: float | None = None
    ) -> tuple[int, Any]:
        """Send one request; return (status, decoded body). Raises :class:`ClientFailure`.

        ``timeout`` (default: the read timeout) bounds the *whole* call, headers and body
        together: a server that trickles one byte per second never outlives it. The body is
        read up to :data:`MAX_BODY_BYTES` after decompression.
        """
        import asyncio

        deadline = timeout if timeout is not None else self.timeouts.read
        try:
            return await asyncio.wait_for(self._request(method, path, api=api, json=json, timeout=deadline), deadline)
        except (asyncio.TimeoutError, TimeoutError):
            raise ClientFailure(
                ProbeClass.TIMEOUT,
                f"the server did not answer {method} {path} completely within the {deadline:g}s per-call deadline "
                "(headers and body; --timeout)",
            ) from None

    async def _request(self, method: str, path: str, *, api: bool, json: Any, timeout: float) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"timeout": timeout}
        if json is not None:
            kwargs["json"] = json
        try:
            async with self._http.stream(method, self.full(path, api=api), **kwargs) as resp:
                raw = await read_capped(resp, self.max_body_bytes)
        except ClientFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at the boundary
            raise classify_exception(exc) from None
        return resp.status_code, decode_bytes(raw, resp.status_code, resp.headers.get("content-type", ""))

    async def get(self, path: str, *, api: bool = True, timeout: float | None = None) -> tuple[int, Any]:
        return await self.request("GET", path, api=api, timeout=timeout)

    async def post(self, path: str, json: Any, *, timeout: float | None = None) -> tuple[int, Any]:
        return await self.request("POST", path, json=json, timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ProbeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Decoder:
    """Incremental Content-Encoding decoder whose output never exceeds ``cap`` bytes.

    httpx's own decoder inflates a whole network chunk at once (a 64 KiB chunk of a gzip
    bomb is 64 MiB); zlib's ``max_length`` stops at the cap instead.
    """

    def __init__(self, encoding: str, cap: int):
        import zlib

        self.cap = cap
        self.out = 0
        self.names = [e.strip().lower() for e in encoding.split(",") if e.strip() and e.strip().lower() != "identity"]
        for name in self.names:
            if name not in ("gzip", "x-gzip", "deflate"):
                raise ClientFailure(ProbeClass.SERVER_ERROR, f"the server answered with Content-Encoding {name!r}, "
                                    f"which the probe did not ask for (it accepts {ACCEPT_ENCODING})")
        if len(self.names) > 1:
            raise ClientFailure(ProbeClass.SERVER_ERROR, f"the server stacked encodings {encoding!r}; the probe decodes one")
        self._zlib = zlib
        self._deflate_raw = False
        self._d = self._new() if self.names else None

    def _new(self) -> Any:
        if self.names[0] == "deflate":
            return self._zlib.decompressobj(-self._zlib.MAX_WBITS if self._deflate_raw else self._zlib.MAX_WBITS)
        return self._zlib.decompressobj(16 + self._zlib.MAX_WBITS)

    def _over(self) -> ClientFailure:
        return ClientFailure(
            ProbeClass.SERVER_ERROR,
            f"the response body is over {self.cap // (1 << 20)} MiB{' after decompression' if self.names else ''}; "
            "the probe stopped reading it",
        )

    def feed(self, data: bytes) -> bytes:
        if self._d is None:
            self.out += len(data)
            if self.out > self.cap:
                raise self._over()
            return data
        parts: list[bytes] = []
        while data:
            try:
                chunk = self._d.decompress(data, self.cap - self.out + 1)
            except self._zlib.error as exc:
                if self.names[0] == "deflate" and not self._deflate_raw and self.out == 0:
                    self._deflate_raw = True  # servers send raw deflate as often as zlib-wrapped
                    self._d = self._new()
                    continue
                raise ClientFailure(ProbeClass.SERVER_ERROR, f"the response body is not valid {self.names[0]}: {exc}") from None
            self.out += len(chunk)
            if self.out > self.cap:
                raise self._over()
            parts.append(chunk)
            if self._d.unconsumed_tail:
                data = self._d.unconsumed_tail
            elif self._d.eof and self._d.unused_data:
                data = self._d.unused_data  # a multi-member gzip body: the next member
                self._d = self._new()
            else:
                data = b""
        return b"".join(parts)


async def read_capped(resp: httpx.Response, cap: int = MAX_BODY_BYTES) -> bytes:
    """The decoded body of ``resp``, refusing one over ``cap`` bytes; never buffers more than that."""
    decoder = _Decoder(resp.headers.get("content-encoding", ""), cap)
    if resp.is_stream_consumed or hasattr(resp, "_content"):  # already in memory (e.g. a test transport)
        body = resp.content
        if len(body) > cap:
            raise decoder._over()  # noqa: SLF001
        return body
    parts: list[bytes] = []
    raw_seen = 0
    async for raw in resp.aiter_raw():
        raw_seen += len(raw)
        if raw_seen > cap:  # an endless compressed body that inflates to nothing is still endless
            raise decoder._over()  # noqa: SLF001
        parts.append(decoder.feed(raw))
    return b"".join(parts)


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            import codecs

            try:
                return codecs.lookup(value.strip().strip('"')).name
            except LookupError:
                break
    return "utf-8"


def decode_bytes(raw: bytes, status: int, content_type: str = "") -> Any:
    """JSON when it parses, else the text; an error page is cut to 2 kB (they are often HTML)."""
    text = raw.decode(_charset(content_type), errors="replace")
    try:
        import json as _json

        return _json.loads(text)
    except (ValueError, RecursionError):
        return text if status < 400 else text[:2048]


def decode_body(resp: httpx.Response) -> Any:
    """:func:`decode_bytes` of a response already read (its body is in memory)."""
    try:
        raw = resp.content
    except Exception:  # noqa: BLE001 - a body that could not be read is no body
        return None
    return decode_bytes(raw, resp.status_code, resp.headers.get("content-type", ""))
