"""The one redactor: secrets out of everything oomguard prints or writes for people.

Two entry points, used at each command's render edge:

- :func:`redact_data` walks a JSON-like structure *before* it is serialized:
  a value under a secret-looking key (``api_key``, ``hf_token``, ``password``,
  ``HF_TOKEN``, ``aws_secret_access_key`` ...) is masked whole, every other
  string goes through :func:`redact_text`, and a string that is itself a JSON
  object (a ``--kv-transfer-config`` value) is parsed, redacted and re-encoded.
  Serialized JSON is never searched with a regex: an escaped quote (``\\"``)
  would be eaten and the output would stop being JSON.
- :func:`redact_text` for free text (log lines, shell scripts, diffs, error
  messages, an LLM's reply): ``--api-key X`` / ``--hf-token=X`` and any flag
  whose name says key/token/secret/password, ``NAME=value`` environment
  assignments with such names (``HF_TOKEN``, ``*_KEY``, ``*_SECRET``), the same
  names as dict/JSON/Namespace keys (``'api_key': 'x'``, ``"password":"x"``,
  ``api_key='x'``), ``Authorization``/``X-API-Key`` headers, URL userinfo
  (``https://user:pass@host``), and key shapes wherever they appear, glued to other
  text too (``sk-``, ``hf_``, GitHub, AWS, Slack, JWT). The name is kept so the reader
  sees a key was set; a word of prose after a name ("use --api-key to set it") is not
  a value and is left alone.

:class:`Redactor` adds the literal secrets a command knows (the probe's API key,
``--ask``'s endpoint key) on top of the patterns. :func:`safe_terminal_text`
removes control characters and terminal escape sequences from text a server
sent, before it reaches a terminal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
import oomguard.lazy_re as lazy_re

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

MASK = "***"

# Words that make a name secret wherever they stand (``REDIS_AUTH_HEADER``), and words that do so
# as the last word (``api_key``, ``hf_token``) but not elsewhere (``num_key_value_heads``, ``max_tokens``).
_SECRET_WORDS = frozenset({"password", "passwd", "pwd", "secret", "secrets", "apikey", "credential",
                           "credentials", "authorization", "passphrase", "privatekey", "auth"})
_SECRET_LAST = frozenset({"key", "token", "cookie"})
# ...and inside a word written without separators (``DBPASSWORD``, ``MYSECRET``)
_SECRET_PARTS = ("password", "passwd", "secret", "credential", "apikey", "privatekey", "passphrase")
_WORD = lazy_re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def is_secret_name(name: str) -> bool:
    """True for names that hold a secret: ``--api-key``, ``HF_TOKEN``, ``aws_secret_access_key``, ``apiKey``,
    ``REDIS_PASSWD``, ``MY_AUTH_HEADER``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``LMCACHE_KEY``, ``DBPASSWORD``,
    ``AWS_ACCESS_KEY_ID``.

    ``MAX_NUM_BATCHED_TOKENS``, ``max_tokens``, ``num_key_value_heads``, ``tokenizer``, ``author`` and
    ``--ssl-keyfile`` (a path) are not.
    """
    words = [w.lower() for w in _WORD.findall(name or "")]
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words) or words[-1] in _SECRET_LAST:
        return True
    if any(a == "access" and b == "key" for a, b in zip(words, words[1:])):
        return True  # AWS_ACCESS_KEY_ID and its kin: paired with a secret key, never printed either
    low = name.lower()
    return any(part in low for part in _SECRET_PARTS)


def is_secret_value(value: Any) -> bool:
    """True when ``value`` itself holds a secret, whatever it is called: a URL with ``user:pass@``,
    a bearer token or an ``Authorization`` header, a key shape (``sk-...``, ``hf_...``), a
    ``NAME=secret`` assignment, or JSON (a string or a structure) with a secret-named key."""
    if value is None or isinstance(value, (bool, int, float)):
        return False
    return redact_data(value) != value


def is_secret(name: str, value: Any) -> bool:
    """The one decision: does ``name=value`` (a flag, an environment variable, a JSON key) hold a secret?

    By name (:func:`is_secret_name`) when the value is a real one (not a boolean, ``none``, an empty
    string or a short count such as ``1``), or by value (:func:`is_secret_value`).
    """
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return False  # a count or a size; no credential is a bare number
    if isinstance(value, str):
        text = value.strip()
        if not text or _NOT_A_VALUE.match(text) or (len(text) <= 4 and text.lstrip("-").replace(".", "", 1).isdigit()):
            return False
    if isinstance(value, (list, tuple)) and not value:
        return False
    return is_secret_name(name) or is_secret_value(value)


# --- free text -----------------------------------------------------------------------------

_QUOTED = r"\[[^\]\n]{0,2000}\]|'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\"|\\\"(?:[^\\\n]|\\(?!\"))*\\\""
_NOT_A_VALUE = lazy_re.compile(r"(?i)^(?:none|null|true|false|nil|\[\]|\{\}|''|\"\")$")

# No word boundary before a name or a token anywhere below: a credential glued to other text ("HTTP_AUTHORIZATION",
# "x_Bearer", "%3Dsk-...", "token_hf_...") has none, and the token shapes decide by their own form instead.
_HEADER = lazy_re.compile(
    r"(?i)(?<![A-Za-z0-9])(authorization|proxy-authorization)(\s*[:=]\s*)(?:(bearer|basic|token|digest)\s+)?"
    r"([^\s,;'\"}]+)"
)
_API_KEY_HEADER = lazy_re.compile(r"(?i)(?<![A-Za-z0-9])(x-api-key|api-key)(\s*:[ \t]*)([^\s,;'\"}]+)")
_BEARER = lazy_re.compile(r"(?i)(bearer[ \t]+)(?!bearer[ \t])([A-Za-z0-9._~+/=-]{4,})")
# scheme://user:pass@  and  scheme://token@ (userinfo without a password is a token too)
_URL_USERINFO = lazy_re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,30}://)([^/\s:@'\"]{1,200})(?::([^@\s/'\"]{0,200}))?@")
# --flag value / --flag=value: the flag's name decides
# Only names that could be secret are matched (the callback decides), so an ordinary
# ``name: value`` never swallows the secret assignment that follows it.
_NAMEISH = (r"[A-Za-z0-9_.-]{0,64}(?i:password|passwd|pwd|secret|apikey|credential|authorization|passphrase"
            r"|privatekey|key|token|auth|cookie)[A-Za-z0-9_.-]{0,64}")
_FLAG = lazy_re.compile(r"(?<![\w-])(--?" + _NAMEISH + r")(=|[ \t]+)(?!-)(" + _QUOTED + r"|[^\s'\"]+)")
# name=value, name: value, 'name': 'value', "name": "value", name='value' (Namespace repr)
_ASSIGN = lazy_re.compile(
    r"(?<![\w.-])(\\?[\"']?)(" + _NAMEISH + r")(\1)(\s*[:=]\s*)(" + _QUOTED + r"|[^\s,;})\]'\"]+)"
)
# Key shapes: the prefix a vendor issues, then the random part. At a boundary on both sides (start or end, punctuation,
# "_", "-") the shape is enough. Glued to a letter or digit ("%3Dsk-...", "tokenhf_...", "AKIA...EXAMPLEabc") the
# match must also hold a random-looking run (_random_run), so "task-management-system" or "graphf_" stay words.
_KEY_SHAPES = lazy_re.compile(
    r"(?P<sk>sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{16,})"
    r"|(?P<hf>hf_[A-Za-z0-9]{20,})"
    r"|(?P<gh>(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"
    r"|(?P<aws>(?:AKIA|ASIA)[0-9A-Z]{16})"
    r"|(?P<slack>xox[abposr]-[0-9A-Za-z][0-9A-Za-z-]{8,})"
    r"|(?P<jwt>eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
_KEEP_PREFIX = {"sk": "sk-", "hf": "hf_"}  # the reader still sees which kind of key was there
_ALNUM_RUN = lazy_re.compile(r"[A-Za-z0-9]{16,}")


def _random_run(text: str) -> bool:
    """16+ letters and digits in a row that mix two of lower case, upper case and digits: random, not a word."""
    for run in _ALNUM_RUN.findall(text):
        if sum((any(c.islower() for c in run), any(c.isupper() for c in run), any(c.isdigit() for c in run))) >= 2:
            return True
    return False


def _shape_sub(m: re.Match[str]) -> str:
    text, start, end = m.string, m.start(), m.end()
    glued = (start > 0 and text[start - 1].isascii() and text[start - 1].isalnum()) or \
            (end < len(text) and text[end].isascii() and text[end].isalnum())
    if glued and m.lastgroup != "jwt" and not _random_run(m.group(0)):
        return m.group(0)
    return _KEEP_PREFIX.get(m.lastgroup or "", "") + MASK


def _mask_value(value: str) -> str:
    """Keep the quoting (so a script or dict stays readable), replace what is inside."""
    if value.startswith('\\"'):
        return '\\"' + MASK + '\\"'
    if value[:1] in "'\"" and len(value) >= 2 and value[-1] == value[0]:
        return value[0] + MASK + value[0]
    return MASK


# Prose such as "--api-key is given 2 times" or "use --api-key when it is public" puts a word, not a value, after
# the name. A credential is never one of these words, so after a space or ": " (not after "=") they are left alone.
_PROSE = frozenset("""
    a an the and or nor but if then than so as at by in on of to for from into onto with without within via per
    is was are were be been being has have had do does did not no must should may might can could will would shall
    given set unset also only twice once when where while which who what how why before after above below here there
    see this that these those it its you your we our they their them all any each every either both other such
    flag flags value values option options variable variables header headers argument arguments parameter field
    token tokens key keys secret secrets password passwords credential credentials required missing empty file env
    everything nothing anything something authentication auth scheme string
    """.split())
_LEADING_PUNCT = "([{<\"'`"
_TRAILING_PUNCT = ")]}>\"'`.,;:!?"


def _is_prose(value: str) -> bool:
    """True for a word of prose where a value could stand: "to", "(or", "when,", "below." -- or no word at all."""
    word = value.lstrip(_LEADING_PUNCT).rstrip(_TRAILING_PUNCT).lower()
    return not word or word in _PROSE


def _flag_sub(m: re.Match[str]) -> str:
    name, sep, value = m.group(1), m.group(2), m.group(3)
    if not is_secret_name(name) or MASK in value or (sep != "=" and _is_prose(value)):
        return m.group(0)
    return f"{name}{sep}{_mask_value(value)}"


def _assign_sub(m: re.Match[str]) -> str:
    quote, name, quote2, sep, value = m.groups()
    if name.lower().endswith("authorization"):
        return m.group(0)  # the header rule has kept the scheme ("Bearer") and masked the credential
    if not is_secret_name(name) or _NOT_A_VALUE.match(value) or MASK in value or ("=" not in sep and _is_prose(value)):
        return m.group(0)
    if value[:1] not in "'\"\\" and len(value) <= 4 and value.lstrip("-").replace(".", "", 1).isdigit():
        return m.group(0)  # "token: 1", "key=0": a short count or index is not a credential
    return f"{quote}{name}{quote2}{sep}{_mask_value(value)}"


def _header_sub(m: re.Match[str]) -> str:
    name, sep, scheme, value = m.groups()
    if not scheme and _is_prose(value):
        return m.group(0)  # "the Authorization: header carries it"
    return f"{name}{sep}{(scheme + ' ') if scheme else ''}{MASK}"


def _userinfo_sub(m: re.Match[str]) -> str:
    scheme, user, password = m.group(1), m.group(2), m.group(3)
    if password is None:
        return f"{scheme}{MASK}@"
    return f"{scheme}{user}:{MASK}@"


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known ``secrets`` and every recognised secret pattern replaced by ``***``."""
    if not text:
        return text
    for form in _forms(secrets):
        text = text.replace(form, MASK)
    text = _HEADER.sub(_header_sub, text)
    text = _API_KEY_HEADER.sub(lambda m: m.group(0) if _is_prose(m.group(3)) else f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _BEARER.sub(lambda m: m.group(0) if _is_prose(m.group(2)) else m.group(1) + MASK, text)
    text = _URL_USERINFO.sub(_userinfo_sub, text)
    text = _FLAG.sub(_flag_sub, text)
    text = _ASSIGN.sub(_assign_sub, text)
    return _KEY_SHAPES.sub(_shape_sub, text)


def _forms(secrets: Iterable[str]) -> list[str]:
    """The literal forms of known secrets, longest first; 1-3 characters would shred ordinary text."""
    forms: set[str] = set()
    for secret in secrets or ():
        if not isinstance(secret, str):
            continue
        for form in (secret, secret.strip()):
            if len(form) >= 4:
                forms.add(form)
                # the same secret as it appears inside a JSON string or an HTML attribute
                escaped = json.dumps(form)[1:-1]
                if escaped != form and len(escaped) >= 4:
                    forms.add(escaped)
    return sorted(forms, key=len, reverse=True)


# --- structured data -------------------------------------------------------------------------

_JSONISH_MAX = 1 << 20  # a string longer than this is not re-parsed as JSON (text rules still apply)


def _mask_secret_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value if (not value or _NOT_A_VALUE.match(value)) else MASK
    if isinstance(value, (list, tuple)):
        return [_mask_secret_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _mask_secret_value(v) for k, v in value.items()}
    return MASK


def _redact_string(value: str, forms: list[str], depth: int) -> str:
    stripped = value.strip()
    if stripped[:1] in "{[" and len(stripped) <= _JSONISH_MAX and depth < 32:
        try:
            parsed = json.loads(stripped)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, (dict, list)):
            cleaned = _walk(parsed, forms, depth + 1)
            if cleaned != parsed:
                compact = "," not in stripped.replace(", ", "") or ", " not in stripped
                return json.dumps(cleaned, separators=(",", ":") if compact else None)
    return redact_text(value, forms)


# A record that names a flag and holds its value ({"flag": "--api-key", "value": "x"}, a fix,
# a finding's numbers): the value is secret when the name is.
_NAME_FIELDS = ("flag", "name", "option", "dest", "key", "env", "variable")
_VALUE_FIELDS = frozenset({"value", "values", "old", "new", "was", "default", "current", "given"})


def _walk(value: Any, forms: list[str], depth: int) -> Any:
    if depth > 200:  # deeper than anything we build; never recurse without bound
        return MASK
    if isinstance(value, str):
        return _redact_string(value, forms, depth)
    if isinstance(value, dict):
        named_secret = any(isinstance(value.get(f), str) and is_secret_name(value[f]) for f in _NAME_FIELDS)
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = _redact_string(k, forms, depth) if isinstance(k, str) else k
            if isinstance(k, str) and (is_secret_name(k.lstrip("-")) or (named_secret and k in _VALUE_FIELDS)):
                out[key] = _mask_secret_value(v)
            else:
                out[key] = _walk(v, forms, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items = [_walk(v, forms, depth + 1) for v in value]
        return _mask_flag_pairs(items)
    return value


def _mask_flag_pairs(items: list[Any]) -> list[Any]:
    """In an argv-like list, the item after a secret flag (``["--api-key", "x"]``) is a secret."""
    for i in range(len(items) - 1):
        a = items[i]
        if isinstance(a, str) and a.startswith("-") and "=" not in a and is_secret_name(a) \
                and isinstance(items[i + 1], str) and not items[i + 1].startswith("-"):
            items[i + 1] = MASK
    return items


def redact_data(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like structure with every secret masked; call it before ``json.dumps``."""
    return _walk(value, _forms(secrets), 0)


def secret_values(*mappings: Any) -> list[str]:
    """The secret strings held in flag/env mappings (``{"api_key": "x"}``, ``{"HF_TOKEN": "y"}``),
    including those nested in JSON-valued flags: to mask wherever they reappear in prose."""
    found: list[str] = []

    def collect(value: Any, secret: bool, depth: int) -> None:
        if depth > 50:
            return
        if isinstance(value, str):
            if secret and value and not _NOT_A_VALUE.match(value):
                found.append(value)
            elif value.strip()[:1] == "{" and len(value) <= _JSONISH_MAX:
                try:
                    collect(json.loads(value), False, depth + 1)
                except (ValueError, RecursionError):
                    pass
        elif isinstance(value, dict):
            for k, v in value.items():
                collect(v, secret or (isinstance(k, str) and is_secret_name(k)), depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v, secret, depth + 1)

    for mapping in mappings:
        collect(mapping, False, 0)
    return found


def secrets_in_text(text: str) -> list[str]:
    """The values that follow secret flags or secret assignments in raw text (a launch script),
    to mask wherever they reappear, even where a parser took them for something else."""
    found: list[str] = []
    if not text:
        return found
    for m in _HEADER.finditer(text):  # "Authorization: Bearer X": X, not the scheme
        if len(m.group(4)) >= 4 and MASK not in m.group(4):
            found.append(m.group(4))
    for rx, name_group, value_group in ((_FLAG, 1, 3), (_ASSIGN, 2, 5)):
        for m in rx.finditer(text):
            name, value = m.group(name_group), m.group(value_group)
            if not is_secret_name(name) or _NOT_A_VALUE.match(value) or name.lower().endswith("authorization"):
                continue
            if value[:1] in "{[" or value.endswith(":"):
                continue  # YAML / JSON structure ("secretKeyRef: {name: ...", a key on the next line), not a value
            value = value.strip("'\"\\")
            if len(value) >= 4 and not _is_prose(value):
                found.append(value)
    return found


def launch_secrets(launch: Any) -> list[str]:
    """Every value to mask in what is printed about one launch: its secret flag and env values (JSON-valued
    flags included) and what follows a secret name in its raw text. A manifest's ``valueFrom`` names a
    Secret and its key (``key: token``): identifiers, not values, and not masked."""
    refs = {str(v) for e in (getattr(launch, "env_from", None) or {}).values()
            for part in (e.spec.values() if isinstance(e.spec, dict) else ()) if isinstance(part, dict)
            for k, v in part.items() if k in ("name", "key")}
    text_found = [v for v in secrets_in_text(getattr(launch, "text", "") or "") if v not in refs]
    return secret_values(getattr(launch, "flags", {}) or {}, getattr(launch, "env", {}) or {}) + text_found


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with secret flag values and secret ``NAME=value`` assignments masked."""
    out = [str(a) for a in argv]
    out = [redact_text(a) if not a.startswith("-") or "=" in a else a for a in out]
    return _mask_flag_pairs([_redact_string(a, [], 1) if a.strip()[:1] in "{[" else a for a in out])


class Redactor:
    """The patterns plus the literal secrets one command knows (an API key from the environment)."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets = [s for s in secrets if isinstance(s, str) and s]
        self._forms = _forms(self.secrets)

    def __call__(self, text: str) -> str:
        return redact_text(text, self._forms)

    def text(self, text: str) -> str:
        return redact_text(text, self._forms)

    def data(self, value: Any) -> Any:
        return _walk(value, self._forms, 0)

    scrub = data  # the probe's older name


# --- terminal safety ---------------------------------------------------------------------------

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte ESC sequences, C0/C1 controls
# except tab and newline, DEL, and the Unicode bidi overrides that reorder what a terminal shows.
_ESCAPES = lazy_re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def safe_terminal_text(text: str) -> str:
    """``text`` without control characters or terminal escape sequences (tab and newline stay)."""
    if not text:
        return text
    return _ESCAPES.sub("", text.replace("\r\n", "\n"))


def safe_terminal_data(value: Any, _depth: int = 0) -> Any:
    """:func:`safe_terminal_text` on every string (keys too) inside a JSON-like structure."""
    if isinstance(value, str):
        return safe_terminal_text(value)
    if _depth > 200:
        return None
    if isinstance(value, dict):
        return {safe_terminal_text(k) if isinstance(k, str) else k: safe_terminal_data(v, _depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_terminal_data(v, _depth + 1) for v in value]
    return value
