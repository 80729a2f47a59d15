"""``bundle --ask``: a second opinion from any OpenAI-compatible chat endpoint.

Configuration comes from the environment only (never from flags, so keys stay
out of shell history): ``OOMGUARD_LLM_BASE_URL`` (with or without a trailing
``/v1``), ``OOMGUARD_LLM_API_KEY`` (optional for local servers) and
``OOMGUARD_LLM_MODEL`` (optional: the first model the endpoint lists is used).
The bundle sent is already redacted. Errors never echo the key.
"""

from __future__ import annotations

import os
from typing import Any

from oomguard.errors import OomguardError
from oomguard.records import record

SYSTEM_PROMPT = (
    "You are an expert on vLLM memory accounting. Below is a failure report produced by oomguard from the logs "
    "of a vLLM server. Say in a few sentences whether you agree with oomguard's diagnosis, what else could "
    "explain the evidence, and which vLLM flags you would change. Be concrete and brief."
)


class AskError(OomguardError):
    """The second-opinion endpoint could not be reached or answered nonsense."""


@record(frozen=True)
class Answer:
    text: str
    model: str
    endpoint: str  # base URL without credentials, for display


def normalise_base_url(url: str) -> str:
    """'http://h:8000' and 'http://h:8000/v1/' both become 'http://h:8000/v1'."""
    base = url.strip().rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return base


def ask(
    bundle_text: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    timeout_s: float = 120.0,
    transport: Any = None,
) -> Answer:
    import httpx

    base_url = base_url or os.environ.get("OOMGUARD_LLM_BASE_URL")
    api_key = api_key if api_key is not None else os.environ.get("OOMGUARD_LLM_API_KEY")
    model = model or os.environ.get("OOMGUARD_LLM_MODEL")
    if not base_url:
        raise AskError("--ask needs OOMGUARD_LLM_BASE_URL (an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1)")
    base = normalise_base_url(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    display = httpx.URL(base).copy_with(username=None, password=None, query=None)
    try:
        with httpx.Client(timeout=timeout_s, headers=headers, transport=transport) as client:
            if not model:
                resp = client.get(f"{base}/models")
                resp.raise_for_status()
                listed = resp.json().get("data") or []
                if not listed:
                    raise AskError(f"{display}/models lists no model; set OOMGUARD_LLM_MODEL")
                model = str(listed[0]["id"])
            resp = client.post(f"{base}/chat/completions", json={
                "model": model,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": bundle_text},
                ],
            })
            resp.raise_for_status()
            body = resp.json()
    except httpx.HTTPStatusError as exc:
        raise AskError(f"second opinion failed: HTTP {exc.response.status_code} from {display}") from None
    except httpx.HTTPError as exc:
        raise AskError(f"second opinion failed: cannot reach {display} ({type(exc).__name__})") from None
    except ValueError:
        raise AskError(f"second opinion failed: {display} did not answer JSON") from None
    try:
        text = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise AskError(f"second opinion failed: unexpected answer shape from {display}") from None
    return Answer(str(text or "").strip(), model, str(display))
