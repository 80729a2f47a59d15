"""The probe's HTTP side: base-URL normalisation, secret redaction, one pooled client.

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
from oomguard.probe.classify import (  # noqa: F401 - re-exported: the boundary's public names
    ClientFailure,
    classify_exception,
    classify_status,
    error_message,
)

if TYPE_CHECKING:  # httpx is imported lazily: `oomguard --help` must stay light
    import httpx

# Endpoint paths people paste as a "base URL"; we cut them off and say so.
_ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models", "/embeddings")
REDACTED = "***"


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
    parts = urlsplit(raw)
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
    netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    if ":" in (parts.hostname or "") and not netloc.startswith("["):
        netloc = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port else "")
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


class Redactor:
    """Replace secrets in any text that leaves the process.

    The key itself (with and without surrounding whitespace) and anything
    after ``Bearer`` are replaced, so even an error message that echoes a
    header stays clean.
    """

    _BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',}]+")
    _SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()):
        forms: set[str] = set()
        for secret in secrets:
            if not secret:
                continue
            for form in (secret, secret.strip()):
                if len(form) >= 4:  # a 1-3 char "key" would shred ordinary text
                    forms.add(form)
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, REDACTED)
        text = self._BEARER.sub(lambda m: m.group(1) + REDACTED, text)
        return self._SK.sub(REDACTED, text)

    def scrub(self, obj: Any) -> Any:
        """Redact every string inside a JSON-like structure."""
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, dict):
            return {self.scrub(k): self.scrub(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.scrub(v) for v in obj]
        return obj


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
    ):
        import httpx

        self.url = url
        self.timeouts = timeouts or Timeouts()
        headers = {"User-Agent": "oomguard-probe"}
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
        """Send one request; return (status, decoded body). Raises :class:`ClientFailure`."""
        kwargs: dict[str, Any] = {}
        if json is not None:
            kwargs["json"] = json
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            resp = await self._http.request(method, self.full(path, api=api), **kwargs)
        except Exception as exc:  # noqa: BLE001 - translated at the boundary
            raise classify_exception(exc) from None
        return resp.status_code, decode_body(resp)

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


def decode_body(resp: httpx.Response) -> Any:
    """JSON when it parses, else the text; an error page is cut to 2 kB (they are often HTML)."""
    try:
        return resp.json()
    except Exception:  # noqa: BLE001 - any non-JSON body is kept as text
        try:
            return resp.text if resp.status_code < 400 else resp.text[:2048]
        except Exception:  # noqa: BLE001
            return None
