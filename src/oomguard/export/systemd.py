"""systemd's unit-file grammar, both ways: quoting what the export writes, parsing it back.

From systemd.syntax(7), systemd.service(5) "Command lines", systemd.exec(5)
"Environment" and systemd.unit(5) "Specifiers" (systemd 252's manual pages):

- A unit file is lines; a line ending in a backslash continues on the next (the
  backslash becomes a space); ``#`` and ``;`` start comments; ``[Section]`` headers.
  systemd's line reader also ends a line at a carriage return or a NUL, so no raw
  control character may appear in a unit at all: every one is escaped or refused.
- ``ExecStart=`` is split into words by systemd itself (no shell): a word may be
  wrapped in double or single quotes (the opening quote only at the start of a word),
  C escapes are decoded (``\\n``, ``\\t``, ``\\xHH``, ``\\uHHHH``, ``\\"``, ``\\\\`` ...),
  ``%`` starts a specifier (``%%`` is a literal percent), ``${VAR}`` is replaced by the
  variable's value as one argument and ``$$`` is a literal dollar; a lone ``;`` separates
  commands (``\\;`` is a literal one). The first word, the program, may hold no control
  character and must not begin with one of the prefixes ``@-:+!`` (an absolute path).
- ``Environment=`` assignments are unquoted the same way, but ``$`` has no special
  meaning there (no ``$$``), specifiers are expanded (``%%``), names are
  ``[A-Za-z_][A-Za-z0-9_]*`` and values may hold no non-printable character (refused).
- ``Description=`` is free text with specifiers: ``%%``, and control characters shown
  escaped (a description is read by people, not by a program).

``quote_word`` / ``quote_assignment`` write; ``parse_unit`` / ``split_command`` read
back (``oomguard.inputs.systemd_unit``, the reader ``oomguard check`` uses for units too),
as strictly as systemd (or more: a quote inside a word, which these writers never
produce, is an error rather than a guess).
"""

from __future__ import annotations

import re

from oomguard.export.fields import CONTROL, ENV_NAME, describe, visible
from oomguard.export.shell import EnvRef, Word
from oomguard.inputs import systemd_unit as _unit
from oomguard.inputs.systemd_unit import Entry, environment, join_lines, parse_unit, split_words, unit_values

__all__ = ["Entry", "SystemdQuoteError", "environment", "join_lines", "parse_unit", "quote_assignment", "quote_program",
           "quote_word", "split_command", "split_words", "text_value", "unit_values"]

_PLAIN = re.compile(r"^[A-Za-z0-9_@+=:,./\-\[\]{}]+$")


class SystemdQuoteError(ValueError):
    """A value systemd cannot carry in this place; the message names the character, never the value."""


def _escape_char(c: str) -> str:
    if c == "\\":
        return "\\\\"
    if c == '"':
        return '\\"'
    if c in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[c]
    if CONTROL.match(c) or (not c.isprintable() and c != " "):
        # control and line-separator characters as C escapes: a unit file is lines
        return f"\\x{ord(c):02x}" if ord(c) < 0x80 else (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    return c


def quote_word(word: Word) -> str:
    """One ``ExecStart=`` argument, so that systemd hands it to the program unchanged."""
    if isinstance(word, EnvRef):
        if word.suffix:
            raise SystemdQuoteError("a reference with a suffix is not written in units")
        return "${" + word.name + "}"  # replaced by the variable's exact value, one argument
    if "\x00" in word:
        raise SystemdQuoteError("contains a NUL character, which no command line can carry")
    if word == ";":
        return "\\;"  # a lone ';' separates commands
    if word and _PLAIN.match(word):
        return word  # nothing systemd would touch (no %, $, quotes, spaces, backslashes)
    body = "".join(_escape_char(c) for c in word)
    return '"' + body.replace("%", "%%").replace("$", "$$") + '"'


def quote_program(path: str) -> str:
    """The first ``ExecStart=`` word: an absolute path without control characters."""
    if not path.startswith("/"):
        raise SystemdQuoteError("must be an absolute path (systemd reads a leading @, -, :, + or ! as a prefix)")
    m = CONTROL.search(path)
    if m:
        raise SystemdQuoteError(f"contains the control character {describe(m.group(0))} (systemd refuses it in the command)")
    return quote_word(path)


def quote_assignment(name: str, value: str) -> str:
    """One ``Environment=`` assignment (``$`` is literal there; ``%`` is a specifier)."""
    if not ENV_NAME.fullmatch(name):
        raise SystemdQuoteError("is not a valid environment variable name")
    m = CONTROL.search(value)
    if m:
        raise SystemdQuoteError(f"contains the control character {describe(m.group(0))} "
                                "(systemd rejects non-printable characters in environment values)")
    word = f"{name}={value}"
    if _PLAIN.match(word):
        return word
    body = word.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + body.replace("%", "%%") + '"'


def text_value(text: str) -> str:
    """Free text for ``Description=``: specifiers doubled, control characters shown escaped."""
    return visible(text).replace("%", "%%").strip()


def split_command(text: str) -> list[Word]:
    """The argv systemd would run for an ``ExecStart=`` value; a ``${NAME}`` word is ``EnvRef(NAME)``."""
    return [EnvRef(w.name) if isinstance(w, _unit.VarRef) else w for w in _unit.split_command(text)]
