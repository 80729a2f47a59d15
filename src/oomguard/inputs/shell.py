"""A small POSIX-shell lexer for launch scripts. It never executes anything.

It understands what ``start_api.sh`` files use: comments, line continuations,
single and double quotes, ``export VAR=...``, ``VAR=... cmd``, ``$VAR`` /
``${VAR}`` / ``${VAR:-default}`` expansion from variables the script itself
sets, and command separators (newline, ``;``, ``&&``, ``||``, ``|``, ``&``).
Every word keeps its source span so a fixer can rewrite the script in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from oomguard.errors import InputError

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass
class Word:
    text: str  # after quote removal and expansion
    raw: str  # as written
    line: int  # 1-based line where the word starts
    start: int  # offset in the source text
    end: int
    unresolved: tuple[str, ...] = ()  # variables we could not expand
    quoted: str = ""  # "'" or '"' when any part was quoted


@dataclass
class Command:
    words: list[Word]
    line: int
    assignments: dict[str, str] = field(default_factory=dict)  # VAR=x prefixes


@dataclass
class Script:
    commands: list[Command]
    variables: dict[str, str]  # every variable the script assigns, in order
    comments: list[tuple[int, str]]  # (line, text) for inline directives


def _expand(text: str, variables: dict[str, str], unresolved: list[str]) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        default = m.group(2)
        if name in variables:
            return variables[name]
        if default is not None:
            return default
        unresolved.append(name)
        return m.group(0)

    return _VAR.sub(sub, text)


def lex(text: str, *, path: str | None = None, env: dict[str, str] | None = None) -> Script:
    """Split a script into commands of words, expanding the script's own variables."""
    variables: dict[str, str] = dict(env or {})
    commands: list[Command] = []
    comments: list[tuple[int, str]] = []
    words: list[Word] = []
    i, n, line = 0, len(text), 1
    cmd_line = 1

    def flush() -> None:
        nonlocal words
        if not words:
            return
        assigns: dict[str, str] = {}
        rest = list(words)
        # leading VAR=value words (and `export VAR=value`)
        is_export = rest and rest[0].text in ("export", "declare", "local", "readonly")
        if is_export:
            rest = [w for w in rest[1:] if not w.text.startswith("-")]
        while rest and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", rest[0].text):
            k, v = rest[0].text.split("=", 1)
            assigns[k] = v
            rest = rest[1:]
        if is_export or not rest:
            variables.update(assigns)
            if is_export and rest:  # `export VAR` with no value
                pass
            commands.append(Command(rest if not is_export else [], words[0].line, assigns))
        else:
            commands.append(Command(rest, words[0].line, assigns))
        words = []

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2
            line += 1
            continue
        if c == "\n":
            flush()
            line += 1
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        if c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            comments.append((line, text[i:j]))
            i = j
            continue
        if c in ";&|":
            flush()
            i += 1
            while i < n and text[i] in "&|":
                i += 1
            continue
        if c in "()" or (c == "{" and (i + 1 < n and text[i + 1] in " \n")) or c == "}" and not words:
            i += 1
            continue
        # a word
        start, start_line = i, line
        parts: list[str] = []
        unresolved: list[str] = []
        quoted = ""
        while i < n:
            c = text[i]
            if c in " \t\r\n;|&" or (c == "#" and False):
                if c == "&" and parts and parts[-1].endswith(">"):  # 2>&1
                    parts.append(c)
                    i += 1
                    continue
                break
            if c == "\\":
                if i + 1 < n and text[i + 1] == "\n":
                    i += 2
                    line += 1
                    break
                if i + 1 < n:
                    parts.append(text[i + 1])
                i += 2
                continue
            if c == "'":
                j = text.find("'", i + 1)
                if j < 0:
                    raise InputError("unterminated single quote", file=path, line=line)
                seg = text[i + 1 : j]
                line += seg.count("\n")
                parts.append(seg)
                quoted = quoted or "'"
                i = j + 1
                continue
            if c == '"':
                j = i + 1
                buf = []
                while j < n and text[j] != '"':
                    if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`\n':
                        if text[j + 1] != "\n":
                            buf.append(text[j + 1])
                        j += 2
                        continue
                    buf.append(text[j])
                    j += 1
                if j >= n:
                    raise InputError("unterminated double quote", file=path, line=start_line)
                seg = "".join(buf)
                line += text[i:j].count("\n")
                parts.append(_expand(seg, variables, unresolved))
                quoted = quoted or '"'
                i = j + 1
                continue
            if c == "$" and i + 1 < n and text[i + 1] == "(":
                # command substitution: keep verbatim, never run it
                depth, j = 0, i
                while j < n:
                    if text[j] == "(":
                        depth += 1
                    elif text[j] == ")":
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                parts.append(text[i : j + 1])
                unresolved.append(text[i : j + 1])
                i = j + 1
                continue
            j = i
            while j < n and text[j] not in " \t\r\n;|&'\"\\" and not (text[j] == "$" and j + 1 < n and text[j + 1] == "("):
                j += 1
            parts.append(_expand(text[i:j], variables, unresolved))
            i = j
        if not words:
            cmd_line = start_line
        words.append(Word("".join(parts), text[start:i], start_line, start, i, tuple(unresolved), quoted))
    flush()
    del cmd_line
    return Script(commands, variables, comments)
