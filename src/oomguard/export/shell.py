"""Shell quoting for what the exports hand to a shell: the ``docker run`` line and env files.

One word at a time, never by pasting text together:

- an ordinary word is quoted like ``shlex.quote`` (single quotes, ``'\\''`` for a quote);
- a word holding an ASCII control character (a newline in an inline chat template, a tab)
  is written in ANSI-C quotes, ``$'...'`` with ``\\n``, ``\\t``, ``\\xHH`` escapes (bash, zsh,
  ksh and POSIX.1-2024 ``sh``), so that no character of the value ever starts a new line of
  the script; a non-ASCII control character (U+0085, U+2028, bidi overrides) is refused
  (``$'\\u...'`` depends on the locale of the shell that runs it);
- a reference to an environment variable (``EnvRef``) becomes ``"${NAME}"``: one word, the
  variable's exact value.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from oomguard.export.fields import CONTROL, describe

_ANSI = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\x1b": "\\E",
         "\\": "\\\\", "'": "\\'"}


@dataclass(frozen=True)
class EnvRef:
    """A word that is exactly the value of environment variable ``name`` (a secret moved out)."""

    name: str
    suffix: str = ""  # literal text after the value (``${HOME}/.cache/...``); never user input

    def __str__(self) -> str:  # how the read-back's shell lexer shows an unset variable
        return "${" + self.name + "}" + self.suffix


Word = str | EnvRef


class ShellQuoteError(ValueError):
    """A word the shell targets cannot carry; the message names the character, never the value."""


def quote(word: Word, field: str = "a word") -> str:
    if isinstance(word, EnvRef):
        return '"${' + word.name + '}"' + (shlex.quote(word.suffix) if word.suffix else "")
    if "\x00" in word:
        raise ShellQuoteError(f"{field}: contains a NUL character, which no command line can carry")
    m = CONTROL.search(word)
    if m is None:
        return shlex.quote(word)
    bad = next((c for c in word if CONTROL.match(c) and ord(c) >= 0x80), None)
    if bad is not None:
        raise ShellQuoteError(f"{field}: contains the control character {describe(bad)}, which a shell script "
                              "cannot carry portably (use --to systemd, compose, kubernetes or yaml)")
    return "$'" + "".join(_ANSI.get(c, f"\\x{ord(c):02x}" if CONTROL.match(c) else c) for c in word) + "'"


def join(words: list[Word], field: str | None = None) -> str:
    """Words quoted and joined; ``field`` names them in an error (default: the option they follow)."""
    out = []
    current = field or "the model"
    for w in words:
        if field is None and isinstance(w, str) and w.startswith("-"):
            current = w.split("=", 1)[0]
        out.append(quote(w, current))
    return " ".join(out)


_PLAIN_ENV = re.compile(r"[A-Za-z0-9_\-.,/:@%+=]*")


def env_value(value: str) -> str:
    """An env-file value: bare when every reader takes it literally, else shell-quoted.

    docker's ``--env-file`` and ``kubectl create secret --from-env-file`` keep quotes literally;
    systemd's ``EnvironmentFile=`` and a shell's ``set -a; . FILE`` remove them. A value with
    spaces, quotes, ``$`` or backslashes gets quotes (a note says so); control characters are
    refused before this (``fields``): no env-file reader has a common escape for them.
    """
    if _PLAIN_ENV.fullmatch(value):
        return value
    return shlex.quote(value)
