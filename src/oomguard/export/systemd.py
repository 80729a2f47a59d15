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
_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "s": " ", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _specifiers(text: str) -> str:
    return text.replace("%", "%%").replace("$", "$$")


def quote_word(word: str) -> str:
    """One argument for ``ExecStart=`` (or one ``Environment=`` assignment)."""
    if word == ";":
        return "\\;"  # a lone ';' separates commands in old systemd
    if word and _PLAIN.match(word):
        return word  # nothing systemd would touch (no %, $, quotes, spaces, backslashes)
    body = (
        word.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\t", "\\t")
        .replace("\r", "\\r")
    )
    return '"' + _specifiers(body) + '"'


def join_lines(text: str) -> str:
    """Unit-file line continuation: a trailing backslash joins the next line with a space."""
    out: list[str] = []
    buf = ""
    for line in text.splitlines():
        if line.endswith("\\") and not line.endswith("\\\\"):
            buf += line[:-1] + " "
            continue
        out.append(buf + line)
        buf = ""
    if buf:
        out.append(buf)
    return "\n".join(out)


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
                        buf.append(_C_ESCAPES.get(text[j + 1], text[j + 1]))
                        j += 2
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
                buf.append(_C_ESCAPES.get(text[i + 1], text[i + 1]))
                i += 2
            else:
                buf.append(c)
                i += 1
        words.append(_unspecify("".join(buf)))
    return words


def unit_values(unit_text: str, key: str) -> list[str]:
    """Every value of ``key=`` in a unit file (continuations joined, comments skipped)."""
    values = []
    for line in join_lines(unit_text).splitlines():
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
