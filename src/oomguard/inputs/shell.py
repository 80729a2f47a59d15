"""A small POSIX-shell lexer for launch scripts. It never executes anything.

It understands what ``start_api.sh`` files use: comments, line continuations,
single and double quotes, ANSI-C quotes (``$'...'``), ``export VAR=...``,
``VAR=... cmd``, ``$VAR`` / ``${VAR}`` / ``${VAR:-default}`` expansion from
variables the script itself sets, and command separators (newline, ``;``,
``&&``, ``||``, ``|``, ``&``). Command substitutions (``$(...)`` and
backticks) are kept verbatim inside one word and marked unresolved: they are
never run, split or rewritten.

Expansion is bounded: one variable's value may not exceed
``MAX_VARIABLE_CHARS`` and all text produced by expansion together may not
exceed ``MAX_EXPANSION_CHARS`` (a 1 KiB script doubling a variable 40 times
would otherwise ask for 2**40 characters). Every word keeps its source span
so a fixer can rewrite the script in place.
"""

from __future__ import annotations

import re

from oomguard.errors import InputError
from oomguard.records import field, record
import oomguard.lazy_re as lazy_re

MAX_VARIABLE_CHARS = 64 * 1024  # a model path, a JSON config: a few hundred characters
MAX_EXPANSION_CHARS = 4 * 1024 * 1024

_VAR = lazy_re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


@record
class Word:
    """One shell word after quote removal, with its position and the variables it could not expand."""
    text: str  # after quote removal and expansion
    raw: str  # as written
    line: int  # 1-based line where the word starts
    start: int  # offset in the source text
    end: int
    unresolved: tuple[str, ...] = ()  # variables we could not expand
    quoted: str = ""  # "'" or '"' when any part was quoted
    column: int = 0  # 1-based column where the word starts (0: not known)


@record
class Command:
    """One simple command of a script: its environment assignments and its words."""
    words: list[Word]
    line: int
    assignments: dict[str, str] = field(default_factory=dict)  # VAR=x prefixes


@record
class Script:
    """The commands of a script, in order, with the variables it assigns and its comments."""
    commands: list[Command]
    variables: dict[str, str]  # every variable the script assigns, in order
    comments: list[tuple[int, str]]  # (line, text) for inline directives


class _Budget:
    """What expansion has produced so far, against the caps."""

    def __init__(self, path: str | None):
        self.path = path
        self.used = 0
        self.line = 1

    def take(self, text: str, what: str) -> str:
        if len(text) > MAX_VARIABLE_CHARS:
            raise InputError(f"shell expansion of {what} is longer than {MAX_VARIABLE_CHARS // 1024} KiB; "
                             "oomguard does not expand values that large", file=self.path, line=self.line)
        self.used += len(text)
        if self.used > MAX_EXPANSION_CHARS:
            raise InputError(f"shell expansion produces more than {MAX_EXPANSION_CHARS // 2**20} MiB of text "
                             f"(at {what}); oomguard stops there", file=self.path, line=self.line)
        return text


def _expand(text: str, variables: dict[str, str], unresolved: list[str], budget: _Budget | None = None) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        default = m.group(2)
        if name in variables:
            value = variables[name]
        elif default is not None:
            value = default
        else:
            unresolved.append(name)
            return m.group(0)
        return budget.take(value, "$" + name) if budget is not None else value

    out = _VAR.sub(sub, text)
    if budget is not None and len(out) > MAX_VARIABLE_CHARS:
        budget.take(out, repr(text if len(text) <= 40 else text[:40] + "…"))
    return out


_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b", "E": "\x1b",
           "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c(text: str, i: int, path: str | None, line: int) -> tuple[str, int]:
    """Decode ``$'...'`` starting at ``text[i] == "$"``; (value, index after the closing quote)."""
    n = len(text)
    j = i + 2
    out: list[str] = []
    while j < n and text[j] != "'":
        c = text[j]
        if c == "\\" and j + 1 < n:
            e = text[j + 1]
            if e in _ANSI_C:
                out.append(_ANSI_C[e])
                j += 2
                continue
            m = (re.compile(r"x([0-9A-Fa-f]{1,2})").match(text, j + 1) or re.compile(r"u([0-9A-Fa-f]{1,4})").match(text, j + 1)
                 or re.compile(r"U([0-9A-Fa-f]{1,8})").match(text, j + 1))
            if m:
                code = int(m.group(1), 16)
                out.append(chr(code) if code <= 0x10FFFF else "\ufffd")
                j = m.end()
                continue
            m = re.compile(r"[0-7]{1,3}").match(text, j + 1)
            if m:
                out.append(chr(int(m.group(0), 8) & 0xFF))
                j = m.end()
                continue
            out.append("\\" + e)  # unknown escape: bash keeps it as written
            j += 2
            continue
        out.append(c)
        j += 1
    if j >= n:
        raise InputError("unterminated $'...' quote", file=path, line=line)
    return "".join(out), j + 1


def _substitution_end(text: str, i: int) -> int:
    """Index just past the ``$(...)`` starting at ``text[i]``; quotes inside are skipped (never run)."""
    n = len(text)
    depth, j = 0, i + 1
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "'":
            k = text.find("'", j + 1)
            j = n if k < 0 else k + 1
            continue
        if c == '"':
            k = j + 1
            while k < n and text[k] != '"':
                k += 2 if text[k] == "\\" else 1
            j = k + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return n


def _backtick_end(text: str, i: int) -> int:
    """Index just past the backtick substitution starting at ``text[i] == "`"``."""
    n = len(text)
    j = i + 1
    while j < n and text[j] != "`":
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, n)


def lex(text: str, *, path: str | None = None, env: dict[str, str] | None = None) -> Script:
    """Split a script into commands of words, expanding the script's own variables."""
    variables: dict[str, str] = dict(env or {})
    commands: list[Command] = []
    comments: list[tuple[int, str]] = []
    words: list[Word] = []
    i, n, line = 0, len(text), 1
    cmd_line = 1
    budget = _Budget(path)

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
            budget.line = rest[0].line
            assigns[k] = budget.take(v, "$" + k) if len(v) > MAX_VARIABLE_CHARS else v
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
                    if text[j] == "`" or (text[j] == "$" and j + 1 < n and text[j + 1] == "("):
                        # a substitution inside double quotes: verbatim, unresolved, never run
                        k = _backtick_end(text, j) if text[j] == "`" else _substitution_end(text, j)
                        if buf:
                            parts.append(_expand("".join(buf), variables, unresolved, budget))
                            buf = []
                        parts.append(text[j:k])
                        unresolved.append(text[j:k])
                        j = k
                        continue
                    buf.append(text[j])
                    j += 1
                if j >= n:
                    raise InputError("unterminated double quote", file=path, line=start_line)
                line += text[i:j].count("\n")
                budget.line = line
                if buf:
                    parts.append(_expand("".join(buf), variables, unresolved, budget))
                quoted = quoted or '"'
                i = j + 1
                continue
            if c == "$" and i + 1 < n and text[i + 1] == "'":
                value, j = _ansi_c(text, i, path, line)
                line += text[i:j].count("\n")
                parts.append(value)
                quoted = quoted or "'"
                i = j
                continue
            if c == "`" or (c == "$" and i + 1 < n and text[i + 1] == "("):
                # command substitution: one verbatim piece of this word, never run, split or rewritten
                j = _backtick_end(text, i) if c == "`" else _substitution_end(text, i)
                line += text[i:j].count("\n")
                parts.append(text[i:j])
                unresolved.append(text[i:j])
                i = j
                continue
            j = i
            while j < n and text[j] not in " \t\r\n;|&'\"\\`" and not (text[j] == "$" and j + 1 < n and text[j + 1] in "('"):
                j += 1
            budget.line = line
            parts.append(_expand(text[i:j], variables, unresolved, budget))
            i = j
        if not words:
            cmd_line = start_line
        words.append(Word("".join(parts), text[start:i], start_line, start, i, tuple(unresolved), quoted,
                          start - text.rfind("\n", 0, start)))
    flush()
    del cmd_line
    return Script(commands, variables, comments)


# One segment of a word: '...', "...", a backslash escape, a run of plain characters; or a separator.
_SEGMENT = lazy_re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([^\s'"\\]+)|(\s+)|(['"])""", re.DOTALL)
_DQ_ESCAPE = lazy_re.compile(r"""\\([\\"$`\n])""")


def split_words(line: str) -> list[str]:
    """Split one line into words like ``shlex.split(line, comments=True)``, in linear time.

    ``shlex`` grows each token one character at a time (quadratic: a 512 KiB word took 27 s).
    A ``#`` starts a comment only at the start of a word, as in POSIX shells. Raises ValueError
    on an unterminated quote, as shlex does.
    """
    words: list[str] = []
    current: list[str] = []
    in_word = False
    for m in _SEGMENT.finditer(line):
        single, double, escaped, plain, space, stray = m.groups()
        if space is not None:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            continue
        if stray is not None:
            raise ValueError("No closing quotation")
        if plain is not None and not in_word and plain.startswith("#"):
            break
        in_word = True
        if single is not None:
            current.append(single)
        elif double is not None:
            current.append(_DQ_ESCAPE.sub(r"\1", double))
        elif escaped is not None:
            current.append(escaped)
        else:
            current.append(plain)
    if in_word:
        words.append("".join(current))
    return words
