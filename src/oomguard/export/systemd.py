"""systemd's command-line quoting, both ways.

systemd splits ``ExecStart=`` itself (no shell): words are separated by
whitespace, double quotes allow C escapes (``\\"``, ``\\\\``, ``\\n``), single
quotes are literal, ``%`` starts a specifier (``%%`` is a literal percent) and
``$VAR`` / ``${VAR}`` are environment substitutions (``$$`` is a literal
dollar); a line ending in a backslash continues on the next line. See
systemd.service(5) "Command lines" and systemd.unit(5) "Specifiers".

``quote_word`` writes one argument so that systemd hands it to the program
unchanged; ``split_command`` undoes it (the export tests read units back with
it). Shell quoting (``shlex``) is not the same: ``'a'\\''b'`` means nothing to
systemd, and ``$`` and ``%`` need doubling in every position.
"""

from __future__ import annotations

import re

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
}


def _specifiers(text: str) -> str:
    return text.replace("%", "%%").replace("$", "$$")


def _escape_char(c: str) -> str:
    if c == "\\":
        return "\\\\"
    if c == '"':
        return '\\"'
    if c in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[c]
    if not c.isprintable() and c != " ":
        # control and line-separator characters (U+0085, U+2028) as C escapes: a unit file is lines
        return f"\\x{ord(c):02x}" if ord(c) < 0x80 else (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    return c


def quote_word(word: str) -> str:
    """One argument for ``ExecStart=`` (or one ``Environment=`` assignment)."""
    if word == ";":
        return "\\;"  # a lone ';' separates commands in old systemd
    if word and _PLAIN.match(word):
        return word  # nothing systemd would touch (no %, $, quotes, spaces, backslashes)
    body = "".join(_escape_char(c) for c in word)
    return '"' + _specifiers(body) + '"'


def join_lines(text: str) -> str:
    """Unit-file line continuation: a trailing backslash joins the next line with a space."""
    out: list[str] = []
    buf = ""
    for line in text.split("\n"):  # not splitlines(): U+0085 / U+2028 are not line ends in a unit file
        if line.endswith("\\") and not line.endswith("\\\\"):
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
    return _C_ESCAPES.get(c, c), 1


def _unspecify(text: str) -> str:
    # %% -> %, $$ -> $ ; other specifiers and variables are left as written
    return re.sub(r"%%|\$\$", lambda m: m.group(0)[0], text)


def split_command(text: str) -> list[str]:
    """The argv systemd would run for an ``ExecStart=`` value (after line joining)."""
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\n":
            i += 1
        if i >= n:
            break
        buf: list[str] = []
        while i < n and text[i] not in " \t\n":
            c = text[i]
            if c == '"':
                j = i + 1
                while j < n and text[j] != '"':
                    if text[j] == "\\" and j + 1 < n:
                        ch, width = _unescape(text, j + 1)
                        buf.append(ch)
                        j += 1 + width
                        continue
                    buf.append(text[j])
                    j += 1
                if j >= n:
                    raise ValueError("unterminated double quote in systemd command line")
                i = j + 1
            elif c == "'":
                j = text.find("'", i + 1)
                if j < 0:
                    raise ValueError("unterminated single quote in systemd command line")
                buf.append(text[i + 1 : j])
                i = j + 1
            elif c == "\\" and i + 1 < n:
                ch, width = _unescape(text, i + 1)
                buf.append(ch)
                i += 1 + width
            else:
                buf.append(c)
                i += 1
        words.append(_unspecify("".join(buf)))
    return words


def unit_values(unit_text: str, key: str) -> list[str]:
    """Every value of ``key=`` in a unit file (continuations joined, comments skipped)."""
    values = []
    for line in join_lines(unit_text).split("\n"):
        s = line.strip()
        if s.startswith(("#", ";")) or "=" not in s:
            continue
        k, _, v = s.partition("=")
        if k.strip() == key:
            values.append(v.strip())
    return values


def environment(unit_text: str) -> dict[str, str]:
    """The ``Environment=`` assignments of a unit, unquoted."""
    env: dict[str, str] = {}
    for value in unit_values(unit_text, "Environment"):
        for word in split_command(value):
            k, eq, v = word.partition("=")
            if eq:
                env[k] = v
    return env
