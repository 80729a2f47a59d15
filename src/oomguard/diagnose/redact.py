"""Remove secrets from anything diagnose or bundle prints.

Covers: ``Authorization`` / ``X-API-Key`` headers (any case, Bearer/Basic),
``sk-``-style keys (OpenAI, Anthropic and similar), Hugging Face ``hf_`` tokens,
GitHub and AWS key shapes, environment assignments of ``*TOKEN*``,
``*API_KEY*``, ``*SECRET*``, ``*PASSWORD*`` (``HF_TOKEN=...``), flags such as
``--api-key X`` / ``--hf-token=X``, the same keys in Python/JSON dicts and
``Namespace(...)`` reprs (``'api_key': 'x'``, ``api_key='x'``), and passwords
in URLs (``https://user:pass@host``). The replacement keeps the name so the
reader still sees that a key was set.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***REDACTED***"
# Upper-case environment names; a suffix must start with "_" so MAX_NUM_BATCHED_TOKENS is not a secret.
_SECRET_NAME = r"[A-Z0-9_]*(?:TOKEN|API_KEY|APIKEY|SECRET|PASSWORD|PASSWD|ACCESS_KEY)(?:_[A-Z0-9_]*)?"

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization: Bearer xxx / authorization=Basic xxx / x-api-key: xxx
    (re.compile(r"(?i)\b(authorization|proxy-authorization)(\s*[:=]\s*)(?:(bearer|basic|token)\s+)?[^\s,;'\"}]+"),
     r"\1\2\3 " + MASK),
    (re.compile(r"(?i)\b(x-api-key|api-key)(\s*:\s*)[^\s,;'\"}]+"), r"\1\2" + MASK),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), "Bearer " + MASK),
    # URLs with credentials
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,30}://)([^/\s:@]{1,200}):([^@\s/]{1,200})@"), r"\1\2:" + MASK + "@"),
    # ENV=secret, including export and docker -e
    (re.compile(r"\b(" + _SECRET_NAME + r")=(\"[^\"]*\"|'[^']*'|[^\s,;]+)"), r"\1=" + MASK),
    # --api-key X, --api-key=X, --hf-token X, --password X
    (re.compile(r"(--(?:api-key|api_key|hf-token|hf_token|token|password|secret))(\s+|=)(?!-)(\S+)"),
     r"\1\2" + MASK),
    # 'api_key': 'x'  "hf_token": "x"   api_key='x' (Namespace repr)
    (re.compile(r"(?<![A-Za-z0-9_])(['\"]?(?:api_key|hf_token|token|password|secret|access_token)['\"]?\s*[:=]\s*)"
                r"(?!None\b|null\b|False\b|True\b)('[^']*'|\"[^\"]*\"|[^\s,})]+)", re.IGNORECASE),
     r"\1'" + MASK + "'"),
    # Key shapes, wherever they appear.
    (re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{16,}"), "sk-" + MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "hf_" + MASK),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), MASK),
)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``***REDACTED***``."""
    if not text:
        return text
    for rx, repl in _RULES:
        text = rx.sub(repl, text)
    return text


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like structure; values under secret-looking keys go entirely."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and re.fullmatch(r"(?i)" + _SECRET_NAME + r"|api_key|hf_token|token|password", k) and v:
                out[k] = MASK
            else:
                out[k] = redact_obj(v)
        return out
    if isinstance(value, (list, tuple)):
        return [redact_obj(v) for v in value]
    return value
