"""Read a launch the way ``check`` needs it: keep going past bad flags.

``oomguard.inputs.launch`` stops at the first flag vLLM would reject, which is
right for ``plan``. ``check`` must report every such flag (with the right
spelling) and still lint the rest, so this module re-walks the launch with the
same pieces (``shell.lex``, the version's flag table, ``convert_value``,
``read_yaml_mapping``) and records each problem instead of raising. It also
keeps what the fixer and the spelling rules need: every occurrence of every
flag as written, the vLLM command's words, the YAML key spans, and the
``# oomguard: ignore`` directives of any launch form.

Only unreadable input raises (``InputError``): a missing, binary or non-UTF-8
file, YAML that is not a mapping, or a script with no vLLM command.
"""

from __future__ import annotations

import shlex

import enum
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oomguard.errors import InputError
from oomguard.inputs import files
from oomguard.inputs import launch as L
from oomguard.inputs.shell import Command, Word, lex

_IGNORE = re.compile(r"#.*?oomguard:\s*ignore\s+([A-Za-z0-9_\-]+(?:\s*[, ]\s*[A-Za-z0-9_\-]+)*)")
# Names of unknown options that are switches (take no value) in every vLLM we know of.
_SWITCH_HINT = re.compile(r"^--?(enable|disable|no|use|trust|skip|allow|enforce|load|language)[-_]|[-_](only|eager|mode-only)$")


class ProblemKind(str, enum.Enum):
    UNKNOWN = "unknown-flag"  # not a flag of this release (may be removed / renamed / not yet added)
    AMBIGUOUS = "ambiguous-flag"  # an abbreviation matching several flags
    INVALID_VALUE = "invalid-value"  # wrong type, not a choice, negative
    MISSING_VALUE = "missing-value"  # a flag that takes a value, at the end of the command
    YAML_KEY = "yaml-key"  # a --config YAML key that is not a flag
    UNEXPECTED = "unexpected-argument"  # a stray positional word


@dataclass
class FlagProblem:
    kind: ProblemKind
    option: str  # as written ("--swap-space", YAML key "swap_space")
    message: str
    file: str | None
    line: int | None
    suggestion: str | None = None  # the right spelling in this release, when there is one
    option_word: Word | None = None
    value_word: Word | None = None
    yaml_key: str | None = None
    dest: str | None = None  # for invalid values of known flags
    other_versions: tuple[str, ...] = ()
    detail: str = ""


@dataclass
class Occurrence:
    """One flag as written in the launch (a flag given twice has two)."""

    dest: str
    written: str  # the option word as written, before "=" ("--kv-cache-memory", "max_model_len")
    canonical: str  # the release's own spelling ("--kv-cache-memory-bytes")
    site: L.FlagSite
    negated: bool = False
    deprecated: bool = False
    value_text: str | None = None
    via_prefix: bool = False  # resolved as an argparse abbreviation
    json_quote: str = ""  # quoting of a JSON value word in a script ("'", '"', "")


@dataclass
class Unresolved:
    """A flag (or its value) built from variables the script does not set."""

    option: str
    variables: tuple[str, ...]
    file: str | None
    line: int | None
    dest: str | None


@dataclass
class LaunchRead:
    launch: L.Launch
    problems: list[FlagProblem] = field(default_factory=list)
    occurrences: list[Occurrence] = field(default_factory=list)
    command: Command | None = None  # the vLLM command of a script
    flag_start: int = 0  # index in command.words of the first flag word
    ignore_file: set = field(default_factory=set)  # rule ids silenced for the whole file
    ignore_lines: dict = field(default_factory=dict)  # line -> rule ids
    yaml_lines: dict = field(default_factory=dict)  # YAML key -> line
    argv: list[str] = field(default_factory=list)  # command / flags input as given
    unresolved: list[Unresolved] = field(default_factory=list)


# ---------------------------------------------------------------------------


def _release(version: str | None):
    from oomguard.versions import get_release

    return get_release(version)


def _flag_errors():
    from oomguard.versions.table import AmbiguousFlagError, UnknownFlagError

    return UnknownFlagError, AmbiguousFlagError


_REDIRECT = re.compile(r"^\d*(>>?|<|&>>?|>&|<&)(&?\d+|-)?$")
_REDIRECT_ATTACHED = re.compile(r"^\d*(>>?|<|&>>?)\S+$")


def _strip_redirections(words: list[Word]) -> list[Word]:
    """Drop shell redirections (``2>&1``, ``> log``, ``>>log``): they are not arguments."""
    out: list[Word] = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w.quoted:
            out.append(w)
            continue
        if _REDIRECT.match(w.text):
            # "> file" takes the next word; "2>&1" / ">&2" is complete
            skip = not re.search(r"&\d+$|&-$", w.text) and not w.text.endswith("-")
            continue
        if _REDIRECT_ATTACHED.match(w.text):
            continue
        out.append(w)
    return out


def _is_option(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and not re.fullmatch(r"-\d+(\.\d+)?", tok)


def _takes_value_guess(opt: str, nxt: Word | None) -> bool:
    """Whether an unknown option probably consumed the next word as its value."""
    if nxt is None or _is_option(nxt.text):
        return False
    return not _SWITCH_HINT.search(opt)


def _merge_subkey(current: Any, subkey: str, value: Any) -> dict:
    """``--compilation-config.cudagraph_mode=X`` sets one key of the JSON flag."""
    out = dict(current) if isinstance(current, dict) else {}
    node = out
    parts = subkey.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {}) if isinstance(node.get(p), dict) or p not in node else node[p]
    try:
        value = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        pass
    node[parts[-1]] = value
    return out


def walk_flags(words: list[Word], read: LaunchRead, *, version: str | None, file: str | None, allow_positional_model: bool) -> None:
    """The lenient twin of ``launch.parse_flag_words``: problems are recorded, not raised."""
    UnknownFlagError, AmbiguousFlagError = _flag_errors()
    rel = _release(version)
    launch = read.launch
    words = _strip_redirections(words)
    i = 0
    while i < len(words):
        w = words[i]
        line = w.line or None
        tok = w.text
        nxt = words[i + 1] if i + 1 < len(words) else None
        if not _is_option(tok):
            if allow_positional_model and launch.model is None:
                launch.model = tok
                launch.model_site = L.FlagSite("MODEL", file, line, value_word=w)
            else:
                read.problems.append(FlagProblem(ProblemKind.UNEXPECTED, tok, f"unexpected argument {tok!r}", file, line, option_word=w))
            i += 1
            continue
        opt, eq, inline = tok.partition("=")
        if w.unresolved and not eq:
            read.unresolved.append(Unresolved(w.raw, tuple(w.unresolved), file, line, None))
        try:
            res = rel.resolve_option(opt)
        except (UnknownFlagError, AmbiguousFlagError, InputError) as exc:
            kind = ProblemKind.AMBIGUOUS if isinstance(exc, AmbiguousFlagError) else ProblemKind.UNKNOWN
            vw = None
            if not eq and _takes_value_guess(opt, nxt):
                vw = nxt
                i += 1
            read.problems.append(
                FlagProblem(
                    kind,
                    opt,
                    getattr(exc, "message", str(exc)),
                    file,
                    line,
                    suggestion=getattr(exc, "suggestion", None),
                    option_word=w,
                    value_word=vw,
                    other_versions=tuple(getattr(exc, "other_versions", ()) or ()),
                )
            )
            i += 1
            continue
        flag = res.flag
        site = L.FlagSite(opt, file, line, option_word=w)
        prefix = opt.startswith("--") and rel._normalise(opt) not in flag.all_options and not res.subkey  # noqa: SLF001
        value_text: str | None = None
        quote = ""
        attached = res.value if res.value is not None and not eq else None
        if flag.type == "bool" and not flag.takes_value:
            value: Any = not res.negated
            if eq:
                value_text = inline
                try:
                    value = L.convert_value(flag, inline, file=file, line=line, option=opt)
                except InputError as exc:
                    read.problems.append(FlagProblem(ProblemKind.INVALID_VALUE, opt, exc.message, file, line, option_word=w, dest=flag.dest))
                    i += 1
                    continue
                if res.negated:
                    value = not value
            i += 1
        else:
            if eq or attached is not None:
                value_text, vw = (inline if eq else attached), w
                i += 1
            else:
                if nxt is None:
                    read.problems.append(FlagProblem(ProblemKind.MISSING_VALUE, opt, f"{opt} expects a value", file, line, option_word=w, dest=flag.dest))
                    i += 1
                    continue
                vw = nxt
                value_text = vw.text
                site.value_word = vw
                i += 2
            quote = vw.quoted
            if vw.unresolved:
                # the caller's environment decides: check with vLLM's default instead
                read.unresolved.append(Unresolved(opt, tuple(vw.unresolved), file, vw.line or line, flag.dest))
                read.occurrences.append(Occurrence(flag.dest, opt, flag.name, site, res.negated, res.deprecated, value_text, prefix, quote))
                continue
            nargs = getattr(flag, "nargs", None)
            if res.subkey:  # one key of a JSON flag: the value is that key's, not a whole JSON
                launch.flags[flag.dest] = _merge_subkey(launch.flags.get(flag.dest), res.subkey, value_text)
                launch.sites[flag.dest] = site
                read.occurrences.append(Occurrence(flag.dest, opt, flag.name, site, res.negated, res.deprecated, value_text, prefix, quote))
                continue
            try:
                if nargs in ("+", "*") and not eq:
                    vals = [value_text]
                    while i < len(words) and not _is_option(words[i].text):
                        vals.append(words[i].text)
                        i += 1
                    value = [L.convert_value(flag, v, file=file, line=line, option=opt) if flag.type != "list" else v for v in vals]
                else:
                    value = L.convert_value(flag, value_text, file=file, line=line, option=opt)
            except InputError as exc:
                read.problems.append(FlagProblem(ProblemKind.INVALID_VALUE, opt, exc.message, file, line, option_word=w, value_word=vw, dest=flag.dest))
                continue
        read.occurrences.append(Occurrence(flag.dest, opt, flag.name, site, res.negated, res.deprecated, value_text, prefix, quote))
        if flag.dest == "model":
            launch.model = str(value)
            launch.model_site = site
        elif flag.dest == "config":
            _merge_yaml_file(Path(str(value)), read, version=version, base=file)
        else:
            launch.flags[flag.dest] = value
            launch.sites[flag.dest] = site


def _merge_yaml_file(path: Path, read: LaunchRead, *, version: str | None, base: str | None) -> None:
    if not path.is_absolute() and base:
        cand = Path(base).parent / path
        if files.exists(cand):
            path = cand
    if not files.exists(path):
        read.launch.notes.append(f"--config {path}: file not found here; its flags were not read")
        return
    data, lines = L.read_yaml_mapping(path)
    walk_yaml(data, lines, read, version=version, file=str(path))


def walk_yaml(data: dict, lines: dict, read: LaunchRead, *, version: str | None, file: str) -> None:
    """The lenient twin of ``launch.apply_yaml``."""
    UnknownFlagError, AmbiguousFlagError = _flag_errors()
    rel = _release(version)
    launch = read.launch
    for key, value in data.items():
        line = lines.get(str(key))
        opt = "--" + str(key).replace("_", "-")
        if str(key) in ("model", "model_tag"):
            launch.model = str(value)
            launch.model_site = L.FlagSite(str(key), file, line, yaml_key=str(key))
            continue
        try:
            res = rel.resolve_option(opt)
        except (UnknownFlagError, AmbiguousFlagError, InputError) as exc:
            sugg = getattr(exc, "suggestion", None)
            if sugg and "_" in str(key):
                sugg = sugg.lstrip("-").replace("-", "_")
            elif sugg:
                sugg = sugg.lstrip("-")
            read.problems.append(
                FlagProblem(
                    ProblemKind.YAML_KEY,
                    str(key),
                    f"YAML key {key!r} is not a vLLM flag: {getattr(exc, 'message', exc)}",
                    file,
                    line,
                    suggestion=sugg,
                    yaml_key=str(key),
                    other_versions=tuple(getattr(exc, "other_versions", ()) or ()),
                )
            )
            continue
        flag = res.flag
        try:
            value = L.yaml_value(flag, value, file=file, line=line, key=str(key), option=opt)
        except InputError as exc:
            read.problems.append(FlagProblem(ProblemKind.INVALID_VALUE, str(key), exc.message, file, line, yaml_key=str(key), dest=flag.dest))
            continue
        if res.negated and isinstance(value, bool):
            value = not value
        site = L.FlagSite(opt, file, line, yaml_key=str(key))
        prefix = rel._normalise(opt) not in flag.all_options  # noqa: SLF001
        read.occurrences.append(Occurrence(flag.dest, str(key), flag.name, site, res.negated, res.deprecated, None, prefix))
        launch.flags[flag.dest] = value
        launch.sites[flag.dest] = site


def _ignore_directives(text: str, read: LaunchRead) -> None:
    """``# oomguard: ignore OG101, OG902`` on a line silences findings located on that
    line; on a comment-only line it silences the rules for the whole file (a comment
    cannot sit inside a continued shell command, so per-line directives on
    multi-line commands are impractical)."""
    for no, raw in enumerate(text.splitlines(), start=1):
        m = _IGNORE.search(raw)
        if not m:
            continue
        ids = {x.strip().upper() for x in re.split(r"[,\s]+", m.group(1)) if x.strip()}
        if raw.lstrip().startswith("#"):
            read.ignore_file |= ids
        else:
            read.ignore_lines.setdefault(no, set()).update(ids)


def read_file(path: str | Path, *, version: str | None = None) -> LaunchRead:
    p = Path(path)
    text = L._read_text(p)  # noqa: SLF001  (same limits and messages as plan)
    if not text.strip():
        raise InputError("empty file, expected a launch script or YAML", file=str(p))
    is_yaml = p.suffix in (".yaml", ".yml") or (not text.lstrip().startswith(("#!", "vllm", "python", "export")) and L._looks_like_yaml(text))  # noqa: SLF001
    if is_yaml:
        from oomguard.inputs import manifests

        if manifests.is_manifest(text):  # a Kubernetes manifest, compose service or Helm values
            argv, deployment, line, notes = manifests.manifest_command(p, text)
            read = read_command([shlex.join(argv)], version=version)
            # The checked text is the container's command on one line (the fixer edits it in place);
            # the manifest line of its args is kept with the deployment.
            read.launch.path, read.launch.deployment = str(p), {**deployment, "line": line}
            for site in read.launch.sites.values():
                site.file = str(p)
            read.launch.kind = "manifest"  # the fix is the corrected vllm command, not a rewritten manifest
            read.launch.notes.extend(notes)
            return read
        return read_yaml_text(text, path=str(p), version=version)
    read = read_script(text, path=str(p), version=version)
    _ignore_directives(text, read)
    return read


def yaml_mapping(text: str, path: str | None) -> tuple[dict, dict]:
    """(data, key -> line) of a ``--config`` YAML text; InputError unless it is a mapping."""
    return L.yaml_mapping(text, path)


def read_yaml_text(text: str, *, path: str | None, version: str | None = None) -> LaunchRead:
    launch = L.Launch("yaml", path, None, text=text, version=version)
    read = LaunchRead(launch)
    data, lines = yaml_mapping(text, path)
    read.yaml_lines = lines
    walk_yaml(data, lines, read, version=version, file=path)
    _ignore_directives(text, read)
    return read


def read_script(text: str, *, path: str | None, version: str | None) -> LaunchRead:
    script = lex(text, path=path)
    launch = L.Launch("script", path, None, text=text, version=version)
    read = LaunchRead(launch)
    for k, v in script.variables.items():
        if L.RELEVANT_ENV.match(k):
            launch.env[k] = v
    for cmd in script.commands:
        found = L._find_vllm(cmd.words)  # noqa: SLF001
        if not found:
            continue
        start, program = found
        launch.program = program
        launch.command_line = cmd.line
        for k, v in cmd.assignments.items():
            if L.RELEVANT_ENV.match(k):
                launch.env[k] = v
        for j, w in enumerate(cmd.words[:start]):
            if w.text in ("-e", "--env") and j + 1 < len(cmd.words) and "=" in cmd.words[j + 1].text:
                k, v = cmd.words[j + 1].text.split("=", 1)
                if L.RELEVANT_ENV.match(k):
                    launch.env[k] = v
        read.command, read.flag_start = cmd, start
        walk_flags(cmd.words[start:], read, version=version, file=path, allow_positional_model=program == "vllm serve")
        return read
    raise InputError(
        "no vLLM command found (expected `vllm serve MODEL ...`, `python -m vllm.entrypoints.openai.api_server ...` or a vllm-openai image)",
        file=path,
    )


def read_command(argv: list[str], *, version: str | None = None) -> LaunchRead:
    """A command given after ``--``, already split into words (or one quoted string)."""
    if len(argv) == 1 and " " in argv[0]:
        read = read_script(argv[0], path=None, version=version)
        read.launch.kind = "command"
        read.argv = [w.text for w in read.command.words] if read.command else list(argv)
        _ignore_directives(argv[0], read)
        return read
    if not argv:
        raise InputError("empty command after --")
    words = [Word(a, a, 0, 0, 0) for a in argv]
    launch = L.Launch("command", None, None, version=version)
    read = LaunchRead(launch, argv=list(argv))
    lead = 0
    while lead < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[lead].text):
        k, v = words[lead].text.split("=", 1)
        if L.RELEVANT_ENV.match(k):
            launch.env[k] = v
        lead += 1
    rest = words[lead:]
    found = L._find_vllm(rest)  # noqa: SLF001
    start = 0
    if found:
        start, launch.program = found
    elif rest and rest[0].text in ("python", "python3") or (rest and rest[0].text.endswith("/python")):
        raise InputError("no vLLM command found in the command after -- (expected `vllm serve MODEL ...`)")
    read.command = Command(rest, 1, {})
    read.flag_start = start
    walk_flags(rest[start:], read, version=version, file=None, allow_positional_model=found is None or launch.program == "vllm serve")
    return read


def read_flags(argv: list[str], *, version: str | None = None) -> LaunchRead:
    """vLLM flags given directly to ``oomguard check`` (no program name)."""
    launch = L.Launch("flags", None, None, version=version)
    read = LaunchRead(launch, argv=list(argv))
    words = [Word(a, a, 0, 0, 0) for a in argv]
    read.command = Command(words, 1, {})
    walk_flags(words, read, version=version, file=None, allow_positional_model=False)
    return read
