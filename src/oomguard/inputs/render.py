"""Turn a parsed launch back into ``vllm serve`` words, and words into shell text.

``flags_to_argv`` is the inverse of ``oomguard.inputs.command.parse_flag_words``:
typed values go back to the spelling vLLM's argparse reads (JSON-valued flags
as compact JSON, booleans as ``--x`` / ``--no-x``, lists as separate words),
so that reading the result gives back the same flags. When the per-version
flag table (``oomguard.versions``) is available it decides each flag's
option string, negative form and list style; without it the usual vLLM
conventions are assumed (``--dest-with-dashes``, ``--no-`` negatives).

The words are unquoted; each output format (shell, systemd, YAML lists)
quotes them its own way. ``shell_command`` does the POSIX-shell quoting.
"""

from __future__ import annotations

import json
import math
import re
import shlex

from oomguard.records import record

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

# Which names hold a credential is decided by the one redactor (oomguard.redact.is_secret_name):
# renderers never write such values out; oomguard.export moves them to the environment.
SECRET_DEST_ENV = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}


@record(frozen=True)
class FlagForm:
    """How one flag is spelled on a command line."""

    option: str  # e.g. "--max-model-len"
    negative: str | None = None  # e.g. "--no-enable-prefix-caching"
    takes_value: bool = True
    value_type: str = "str"  # the table's type tag: int, float, bool, json, list, size, str
    multi_word: bool = False  # nargs '+' / '*': one word per item
    known: bool = False  # True when the flag table confirmed the spelling
    has_positive: bool = True  # False for store_false flags that only have "--no-x"


def is_secret_dest(dest: str) -> bool:
    """A flag whose (non-boolean) value is a credential: ``api_key``, ``hf_token``, ``*_password`` ..."""
    from oomguard.redact import is_secret_name

    return is_secret_name(dest)


def is_secret_env(name: str) -> bool:
    from oomguard.redact import is_secret_name

    return is_secret_name(name)


def secret_env_for(dest: str) -> str:
    """The environment variable a secret flag's value should come from instead."""
    return SECRET_DEST_ENV.get(dest, "VLLM_" + dest.upper())


def _release(version: str | None):
    """The flag table for ``version``, or None when ``oomguard.versions`` is not built."""
    try:
        from oomguard.versions import get_release
    except ImportError:
        return None
    try:
        return get_release(version)
    except Exception:  # noqa: BLE001 - an unknown version: fall back to conventions
        return None


def _guess(dest: str) -> FlagForm:
    option = "--" + dest.replace("_", "-")
    return FlagForm(option, "--no-" + option[2:])


def flag_form(dest: str, version: str | None = None, *, release: Any = None) -> FlagForm:
    """The spelling of ``dest`` in ``version`` (table when available, else conventions)."""
    rel = release if release is not None else _release(version)
    if rel is None:
        return _guess(dest)
    flags = getattr(rel, "flags", None)
    flag = flags.get(dest) if isinstance(flags, dict) else None
    if flag is None:
        try:
            flag = rel.resolve_option("--" + dest.replace("_", "-")).flag
        except Exception:  # noqa: BLE001 - not in this release's table
            return _guess(dest)
        if getattr(flag, "dest", dest) != dest:
            return _guess(dest)
    deprecated = set(getattr(flag, "deprecated_options", ()) or ())
    longs = [o for o in (getattr(flag, "options", ()) or ()) if o.startswith("--")]
    options = [o for o in longs if o not in deprecated] or longs
    negs = [o for o in (getattr(flag, "negatives", None) or getattr(flag, "neg", None) or ()) if o.startswith("--")]
    negs = [o for o in negs if o not in deprecated] or negs
    canonical = "--" + dest.replace("_", "-")
    option = canonical if canonical in options else (options[0] if options else canonical)
    neg = ("--no-" + option[2:]) if ("--no-" + option[2:]) in negs else (negs[0] if negs else None)
    vtype = str(getattr(getattr(flag, "type", "str"), "value", getattr(flag, "type", "str")) or "str")
    nargs = getattr(flag, "nargs", None)
    takes_value = bool(getattr(flag, "takes_value", True))
    multi_word = nargs in ("+", "*") or (vtype == "list" and nargs is not None)
    return FlagForm(option, neg, takes_value, vtype, multi_word, True, bool(options))


def format_value(value: Any) -> str:
    """One value as vLLM's argparse reads it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"cannot write {value!r} as a flag value")
        return repr(value)
    return str(value)


def flag_words(dest: str, value: Any, form: FlagForm) -> list[str]:
    """The words for one flag; ``[]`` when the value is vLLM's implicit default."""
    if value is None:
        return []
    if isinstance(value, bool):
        if form.known and form.takes_value:  # a "--x true|false" flag
            return [form.option, format_value(value)]
        if value:
            return [form.option] if form.has_positive else []  # True is a store_false flag's default
        # store_true flags have no negative: False is their default, so nothing is written
        return [form.negative] if form.negative else []
    if isinstance(value, (list, tuple)) and form.value_type != "json":
        items = [format_value(v) for v in value]
        if not items:
            return []
        if form.multi_word or not form.known:
            return [form.option, *items]
        return [form.option, ",".join(items)]
    text = format_value(value)
    if text.startswith("-") or text == "":
        # "--opt=-1" keeps a negative or dash-led value attached to its option
        return [f"{form.option}={text}"]
    return [form.option, text]


def flags_to_argv(
    model: str | None,
    flags: dict[str, Any],
    *,
    version: str | None = None,
    model_option: bool = False,
    drop_secrets: bool = False,
) -> list[str]:
    """``[MODEL, --flag, value, ...]`` for ``vllm serve`` (without the program words).

    ``model_option`` writes ``--model MODEL`` instead of the positional (the
    ``vllm/vllm-openai`` image's entry point accepts both). ``drop_secrets``
    leaves out flags such as ``--api-key`` (see ``SECRET_DEST``).
    """
    rel = _release(version)
    argv: list[str] = []
    if model:
        argv += ["--model", model] if model_option else [model]
    for dest, value in flags.items():
        if dest in ("model", "model_tag", "config"):
            continue
        if drop_secrets and is_secret_dest(dest):
            continue
        argv += flag_words(dest, value, flag_form(dest, version, release=rel) if rel is not None else _guess(dest))
    return argv


def shell_quote(word: str) -> str:
    return shlex.quote(word)


def option_groups(argv: list[str]) -> list[list[str]]:
    """Split argv into ``[option, values...]`` groups (positional words form their own)."""
    groups: list[list[str]] = []
    for word in argv:
        if word.startswith("--") or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    return groups


def shell_command(
    prefix: list[str],
    argv: list[str],
    *,
    indent: str = "  ",
    one_line: bool = False,
    prefix_lines: list[str] | None = None,
) -> str:
    """A shell command line: ``prefix`` words then argv, one option per line with ``\\``.

    ``prefix_lines`` are already-quoted lines placed after the first (``docker run``'s options).
    """
    head = " ".join(shell_quote(w) for w in prefix)
    groups = option_groups(argv)
    # The positional model stays on the first line.
    if groups and not groups[0][0].startswith("--"):
        head = " ".join(x for x in (head, " ".join(shell_quote(w) for w in groups.pop(0))) if x)
    parts = [*(prefix_lines or []), *(" ".join(shell_quote(w) for w in g) for g in groups)]
    lines = [x for x in (head, *parts) if x]
    if one_line:
        return " ".join(lines)
    return (" \\\n" + indent).join(lines)
