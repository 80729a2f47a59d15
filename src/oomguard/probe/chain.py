"""Stage 1: walk the client chain and say, per link, what is wrong and the fix.

The order follows a request's path: the URL as typed, proxy variables,
reachability, ``/health``, authentication, ``/v1/models`` and the model id,
the claimed context, a plain completion, a chat request, a stream, and the
error bodies the server returns. Each check yields one :class:`CheckResult`;
a check that makes the rest meaningless (the server cannot be reached, the key
is refused) stops the chain.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oomguard.probe.classes import ProbeClass, Severity
from oomguard.probe.classify import ClientFailure, classify_status, error_message
from oomguard.probe.client import REDACTED, ProbeClient, ServerURL, proxy_for
from oomguard.probe.stream import RequestRecord, stream_request

NO_SUCH_MODEL = "oomguard-probe-no-such-model"


@dataclass
class CheckResult:
    check: str
    ok: bool
    detail: str
    fix: str | None = None
    cls: ProbeClass | None = None
    severity: Severity = Severity.ERROR

    @property
    def failed(self) -> bool:
        """Fails the verdict (a WARN never does)."""
        return not self.ok and self.severity is not Severity.WARN

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "ok": self.ok,
            "detail": self.detail,
            "fix": self.fix,
            "class": self.cls.value if (self.cls and not self.ok) else None,
            "severity": self.severity.value,
        }


@dataclass
class ChainOutcome:
    checks: list[CheckResult] = field(default_factory=list)
    model: str | None = None
    served_models: list[str] = field(default_factory=list)
    served_max_model_len: int | None = None
    tokenize_ok: bool = False
    metrics_ok: bool = False
    trust_env: bool = True
    stopped: bool = False  # an ERROR check ended the chain early

    @property
    def blocking(self) -> bool:
        """Stage 2 cannot run (or would only repeat the chain's failure)."""
        return self.stopped or any(c.failed and c.severity is Severity.ERROR for c in self.checks)


def in_container() -> bool:
    """Best guess: Docker, Podman or Kubernetes. ``localhost`` there is the container itself."""
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    from oomguard.errors import InputError
    from oomguard.inputs import files

    try:
        text = files.read_optional_text("/proc/1/cgroup") or ""
    except InputError:
        return False
    return any(s in text for s in ("docker", "kubepods", "containerd", "libpod"))


_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class Chain:
    """Runs the checks in order, sharing what earlier ones learned."""

    def __init__(
        self,
        url: ServerURL,
        make_client: Callable[[bool], ProbeClient],
        *,
        api_key: str | None,
        model: str | None,
        claimed_max_model_len: int | None,
        env: dict[str, str] | None = None,
        container: bool | None = None,
        timeout_s: float = 30.0,
    ):
        self.url = url
        self.make_client = make_client
        self.api_key = api_key
        self.model_arg = model
        self.claimed = claimed_max_model_len
        self.env = dict(os.environ if env is None else env)
        self.container = in_container() if container is None else container
        self.timeout_s = timeout_s
        self.out = ChainOutcome()
        self.client: ProbeClient | None = None

    def add(self, result: CheckResult) -> CheckResult:
        self.out.checks.append(result)
        return result

    async def run(self) -> tuple[ChainOutcome, ProbeClient]:
        self.client = self.make_client(True)
        steps = (
            self._key,
            self._base_url,
            self._reachable,
            self._health,
            self._models,
            self._max_model_len,
            self._completion,
            self._chat,
            self._stream,
            self._error_shapes,
            self._tokenize,
            self._metrics,
        )
        for step in steps:
            proceed = await step()
            if proceed is False:
                self.out.stopped = True
                break
        return self.out, self.client

    # -- the checks ---------------------------------------------------------

    async def _key(self) -> bool:
        key = self.api_key
        if key is None or key == key.strip():
            return True
        self.add(
            CheckResult(
                "auth",
                False,
                "the API key has leading/trailing whitespace (a newline from `cat keyfile` is common); "
                "vLLM compares the exact string after 'Bearer ', so it is refused",
                fix="strip the key: export KEY=\"$(tr -d '[:space:]' < keyfile)\"",
                cls=ProbeClass.AUTH,
            )
        )
        return False

    async def _base_url(self) -> bool:
        url = self.url
        notes = "; ".join(url.notes)
        if url.doubled_v1:
            evidence = ""
            try:
                status, body = await self.client.get(url.given.rstrip("/") + "/models", timeout=self.timeout_s)
                evidence = f"; GET {url.given.rstrip('/')}/models answered HTTP {status}"
                msg = error_message(body)
                if msg:
                    evidence += f" ({msg[:80]})"
            except ClientFailure:
                pass
            self.add(
                CheckResult(
                    "base-url",
                    False,
                    f"base URL {url.given} has /v1 twice; an OpenAI client appends paths to it, "
                    f"so every request goes to /v1/v1/...{evidence}",
                    fix=f"use --base-url {url.api} (OpenAI SDK: base_url='{url.api}')",
                    cls=ProbeClass.BAD_URL,
                ),
            )
            return True  # we carry on with the corrected URL to report the rest
        detail = f"server root {url.root}, API base {url.api}"
        if not url.had_v1:
            detail += "; note: OpenAI SDK clients need base_url ending in /v1"
        if notes:
            detail += f"; {notes}"
        self.add(CheckResult("base-url", True, detail))
        return True

    async def _reachable(self) -> bool:
        proxy = proxy_for(self.url, self.env)
        failure: ClientFailure | None = None
        status = None
        try:
            status, _ = await self.client.get("/health", api=False, timeout=self.timeout_s)
        except ClientFailure as exc:
            failure = exc
        proxied_badly = proxy is not None and (failure is not None or status in (407, 502, 503, 504))
        if proxied_badly:
            # Try again without the proxy variables: if that works, the proxy is the problem.
            direct = self.make_client(False)
            try:
                d_status, _ = await direct.get("/health", api=False, timeout=self.timeout_s)
            except ClientFailure:
                await direct.aclose()
            else:
                await self.client.aclose()
                self.client = direct
                self.out.trust_env = False
                safe_proxy = _strip_userinfo(proxy)
                self.add(
                    CheckResult(
                        "proxy",
                        False,
                        f"through the proxy {safe_proxy} the server "
                        + (f"failed ({failure.detail})" if failure else f"answered HTTP {status}")
                        + f"; directly it answered HTTP {d_status}. Continuing without the proxy.",
                        fix=f"export NO_PROXY={self.url.host},$NO_PROXY (or unset HTTP_PROXY/HTTPS_PROXY)",
                        cls=ProbeClass.UNREACHABLE,
                        severity=Severity.FAIL_CONTINUE,
                    )
                )
                self.add(CheckResult("reachable", True, f"{self.url.root} answers (direct)"))
                return True
        elif proxy is not None:
            self.add(
                CheckResult(
                    "proxy",
                    True,
                    f"requests go through the proxy {_strip_userinfo(proxy)} (from the environment)",
                    severity=Severity.WARN,
                )
            )
        if failure is None:
            self.add(CheckResult("reachable", True, f"{self.url.root} answers"))
            return True
        fix = _unreachable_fix(failure, self.url, self.container, proxy)
        self.add(CheckResult("reachable", False, failure.detail, fix=fix, cls=failure.cls))
        return False

    async def _health(self) -> bool:
        try:
            status, body = await self.client.get("/health", api=False, timeout=self.timeout_s)
        except ClientFailure as exc:
            self.add(CheckResult("health", False, exc.detail, cls=exc.cls))
            return False
        if status == 200:
            self.add(CheckResult("health", True, "/health answered 200"))
            return True
        if status in (401, 403):
            self.add(CheckResult("health", True, f"/health answered {status} (guarded)", severity=Severity.WARN))
            return True
        if status == 404:
            self.add(
                CheckResult(
                    "health",
                    False,
                    "/health not found: not a vLLM server, or a gateway in front of it",
                    cls=ProbeClass.BAD_URL,
                    severity=Severity.WARN,
                )
            )
            return True
        self.add(
            CheckResult(
                "health",
                False,
                f"/health answered HTTP {status}: {error_message(body) or 'engine unhealthy'}",
                fix="the engine is not healthy: read the server log (oomguard diagnose LOG)",
                cls=ProbeClass.SERVER_ERROR,
            )
        )
        return False

    async def _models(self) -> bool:
        try:
            status, body = await self.client.get("/models", timeout=self.timeout_s)
        except ClientFailure as exc:
            self.add(CheckResult("models", False, exc.detail, cls=exc.cls))
            return False
        if status in (401, 403):
            self.add(self._auth_failure(status, body))
            return False
        key_note = (
            "a key was sent and accepted"
            if self.api_key is not None
            else "no key sent; the server does not check keys (started without --api-key)"
        )
        self.add(CheckResult("auth", True, key_note))
        if status == 404:
            self.add(
                CheckResult(
                    "models",
                    False,
                    f"GET {self.url.api}/models answered 404: the /v1 prefix is not where this URL points",
                    fix="point --base-url at the server root or at .../v1 of the vLLM server",
                    cls=ProbeClass.BAD_URL,
                )
            )
            return False
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("data"), list):
            failure = classify_status(status, body) if status >= 400 else None
            self.add(
                CheckResult(
                    "models",
                    False,
                    failure.detail if failure else f"unexpected /v1/models answer (HTTP {status})",
                    cls=failure.cls if failure else ProbeClass.SERVER_ERROR,
                )
            )
            return False
        entries = [m for m in body["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]
        ids = [m["id"] for m in entries]
        self.out.served_models = ids
        if not ids:
            self.add(CheckResult("models", False, "the server lists no models", cls=ProbeClass.SERVER_ERROR))
            return False
        chosen = self.model_arg
        if chosen is None:
            chosen = ids[0]
            detail = f"serves {', '.join(ids)}; probing {chosen!r}"
        elif chosen not in ids:
            by_root = [m["id"] for m in entries if m.get("root") == chosen]
            suggestion = by_root[0] if by_root else _closest(chosen, ids)
            why = (
                f"{chosen!r} is the model path; the server serves it as {suggestion!r} (--served-model-name)"
                if by_root
                else f"model {chosen!r} is not served; served names: {', '.join(ids)}"
            )
            self.add(
                CheckResult(
                    "models",
                    False,
                    why,
                    fix=f"use --served-model-name {suggestion} (the id the server answers to, not the path)",
                    cls=ProbeClass.MODEL_NOT_FOUND,
                )
            )
            return False
        else:
            detail = f"{chosen!r} is served"
        self.out.model = chosen
        for m in entries:
            if m["id"] == chosen and isinstance(m.get("max_model_len"), int):
                self.out.served_max_model_len = m["max_model_len"]
                detail += f" (max_model_len {m['max_model_len']})"
        self.add(CheckResult("models", True, detail))
        return True

    def _auth_failure(self, status: int, body: Any) -> CheckResult:
        msg = error_message(body) or f"HTTP {status}"
        if self.api_key is None:
            detail = f"HTTP {status} ({msg}) with no key: the server was started with --api-key"
            fix = "export the key into a variable and pass --api-key-env NAME"
        else:
            detail = f"HTTP {status} ({msg}): the key {REDACTED} was refused"
            fix = "use the value given to the server's --api-key / VLLM_API_KEY"
        return CheckResult("auth", False, detail, fix=fix, cls=ProbeClass.AUTH)

    async def _max_model_len(self) -> bool:
        served, claimed = self.out.served_max_model_len, self.claimed
        if claimed is None or served is None:
            self.add(
                CheckResult(
                    "max-model-len",
                    True,
                    f"probing the served max_model_len {served}" if served else "server did not report max_model_len",
                    severity=Severity.WARN if served is None else Severity.ERROR,
                )
            )
            return True
        if claimed > served:
            self.add(
                CheckResult(
                    "max-model-len",
                    False,
                    f"claimed --max-model-len {claimed} but the server serves {served}; "
                    "a prompt that long will be refused",
                    fix=f"restart the server with --max-model-len {claimed}, or probe --max-model-len {served}",
                    cls=ProbeClass.CONTEXT_TOO_LONG,
                    severity=Severity.FAIL_CONTINUE,
                )
            )
            return True
        note = "" if claimed == served else f" (server allows {served})"
        self.add(CheckResult("max-model-len", True, f"claimed {claimed}{note}"))
        return True

    async def _completion(self) -> bool:
        payload = {"model": self.out.model, "prompt": "Hello", "max_tokens": 2, "temperature": 0}
        return self._answer_check("completion", await self._post("/completions", payload), "text")

    async def _chat(self) -> bool:
        payload = {
            "model": self.out.model,
            "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 2,
            "temperature": 0,
        }
        result = await self._post("/chat/completions", payload)
        if not isinstance(result, ClientFailure) and result[0] >= 400:
            result = classify_status(*result)
        if isinstance(result, ClientFailure) and "chat template" in result.detail.lower():
            self.add(
                CheckResult(
                    "chat",
                    False,
                    f"chat requests fail: {result.detail[:200]}",
                    fix="start the server with --chat-template FILE, or use /v1/completions",
                    cls=ProbeClass.BAD_REQUEST,
                    severity=Severity.WARN,
                )
            )
            return True
        return self._answer_check("chat", result, "message", severity=Severity.FAIL_CONTINUE)

    async def _post(self, path: str, payload: dict[str, Any]) -> tuple[int, Any] | ClientFailure:
        try:
            return await self.client.post(path, payload, timeout=self.timeout_s)
        except ClientFailure as exc:
            return exc

    def _answer_check(
        self, name: str, result: tuple[int, Any] | ClientFailure, field_name: str, severity: Severity = Severity.ERROR
    ) -> bool:
        if isinstance(result, ClientFailure):
            self.add(CheckResult(name, False, result.detail, cls=result.cls, severity=severity))
            return severity is not Severity.ERROR
        status, body = result
        if status >= 400:
            failure = classify_status(status, body)
            self.add(CheckResult(name, False, failure.detail, cls=failure.cls, severity=severity))
            return severity is not Severity.ERROR
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list) or not choices or field_name not in choices[0]:
            self.add(
                CheckResult(
                    name,
                    False,
                    f"HTTP {status} but no choices[0].{field_name} in the body "
                    "(a client's 'reading choices' error: wrong model id or a proxy rewriting the answer)",
                    cls=ProbeClass.SERVER_ERROR,
                    severity=severity,
                )
            )
            return severity is not Severity.ERROR
        self.add(CheckResult(name, True, f"HTTP {status}, choices[0].{field_name} present"))
        return True

    async def _stream(self) -> bool:
        import time

        payload = {
            "model": self.out.model,
            "prompt": "Hello",
            "max_tokens": 3,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        zero = time.perf_counter()
        record = RequestRecord(id=0, stage="chain", prompt_tokens=0, max_tokens=3, t_start=0.0)
        await stream_request(self.client, "/completions", payload, record, clock_zero=zero, deadline_s=self.timeout_s)
        if not record.ok:
            fix = None
            if record.cls == ProbeClass.STREAM_BROKEN.value:
                fix = "non-streaming works but streaming breaks: look for a proxy buffering or cutting SSE"
            self.add(CheckResult("stream", False, record.error or "stream failed", fix=fix, cls=ProbeClass(record.cls)))
            return False
        if not record.usage_seen:
            self.add(
                CheckResult(
                    "stream",
                    True,
                    f"{record.output_chunks} chunks and [DONE], but no usage in the final chunk",
                    fix="token counts fall back to counting chunks",
                    severity=Severity.WARN,
                )
            )
            return True
        self.add(
            CheckResult(
                "stream",
                True,
                f"{record.output_chunks} chunks, usage in the final chunk, [DONE] (TTFT {record.ttft_s or 0:.3f}s)",
            )
        )
        return True

    async def _error_shapes(self) -> bool:
        wrong = await self._post(
            "/completions", {"model": NO_SUCH_MODEL, "prompt": "Hi", "max_tokens": 1}
        )
        self.add(self._shape("error-404", wrong, expect=404))
        served = self.out.served_max_model_len
        if served:
            # max_tokens beyond the context is rejected before any compute: a cheap 400.
            over = await self._post(
                "/completions", {"model": self.out.model, "prompt": "Hi", "max_tokens": served + 1}
            )
            self.add(self._shape("error-400", over, expect=400))
        return True

    def _shape(self, name: str, result: tuple[int, Any] | ClientFailure, expect: int) -> CheckResult:
        if isinstance(result, ClientFailure):
            return CheckResult(name, False, result.detail, cls=result.cls, severity=Severity.WARN)
        status, body = result
        msg = error_message(body)
        if status == expect and isinstance(body, dict) and isinstance(body.get("error"), dict) and msg:
            return CheckResult(name, True, f"HTTP {status} with an OpenAI error body: {msg[:160]}")
        return CheckResult(
            name,
            False,
            f"expected HTTP {expect} with an error object, got HTTP {status}: {str(msg or body)[:160]}",
            fix="clients that read `choices` without checking the status will misreport this",
            severity=Severity.WARN,
        )

    async def _tokenize(self) -> bool:
        try:
            status, body = await self.client.post(
                self.url.root + "/tokenize", {"model": self.out.model, "prompt": "hello world"}, timeout=self.timeout_s
            )
        except ClientFailure as exc:
            status, body = None, exc.detail
        if status == 200 and isinstance(body, dict) and isinstance(body.get("tokens"), list):
            self.out.tokenize_ok = True
            self.add(CheckResult("tokenize", True, "/tokenize available: prompts of exact token counts"))
        else:
            self.add(
                CheckResult(
                    "tokenize",
                    False,
                    f"/tokenize unavailable (HTTP {status}); prompt lengths are approximate",
                    severity=Severity.WARN,
                )
            )
        return True

    async def _metrics(self) -> bool:
        try:
            status, body = await self.client.get("/metrics", api=False, timeout=self.timeout_s)
        except ClientFailure as exc:
            status, body = None, exc.detail
        if status == 200 and isinstance(body, str) and "vllm:" in body:
            self.out.metrics_ok = True
            self.add(CheckResult("metrics", True, "/metrics exposes vllm:* series"))
        else:
            self.add(
                CheckResult(
                    "metrics",
                    False,
                    f"/metrics unavailable (HTTP {status}); no KV-cache usage or preemption data",
                    severity=Severity.WARN,
                )
            )
        return True


def _strip_userinfo(url: str) -> str:
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://{REDACTED}@{rest.split('@', 1)[1]}"
    return url


def _closest(name: str, choices: list[str]) -> str:
    low = {c.lower(): c for c in choices}
    tail = name.rstrip("/").split("/")[-1].lower()
    for key, value in low.items():
        if key == tail or key.endswith("/" + tail):
            return value
    from oomguard.inputs.suggest import close_matches

    match = close_matches(tail, list(low), n=1, cutoff=0.0)
    return low[match[0]] if match else choices[0]


def _unreachable_fix(failure: ClientFailure, url: ServerURL, container: bool, proxy: str | None) -> str:
    detail = failure.detail.lower()
    if failure.cls is ProbeClass.TIMEOUT:
        return "the server accepted the connection but never answered: it may be starting, hung, or swapping"
    if "dns" in detail:
        return f"check the host name {url.host!r} (typo, or a name only resolvable inside another network)"
    if "tls" in detail:
        scheme = "http" if url.scheme == "https" else "https"
        return f"the server may speak {scheme}, not {url.scheme}; or pass the right CA"
    if "refused" in detail:
        hint = f"is the server running and listening on port {url.port}? (ss -ltnp | grep {url.port})"
        if url.host in _LOCAL_NAMES and container:
            hint += (
                f"; this runs in a container, where {url.host} is the container itself: if the server runs "
                "on the host, use the host's address (host.docker.internal, the service name, or --network host)"
            )
        return hint
    if proxy:
        return "a proxy variable is set: export NO_PROXY for this host"
    return "check host, port, firewall"
