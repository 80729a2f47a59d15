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
back, as strictly as systemd (or more: a quote inside a word, which these writers
never produce, is an error rather than a guess).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from oomguard.export.fields import CONTROL, ENV_NAME, describe, visible
from oomguard.export.shell import EnvRef, Word

_PLAIN = re.compile(r"^[A-Za-z0-9_@+=:,./\-\[\]{}]+$")
_C_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    ";": ";",
}


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


# -- reading back --------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One logical line of a unit file."""

    kind: str  # "comment" | "blank" | "section" | "setting"
    section: str | None
    key: str = ""
    value: str = ""


def _physical_lines(text: str) -> list[str]:
    # systemd's read_line() ends a line at \n, \r, \r\n or NUL
    return re.split(r"\r\n|[\n\r\x00]", text)


def parse_unit(text: str) -> list[Entry]:
    """The logical lines of a unit file as systemd reads them (continuations joined)."""
    entries: list[Entry] = []
    section: str | None = None
    buf: str | None = None
    lines = _physical_lines(text)
    if lines and lines[-1] == "":
        lines.pop()
    for raw in lines:
        stripped = raw.strip()
        if buf is None:
            if not stripped:
                entries.append(Entry("blank", section))
                continue
            if stripped[0] in "#;":
                entries.append(Entry("comment", section, value=stripped))
                continue
            if stripped.startswith("["):
                if not stripped.endswith("]"):
                    raise ValueError(f"malformed section header {visible(stripped[:40])!r}")
                section = stripped[1:-1]
                entries.append(Entry("section", section))
                continue
        elif stripped[:1] in ("#", ";"):
            continue  # a comment inside a continuation is dropped (systemd.syntax(7))
        line = raw if buf is None else buf + raw
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf = line[:-1] + " "
            continue
        buf = None
        if "=" not in line:
            raise ValueError(f"line without '=' in [{section}]: {visible(line.strip()[:40])!r}")
        key, _, value = line.partition("=")
        entries.append(Entry("setting", section, key.strip(), value.strip()))
    if buf is not None:
        raise ValueError("the unit ends inside a line continuation")
    return entries


def join_lines(text: str) -> str:
    """Unit-file line continuation: a trailing backslash joins the next line with a space."""
    out: list[str] = []
    buf = ""
    for line in text.split("\n"):
        if line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            buf += line[:-1] + " "
            continue
        out.append(buf + line)
        buf = ""
    if buf:
        out.append(buf)
    return "\n".join(out)


def _unescape(text: str, k: int) -> tuple[str, int]:
    """The character of the escape starting at ``text[k]`` (after the backslash) and its length."""
    c = text[k]
    for lead, digits in (("x", 2), ("u", 4), ("U", 8)):
        if c == lead:
            code = text[k + 1 : k + 1 + digits]
            if len(code) == digits and all(ch in "0123456789abcdefABCDEF" for ch in code):
                return chr(int(code, 16)), 1 + digits
            raise ValueError(f"malformed \\{lead} escape")
    if c in "01234567":
        code = text[k : k + 3]
        if len(code) == 3 and all(ch in "01234567" for ch in code):
            return chr(int(code, 8)), 3
        raise ValueError("malformed octal escape")
    if c not in _C_ESCAPES:
        raise ValueError(f"unknown escape \\{visible(c)}")
    return _C_ESCAPES[c], 1


def _unspecify(text: str, dollars: bool) -> str:
    # %% -> % (and $$ -> $ on command lines); other specifiers and variables are left as written
    return re.sub(r"%%|\$\$" if dollars else r"%%", lambda m: m.group(0)[0], text)


_REF_WORD = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def split_words(text: str, *, dollars: bool = True) -> list[Word]:
    """systemd's unquoting of a command line (``dollars``) or an ``Environment=`` value.

    On a command line, a word that is exactly ``${NAME}`` is returned as ``EnvRef(NAME)``:
    systemd replaces it with the variable's value (a literal ``${X}`` is written ``$${X}``).
    """
    words: list[Word] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\n":
            i += 1
        if i >= n:
            break
        if dollars:
            m = _REF_WORD.match(text, i)
            if m and (m.end() == n or text[m.end()] in " \t\n"):
                words.append(EnvRef(m.group(1)))
                i = m.end()
                continue
        buf: list[str] = []
        quote = text[i] if text[i] in "\"'" else None
        if quote:
            j = i + 1
            while j < n and text[j] != quote:
                if text[j] == "\\" and j + 1 < n:
                    ch, width = _unescape(text, j + 1)
                    buf.append(ch)
                    j += 1 + width
                    continue
                buf.append(text[j])
                j += 1
            if j >= n:
                raise ValueError(f"unterminated {quote} quote in a systemd setting")
            i = j + 1
            if i < n and text[i] not in " \t\n":
                raise ValueError("a closing quote must be followed by whitespace")
        else:
            while i < n and text[i] not in " \t\n":
                c = text[i]
                if c in "\"'":
                    raise ValueError("a quote inside a word (systemd reads it literally; oomguard never writes one)")
                if c == "\\" and i + 1 < n:
                    ch, width = _unescape(text, i + 1)
                    buf.append(ch)
                    i += 1 + width
                    continue
                buf.append(c)
                i += 1
        words.append(_unspecify("".join(buf), dollars))
    return words


def split_command(text: str) -> list[Word]:
    """The argv systemd would run for an ``ExecStart=`` value (after line joining).

    A ``${NAME}`` word is ``EnvRef(NAME)`` (systemd replaces it with the variable's value).
    """
    return split_words(text, dollars=True)


def unit_values(unit_text: str, key: str) -> list[str]:
    """Every value of ``key=`` in a unit file (continuations joined, comments skipped)."""
    return [e.value for e in parse_unit(unit_text) if e.kind == "setting" and e.key == key]


def environment(unit_text: str) -> dict[str, str]:
    """The ``Environment=`` assignments of a unit, unquoted."""
    env: dict[str, str] = {}
    for value in unit_values(unit_text, "Environment"):
        for word in split_words(value, dollars=False):
            k, eq, v = str(word).partition("=")
            if eq:
                env[k] = v
    return env
