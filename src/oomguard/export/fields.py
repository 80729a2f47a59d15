"""What may go into an export, field by field, before any target quotes it.

Every value an export writes comes from the launch (model id, flag values,
environment) or from the command line (``--name``, ``--image``,
``--vllm-bin``, the launch file's name). A value holding a line break or
another control character can become structure in the output (an
``ExecStartPre=`` line, a second shell command, a YAML key), so each target
either escapes such characters in its own grammar or refuses the value here,
with one line naming the field and never the value itself (it may be a secret):

- NUL: refused everywhere (no argv word or environment value can hold it);
- environment variable names: ``[A-Za-z_][A-Za-z0-9_]*`` everywhere (systemd's,
  POSIX's and Kubernetes' common rule); a name is structure in every target;
- systemd ``ExecStart=`` words and YAML scalars: escaped (C escapes,
  YAML double-quoted escapes); shell words: ANSI-C ``$'...'`` quoting;
- values of an env file or a systemd ``Environment=`` line: refused (docker's
  ``--env-file`` is line-based without escapes; systemd rejects non-printable
  characters in environment values);
- names of things (``--name``, ``--image``, ``--vllm-bin``): refused;
- the launch file's name in a header comment: shown escaped (``\\n``).
"""

from __future__ import annotations

import re

from oomguard.errors import InputError

# C0 and C1 controls, DEL, the Unicode line and paragraph separators (YAML 1.1 and many editors
# break lines at U+0085, U+2028 and U+2029), the bidi overrides and isolates that reorder what a
# reader sees (trojan-source), and the byte-order mark.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def has_control(text: str) -> bool:
    return CONTROL.search(text) is not None


def describe(c: str) -> str:
    """``U+000A (line feed)`` style, for messages that must not echo the value."""
    names = {"\n": "line feed", "\r": "carriage return", "\t": "tab", "\x00": "NUL", "\x85": "next line",
             "\u2028": "line separator", "\u2029": "paragraph separator", "\x1b": "escape"}
    name = names.get(c)
    return f"U+{ord(c):04X}" + (f" ({name})" if name else "")


def refuse_control(field: str, value: str, *, why: str = "") -> None:
    """InputError naming ``field`` when ``value`` holds a control character (the value is not shown)."""
    m = CONTROL.search(value)
    if m:
        raise InputError(f"{field}: contains the control character {describe(m.group(0))}"
                         + (f"; {why}" if why else "") + ": refused")


def refuse_nul(field: str, value: str) -> None:
    if "\x00" in value:
        raise InputError(f"{field}: contains a NUL character, which no command line or environment can carry: refused")


def check_env_name(name: str, what: str = "environment variable") -> None:
    if not ENV_NAME.fullmatch(name):
        raise InputError(f"{what} {visible(name[:60])!s}: not a valid name (letters, digits and '_', "
                         "not starting with a digit): refused")


def visible(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x1b``, ``\\u2028``).

    For comments and descriptions: the text stays readable and can never break a line.
    """
    def esc(m: re.Match[str]) -> str:
        c = m.group(0)
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
        if c in named:
            return named[c]
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    return CONTROL.sub(esc, text)
