"""Read a systemd unit that runs vLLM: the unit-file grammar and the launch in its ``ExecStart=``.

The grammar is systemd's (systemd.syntax(7), systemd.service(5) "Command lines",
systemd.exec(5) "Environment", systemd 252's manual pages):

- a unit file is lines, and systemd's line reader ends a line at ``\\n``, ``\\r``,
  ``\\r\\n`` or NUL; a line ending in an odd number of backslashes continues on the next
  (the backslash becomes a space; comment lines inside a continuation are dropped);
  ``#`` and ``;`` start comments; ``[Section]`` headers;
- ``ExecStart=`` is split into words by systemd (no shell): a word may be wrapped in
  double or single quotes (the opening quote only at the start of a word), C escapes are
  decoded, ``%%`` is a literal percent, ``$$`` a literal dollar, and a word ``${NAME}`` is
  the variable's value (``VarRef``); ``Environment=`` is unquoted the same way without
  the ``$`` rules.

``read_unit`` turns a unit into a ``Launch`` (``kind="systemd"``): the ``ExecStart=``
command parsed like any command line, ``Environment=`` as the launch's environment,
``MemoryMax=`` as the memory limit check's host-RAM rules read (like a container's). The
``EnvironmentFile=`` is not read (it holds the secrets; a note says so). oomguard's own
exports are written by ``oomguard.export.systemd`` and read back with this grammar.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from oomguard.errors import InputError

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


@dataclass(frozen=True)
class VarRef:
    """An ``ExecStart=`` word that is exactly ``${NAME}``: systemd puts the variable's value there."""

    name: str

    def __str__(self) -> str:
        return "${" + self.name + "}"


@dataclass(frozen=True)
class Entry:
    """One logical line of a unit file."""

    kind: str  # "comment" | "blank" | "section" | "setting"
    section: str | None
    key: str = ""
    value: str = ""
    line: int = field(default=0, compare=False)  # 1-based line where it starts


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
    start = 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if buf is None:
            start = number
            if not stripped:
                entries.append(Entry("blank", section, line=number))
                continue
            if stripped[0] in "#;":
                entries.append(Entry("comment", section, value=stripped, line=number))
                continue
            if stripped.startswith("["):
                if not stripped.endswith("]"):
                    raise ValueError(f"line {number}: malformed section header {stripped[:40]!r}")
                section = stripped[1:-1]
                entries.append(Entry("section", section, line=number))
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
            raise ValueError(f"line {start}: no '=' in [{section}]: {line.strip()[:40]!r}")
        key, _, value = line.partition("=")
        entries.append(Entry("setting", section, key.strip(), value.strip(), line=start))
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
        raise ValueError(f"unknown escape {chr(92) + c!r}")
    return _C_ESCAPES[c], 1


def _unspecify(text: str, dollars: bool) -> str:
    # %% -> % (and $$ -> $ on command lines); other specifiers and variables are left as written
    return re.sub(r"%%|\$\$" if dollars else r"%%", lambda m: m.group(0)[0], text)


_REF_WORD = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def split_words(text: str, *, dollars: bool = True) -> list[str | VarRef]:
    """systemd's unquoting of a command line (``dollars``) or an ``Environment=`` value.

    On a command line, a word that is exactly ``${NAME}`` is returned as ``VarRef(NAME)``:
    systemd replaces it with the variable's value (a literal ``${X}`` is written ``$${X}``).
    """
    words: list[str | VarRef] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\n":
            i += 1
        if i >= n:
            break
        if dollars:
            m = _REF_WORD.match(text, i)
            if m and (m.end() == n or text[m.end()] in " \t\n"):
                words.append(VarRef(m.group(1)))
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


def split_command(text: str) -> list[str | VarRef]:
    """The argv systemd would run for an ``ExecStart=`` value (after line joining).

    A ``${NAME}`` word is ``VarRef(NAME)`` (systemd replaces it with the variable's value).
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


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGTPE]?)", re.I)
_PREFIXES = "@-:+!"  # ExecStart= prefixes before the program path (systemd.service(5))


def memory_bytes(value: str) -> int | None:
    """``MemoryMax=`` in bytes (K/M/G/T/P/E are powers of 1024); None for ``infinity``, a percentage
    (of a RAM this file does not know) or anything else."""
    m = _SIZE.fullmatch(value.strip())
    if not m:
        return None
    power = " KMGTPE".index(m.group(2).upper() or " ")
    return int(float(m.group(1)) * (1024**power))


def is_unit(text: str) -> bool:
    """A systemd service unit: a ``[Service]`` section and an ``ExecStart=`` setting."""
    return bool(re.search(r"^[ \t]*\[Service\][ \t]*\r?$", text, re.M)
                and re.search(r"^[ \t]*ExecStart[ \t]*=", text, re.M))


def read_unit(text: str, *, path: str | None, version: str | None = None, lenient: bool = False):
    """The vLLM launch a service unit runs (``oomguard check vllm.service``)."""
    from oomguard.inputs.command import parse_script

    try:
        entries = parse_unit(text)
        service = [e for e in entries if e.kind == "setting" and e.section == "Service"]
        starts = [e for e in service if e.key == "ExecStart" and e.value]
        if len(starts) != 1:
            raise InputError(f"expected one ExecStart= in [Service], found {len(starts)}", file=path,
                             line=starts[1].line if len(starts) > 1 else None)
        start = starts[0]
        words = split_command(start.value)
        env: dict[str, str] = {}
        for e in service:
            if e.key == "Environment":
                for word in split_words(e.value, dollars=False):
                    k, eq, v = str(word).partition("=")
                    if eq:
                        env[k] = v
    except ValueError as exc:
        raise InputError(f"not a valid systemd unit: {exc}", file=path) from None
    if words and isinstance(words[0], str):
        words[0] = words[0].lstrip(_PREFIXES)
    # the command as a script the shell lexer reads: ${NAME} stays a variable (set by Environment=
    # or, for the secrets, by the EnvironmentFile= this file does not include)
    script = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    script += " ".join('"${' + w.name + '}"' if isinstance(w, VarRef) else shlex.quote(w) for w in words) + "\n"
    launch = parse_script(script, path=path, version=version, lenient=lenient, kind="systemd")
    launch.text = None  # the unit is not the script above: check --fix does not rewrite units
    launch.command_line = start.line
    for site in list(launch.sites.values()) + ([launch.model_site] if launch.model_site else []):
        site.file, site.line = path, start.line
    settings = {e.key: e.value for e in service}
    limit = memory_bytes(settings["MemoryMax"]) if settings.get("MemoryMax") else None
    description = next((e.value for e in entries if e.kind == "setting" and e.key == "Description"), None)
    launch.deployment = {"kind": "systemd unit", "name": description, "container": None, "gpus": None,
                         "memory_limit_bytes": limit, "shm_bytes": None, "shm_source": "the host's /dev/shm",
                         "line": start.line}
    if any(e.key == "EnvironmentFile" for e in service):
        launch.notes.append("the unit's EnvironmentFile= is not read (it holds the secrets): variables set only "
                            "there are not known")
    return launch


__all__ = ["Entry", "VarRef", "is_unit", "join_lines", "memory_bytes", "parse_unit", "read_unit", "split_command",
           "split_words", "unit_values", "environment"]
