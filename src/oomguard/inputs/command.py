"""The command parser: vLLM's words, a script, or a ``--config`` YAML, into a ``Launch``.

One walker reads the flags of every launch form (``parse_flag_words``): each
option is resolved with the chosen release's flag table (``oomguard.versions``),
typed the way vLLM's argparse types it, and recorded with its site. A flag vLLM
would reject is a ``FlagProblem``: raised at once (``InputError`` naming the file
and line) unless the launch is read ``lenient``, in which case it is recorded and
the walk goes on (what ``check`` needs to report every problem at once).

Scripts are lexed (``oomguard.inputs.shell``, nothing is executed); the vLLM
command is found among the script's commands, also inside ``sh -c '...'`` /
``bash -lc "..."`` wrappers, after ``exec``, ``env VAR=x``, ``nohup`` and such, and
before ``| tee log`` or redirections. Docker's ``vllm/vllm-openai:v0.11.0`` image
names the release when the user gives none (``resolve_version``).

Manifests (``oomguard.inputs.manifests``) use this parser; it never imports them.
"""

from __future__ import annotations

import math
import os
import re

from oomguard.errors import InputError
from oomguard.inputs import files, jsonflags
from oomguard.inputs.launch import FlagProblem, FlagSite, Launch, Occurrence, ProblemKind, Source, Unresolved
from oomguard.inputs.shell import Command, Word, lex
from oomguard.numbers import NumberError, parse_float, parse_int
from oomguard.units import parse_size
import oomguard.lazy_re as lazy_re
from oomguard.records import NamedTuple

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "RELEVANT_ENV",
    "apply_yaml",
    "check_number",
    "convert_value",
    "find_vllm",
    "image_version",
    "keep_env",
    "parse_command",
    "parse_flag_words",
    "parse_flags",
    "parse_script",
    "read_text",
    "resolve_version",
    "yaml_mapping",
    "yaml_value",
]

MAX_LAUNCH_BYTES = files.LAUNCH_BYTES  # a start_api.sh is a few KiB; the cap is also the time bound (~1 MiB/s lexed)
# Environment variables that change memory behaviour or GPU visibility.
RELEVANT_ENV = lazy_re.compile(r"^(VLLM_[A-Z0-9_]+|LMCACHE_[A-Z0-9_]+|CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|PYTORCH_CUDA_ALLOC_CONF|HF_HUB_OFFLINE|OMP_NUM_THREADS|NCCL_[A-Z_]+)$")
_SHELLS = {"sh", "bash", "dash", "zsh", "ash", "ksh"}
_IGNORE = lazy_re.compile(r"#.*?oomguard:\s*ignore\s+([A-Za-z0-9_\-]+(?:\s*[, ]\s*[A-Za-z0-9_\-]+)*)")
# Names of unknown options that are switches (take no value) in every vLLM we know of.
_SWITCH_HINT = lazy_re.compile(r"^--?(enable|disable|no|use|trust|skip|allow|enforce|load|language)[-_]|[-_](only|eager|mode-only)$")
_REDIRECT = lazy_re.compile(r"^\d*(>>?|<|&>>?|>&|<&)(&?\d+|-)?$")
_REDIRECT_ATTACHED = lazy_re.compile(r"^\d*(>>?|<|&>>?)\S+$")
_ASSIGNMENT = lazy_re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PLAIN_INT = lazy_re.compile(r"[+-]?[0-9][0-9_]*")
_MAX_NUMBER_CHARS = 64  # no vLLM quantity is written with more (2**53 has 16 digits)
# No vLLM quantity needs more: token counts, bytes, GiB, seconds (2**53 is also where floats stop being exact).
_MAX_MAGNITUDE = 2**53
_NEGATIVE_OK = {"max_model_len", "seed", "num_gpu_blocks_override", "port"}
_POSITIVE = {"max_model_len", "max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "block_size"}


def _release(version: str | None):
    from oomguard.versions import get_release

    return get_release(version)


# --------------------------------------------------------------------- values


class _Item:
    """A list flag's element type, seen as a flag of its own for conversion."""

    def __init__(self, flag):
        self.dest = flag.dest
        self.type = getattr(getattr(flag, "item", None), "value", getattr(flag, "item", None)) or "str"
        self.choices = None
        self.accepts_auto = False


def _type(flag) -> str:
    t = getattr(flag, "type", "str")
    return str(getattr(t, "value", t))


def convert_value(flag, text: str, *, file: str | None, line: int | None, option: str) -> Any:
    """Type a flag value the way vLLM's argparse would, with a located error."""
    t = _type(flag)
    if getattr(flag, "accepts_auto", False) and text.strip().lower() == "auto":
        return "auto"
    if getattr(flag, "accepts_auto", False) and text.strip() == "-1":
        return -1  # vLLM's human_readable_int_or_auto: '-1' and 'auto' both mean auto-fit
    if t in ("int", "size", "float") and len(text.strip()) > _MAX_NUMBER_CHARS:
        raise InputError(f"{option}: {_shown(text)!r} is not a number vLLM takes (more than {_MAX_NUMBER_CHARS} characters)",
                         file=file, line=line)
    dest = getattr(flag, "dest", "")
    kind = {"int": "an integer", "size": "an integer (k/m/g suffixes allowed, e.g. 32k, 10G)", "float": "a number",
            "bool": "true/false"}.get(t, t)
    try:
        if t == "int":
            # vLLM's human_readable_int: a plain integer ('+5', '1_000' as int() reads them) or a size.
            v = parse_int(text) if _PLAIN_INT.fullmatch(text.strip()) else parse_size(text)
        elif t == "size":
            v = parse_size(text)
        elif t == "float":
            v = parse_float(text)
        elif t == "json":
            v = jsonflags.parse(dest, text, option=option)
        elif t == "bool":
            low = text.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            v = low in ("true", "1", "yes")
        elif t == "list":
            v = [x for x in re.split(r"[,\s]+", text) if x]
        elif dest in jsonflags.DICT_OR_STR:
            # vLLM's union_dict_and_str: text shaped like {...} is JSON, anything else stays a string
            v = jsonflags.parse(dest, text, option=option) if jsonflags.looks_like_object(text) else text
        else:
            v = text
    except InputError as exc:
        raise InputError(exc.message, file=file, line=line) from None
    except NumberError as exc:
        # the helper says why: too many digits, not finite, ASCII digits only, too large...
        if t in ("int", "size") and exc.why.startswith("is not a size"):
            try:  # say why it is not an integer either ('1e999': not whole, '١٢٣': ASCII digits only)
                parse_int(text)
            except NumberError as why:
                if why.why != "is not an integer":
                    raise InputError(f"{option}: {why}", file=file, line=line) from None
            raise InputError(f"{option}: {exc.text!r} is not {kind}", file=file, line=line) from None
        raise InputError(f"{option}: {exc}", file=file, line=line) from None
    except (ValueError, TypeError, OverflowError):
        raise InputError(f"{option}: {_shown(text)!r} is not {kind}", file=file, line=line) from None
    if t in ("int", "float", "size"):
        check_number(dest, v, file=file, line=line, option=option, text=text)
    choices = getattr(flag, "choices", None)
    if choices and t in ("str",) and v not in choices and str(v) not in [str(c) for c in choices]:
        raise InputError(f"{option}: {_shown(text)!r} is not one of {', '.join(map(str, choices))}", file=file, line=line)
    if t in ("int", "float", "size") and isinstance(v, (int, float)) and v < 0 and dest not in _NEGATIVE_OK:
        raise InputError(f"{option}: {_shown(text)!r} must not be negative", file=file, line=line)
    if dest in _POSITIVE and isinstance(v, (int, float)) and v == 0:
        raise InputError(f"{option}: 0 is not a valid value", file=file, line=line)
    return v


def _shown(text: str) -> str:
    return text if len(text) <= 40 else text[:40] + "…"


def check_number(dest: str, value: Any, *, file: str | None, line: int | None, option: str, text: str | None = None) -> None:
    """A typed numeric flag value: finite and of a magnitude vLLM could hold (range rules by dest stay in check/plan)."""
    shown = _shown(text if text is not None else repr(value))
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{option}: {shown!r} is not a finite number", file=file, line=line)
    if abs(value) > _MAX_MAGNITUDE:
        raise InputError(f"{option}: {shown!r} is out of range (at most {_MAX_MAGNITUDE:.3g})", file=file, line=line)


# --------------------------------------------------------------------- the walker


class _Walk:
    """One pass over a launch's flag words (or YAML keys), filling ``launch``."""

    def __init__(self, launch: Launch, release, *, file: str | None, origin: str):
        self.launch = launch
        self.rel = release
        self.file = file
        self.origin = origin

    def problem(self, p: FlagProblem, exc: InputError | None = None) -> None:
        """Record a problem (lenient) or raise it (strict)."""
        if not self.launch.lenient:
            if exc is not None:
                exc.file, exc.line = p.file, p.line
                exc.args = (str(exc),)
                raise exc
            raise InputError(p.message, file=p.file, line=p.line)
        self.launch.problems.append(p)

    def site(self, opt: str, w: Word | None, line: int | None, **kw) -> FlagSite:
        return FlagSite(opt, self.file, line, option_word=w, column=(w.column or None) if w is not None else None,
                        yaml_path=getattr(w, "key", None), origin=self.origin, **kw)


def _flag_errors():
    from oomguard.versions.table import AmbiguousFlagError, UnknownFlagError

    return UnknownFlagError, AmbiguousFlagError


def strip_redirections(words: list[Word]) -> list[Word]:
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
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            node[p] = nxt
        else:
            nxt = dict(nxt)
            node[p] = nxt
        node = nxt
    if isinstance(value, str):
        try:
            value = jsonflags.loads(value)
        except ValueError:
            pass
    node[parts[-1]] = value
    return out


def parse_flag_words(
    words: list[Word] | list[str],
    launch: Launch,
    *,
    version: str | None = None,
    release: Any = None,
    file: str | None,
    allow_positional_model: bool,
    origin: str = "",
) -> None:
    """Parse ``--flag value`` words into ``launch`` using the release's flag table."""
    UnknownFlagError, AmbiguousFlagError = _flag_errors()
    rel = release if release is not None else _release(version)
    walk = _Walk(launch, rel, file=file, origin=origin or launch.kind)
    ws = strip_redirections([w if isinstance(w, Word) else Word(w, w, 0, 0, 0) for w in words])
    i = 0
    while i < len(ws):
        w = ws[i]
        line = w.line or None
        tok = w.text
        nxt = ws[i + 1] if i + 1 < len(ws) else None
        if not _is_option(tok):
            if allow_positional_model and launch.model is None:
                launch.model = tok
                launch.model_site = walk.site("MODEL", None, line, value_word=w)
                launch.model_site.column = w.column or None
                launch.model_site.yaml_path = getattr(w, "key", None)
                if w.unresolved:
                    launch.unresolved.append(Unresolved("MODEL", tuple(w.unresolved), file, line, "model"))
            else:
                walk.problem(FlagProblem(ProblemKind.UNEXPECTED, tok, f"unexpected argument {_shown(tok)!r}", file, line, option_word=w))
            i += 1
            continue
        opt, eq, inline = tok.partition("=")
        if w.unresolved and not eq:
            launch.unresolved.append(Unresolved(w.raw, tuple(w.unresolved), file, line, None))
        try:
            res = rel.resolve_option(opt)
        except (UnknownFlagError, AmbiguousFlagError, InputError) as exc:
            kind = ProblemKind.AMBIGUOUS if isinstance(exc, AmbiguousFlagError) else ProblemKind.UNKNOWN
            vw = None
            if not eq and _takes_value_guess(opt, nxt):
                vw = nxt
                i += 1
            walk.problem(FlagProblem(kind, opt, getattr(exc, "message", str(exc)), file, line,
                                     suggestion=getattr(exc, "suggestion", None), option_word=w, value_word=vw,
                                     other_versions=tuple(getattr(exc, "other_versions", ()) or ()),
                                     value_text=inline if eq else (vw.text if vw is not None else None)), exc)
            i += 1
            continue
        flag = res.flag
        site = walk.site(opt, w, line)
        prefix = opt.startswith("--") and rel._normalise(opt) not in flag.all_options and not res.subkey  # noqa: SLF001
        value_text: str | None = None
        quote = ""
        attached = res.value if res.value is not None and not eq else None
        if _type(flag) == "bool" and not flag.takes_value:
            value: Any = not res.negated
            if eq:
                value_text = inline
                try:
                    value = convert_value(flag, inline, file=file, line=line, option=opt)
                except InputError as exc:
                    walk.problem(FlagProblem(ProblemKind.INVALID_VALUE, opt, exc.message, file, line, option_word=w, dest=flag.dest), exc)
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
                if (nxt is None or (_is_option(nxt.text) and " " not in nxt.text)) and flag.nargs == "?" and flag.const is not None:
                    # nargs="?" with a const: the bare option is the const (0.6-0.7's StoreBoolean flags,
                    # `--enable-chunked-prefill` alone meaning True)
                    i += 1
                    try:
                        value = convert_value(flag, str(flag.const), file=file, line=line, option=opt)
                    except InputError as exc:
                        walk.problem(FlagProblem(ProblemKind.INVALID_VALUE, opt, exc.message, file, line, option_word=w, dest=flag.dest), exc)
                        continue
                    launch.occurrences.append(Occurrence(flag.dest, opt, flag.name, site, res.negated, res.deprecated, None, prefix, quote))
                    launch.flags[flag.dest] = value
                    launch.sites[flag.dest] = site
                    continue
                if nxt is None or (_is_option(nxt.text) and " " not in nxt.text):
                    # argparse does not take the next option as a value: `--hf-overrides --api-key K` is
                    # "expected one argument" in vLLM (and K must not become the model, to be printed);
                    # like argparse's _parse_optional, a word with a space ("- a b") is a value
                    walk.problem(FlagProblem(ProblemKind.MISSING_VALUE, opt, f"{opt} expects a value", file, line, option_word=w, dest=flag.dest))
                    i += 1
                    continue
                vw = nxt
                value_text = vw.text
                site.value_word = vw
                i += 2
            quote = vw.quoted
            if vw.unresolved:
                # the environment the launch runs in decides: vLLM's default is assumed here
                vars_ = tuple(vw.unresolved)
                launch.unresolved.append(Unresolved(opt, vars_, file, vw.line or line, flag.dest))
                launch.occurrences.append(Occurrence(flag.dest, opt, flag.name, site, res.negated, res.deprecated, value_text, prefix, quote))
                # a credential passed as "$VLLM_API_KEY" is the right way to write one (export writes
                # it as a reference to that variable): recorded like a string flag's, not refused
                # so is a server option no memory figure reads (--port "$PORT"): its value is unknown here,
                # and nothing oomguard computes depends on it
                if (not launch.lenient and _type(flag) != "str" and flag.dest != "model" and not _secret_flag(flag.dest)
                        and _planned(flag)):
                    names = ", ".join(v if v.startswith("$") else "$" + v for v in vars_)
                    raise InputError(f"value of {opt} uses variable(s) the launch does not set: {names} "
                                     "(set it in the launch, or give the flag on the command line)",
                                     file=file, line=vw.line or line)
                continue
            nargs = getattr(flag, "nargs", None)
            if res.subkey:  # one key of a JSON flag: the value is that key's, not a whole JSON
                merged = _merge_subkey(launch.flags.get(flag.dest), res.subkey, value_text)
                try:
                    jsonflags.check_data(flag.dest, merged, option=opt)
                except InputError as exc:
                    walk.problem(FlagProblem(ProblemKind.INVALID_VALUE, opt, exc.message, file, line, option_word=w, value_word=vw, dest=flag.dest), exc)
                    continue
                launch.flags[flag.dest] = merged
                launch.sites[flag.dest] = site
                launch.occurrences.append(Occurrence(flag.dest, opt, flag.name, site, res.negated, res.deprecated, value_text, prefix, quote))
                continue
            try:
                if nargs in ("+", "*") and not eq:
                    vals = [value_text]
                    while i < len(ws) and not _is_option(ws[i].text):
                        vals.append(ws[i].text)
                        i += 1
                    item = _Item(flag) if getattr(flag, "item", None) else (flag if _type(flag) != "list" else None)
                    value = [convert_value(item, v, file=file, line=line, option=opt) if item is not None else v for v in vals]
                else:
                    value = convert_value(flag, value_text, file=file, line=line, option=opt)
            except InputError as exc:
                walk.problem(FlagProblem(ProblemKind.INVALID_VALUE, opt, exc.message, file, line, option_word=w, value_word=vw, dest=flag.dest), exc)
                continue
        launch.occurrences.append(Occurrence(flag.dest, opt, flag.name, site, res.negated, res.deprecated, value_text, prefix, quote))
        if flag.dest == "model":
            launch.model = str(value)
            launch.model_site = site
        elif flag.dest == "config":
            from pathlib import Path  # here only: a launch without --config needs no pathlib (start-up)

            merge_config_file(Path(str(value)), launch, release=rel, base=file)
        else:
            launch.flags[flag.dest] = value
            launch.sites[flag.dest] = site


# --------------------------------------------------------------------- --config YAML

_MAX_YAML_KEYS = 2000


def merge_config_file(path: Path, launch: Launch, *, release: Any, base: str | None) -> None:
    """``--config FILE`` inside a launch: its keys, when the file is here (a note otherwise)."""
    from pathlib import Path

    if not path.is_absolute() and base and not files.is_named_stream(base):
        cand = Path(base).parent / path
        if files.exists(cand):
            path = cand
    if not files.exists(path):
        launch.notes.append(f"--config {path}: file not found here; its flags were not read")
        return
    data, lines, node = yaml_mapping(read_text(path), str(path))
    apply_yaml(data, lines, launch, release=release, file=str(path), node=node)


def yaml_mapping(text: str, file: str | None) -> tuple[dict, dict, Any]:
    """(data, key -> line, node) of a ``--config`` YAML text, parsed once with the bounds of ``inputs.structured``."""
    from oomguard.inputs.structured import load_yaml_with_node

    data, node = load_yaml_with_node(text, file=file)
    if not isinstance(data, dict):
        raise InputError("a vLLM --config YAML must be a mapping of flag: value", file=file, line=1)
    if len(data) > _MAX_YAML_KEYS:
        raise InputError(f"a vLLM --config YAML has one key per flag (vLLM has a few hundred); this one has "
                         f"{len(data):,} keys", file=file)
    lines = {}
    if node is not None and hasattr(node, "value"):
        for k, _v in node.value:
            lines[str(k.value)] = k.start_mark.line + 1
    return data, lines, node


def _key_columns(node: Any) -> dict[str, int]:
    out = {}
    if node is not None and hasattr(node, "value") and isinstance(node.value, list):
        for k, _v in node.value:
            if hasattr(k, "start_mark"):
                out[str(k.value)] = k.start_mark.column + 1
    return out


def apply_yaml(data: dict, lines: dict, launch: Launch, *, release: Any = None, version: str | None = None,
               file: str | None, node: Any = None) -> None:
    """The keys of a ``--config`` YAML as flags (the walker's YAML twin)."""
    UnknownFlagError, AmbiguousFlagError = _flag_errors()
    rel = release if release is not None else _release(version)
    walk = _Walk(launch, rel, file=file, origin="config")
    columns = _key_columns(node)
    for key, value in data.items():
        key = str(key)
        line = lines.get(key)
        opt = "--" + key.replace("_", "-")
        if key in ("model", "model_tag"):
            launch.model = str(value)
            launch.model_site = FlagSite(key, file, line, yaml_key=key, column=columns.get(key), yaml_path=key, origin="config")
            continue
        try:
            res = rel.resolve_option(opt)
        except (UnknownFlagError, AmbiguousFlagError, InputError) as exc:
            sugg = getattr(exc, "suggestion", None)
            if sugg and "_" in key:
                sugg = sugg.lstrip("-").replace("-", "_")
            elif sugg:
                sugg = sugg.lstrip("-")
            walk.problem(FlagProblem(ProblemKind.YAML_KEY, key, f"YAML key {key!r} is not a vLLM flag: {getattr(exc, 'message', exc)}",
                                     file, line, suggestion=sugg, yaml_key=key,
                                     other_versions=tuple(getattr(exc, "other_versions", ()) or ()),
                                     value_text=None if isinstance(value, (dict, list)) else str(value)))
            continue
        flag = res.flag
        try:
            value = yaml_value(flag, value, file=file, line=line, key=key, option=opt)
        except InputError as exc:
            walk.problem(FlagProblem(ProblemKind.INVALID_VALUE, key, exc.message, file, line, yaml_key=key, dest=flag.dest), exc)
            continue
        if _type(flag) == "bool" and res.negated and isinstance(value, bool):
            value = not value  # no-enable-prefix-caching: true
        site = FlagSite(opt, file, line, yaml_key=key, column=columns.get(key), yaml_path=key, origin="config")
        prefix = rel._normalise(opt) not in flag.all_options  # noqa: SLF001
        launch.occurrences.append(Occurrence(flag.dest, key, flag.name, site, res.negated, res.deprecated, None, prefix))
        if flag.dest == "model":
            launch.model = str(value)
            launch.model_site = site
            continue
        launch.flags[flag.dest] = value
        launch.sites[flag.dest] = site



# The API server's own options that a memory figure does read (host/ram_model: one process per API server).
_PLANNED_FRONTEND = frozenset({"api_server_count"})


def _planned(flag) -> bool:
    """Whether a plan, a check rule or a fix reads this flag's value: every engine flag, and the few
    frontend ones in ``_PLANNED_FRONTEND`` (the rest, --port, --max-log-len, ..., only shape the API server)."""
    from oomguard.versions.table import FlagGroup

    return getattr(flag, "group", FlagGroup.ENGINE) is not FlagGroup.FRONTEND or flag.dest in _PLANNED_FRONTEND


def _secret_flag(dest: str) -> bool:
    from oomguard.redact import is_secret_name

    return is_secret_name(dest)

def yaml_value(flag, value: Any, *, file: str | None, line: int | None, key: str, option: str) -> Any:
    """Type one YAML value (a ``--config`` key, a Helm ``vllmConfig`` key) for ``flag``."""
    nargs = getattr(flag, "nargs", None) in ("+", "*")
    t = _type(flag)
    dest = getattr(flag, "dest", "")
    where = f"YAML key {key!r}"
    if t == "json" or dest in jsonflags.DICT_OR_STR:
        if isinstance(value, str):
            return convert_value(flag, value, file=file, line=line, option=option)
        if value is None:
            return value
        try:
            return jsonflags.check_data(dest, value, option=where)
        except InputError as exc:
            raise InputError(exc.message, file=file, line=line) from None
    if t in ("int", "float", "size") and isinstance(value, str):
        return convert_value(flag, value, file=file, line=line, option=option)
    if t in ("int", "float", "size") and not nargs:
        return yaml_number(flag, value, file=file, line=line, key=key)
    if t == "bool" and not isinstance(value, bool):
        if not isinstance(value, (str, int)) or isinstance(value, float):
            raise InputError(f"{where}: expected true/false, found {_yaml_kind(value)}", file=file, line=line)
        return convert_value(flag, str(value), file=file, line=line, option=option)
    if t == "str" and not nargs and value is not None:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InputError(f"{where}: expected a string, found {_yaml_kind(value)}", file=file, line=line)
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{where}: expected a string, found {value!r}", file=file, line=line)
        if getattr(flag, "choices", None):
            return convert_value(flag, str(value), file=file, line=line, option=option)
        return str(value)
    if nargs or t == "list":
        items = value if isinstance(value, list) else ([] if value is None else [value])
        if any(isinstance(v, (dict, list)) or v is None for v in items):
            raise InputError(f"{where}: expected a list of values, found {_yaml_kind(value)}", file=file, line=line)
        item_t = getattr(getattr(flag, "item", None), "value", getattr(flag, "item", None))
        if item_t in ("int", "float", "size"):
            return [convert_value(_Item(flag), str(v), file=file, line=line, option=option) if not isinstance(v, bool)
                    else _bad_item(where, v, file, line) for v in items]
        if not isinstance(value, list):
            return value if t != "list" else [str(value)]
        return [str(v) for v in items]
    return value


def _bad_item(where: str, v: Any, file: str | None, line: int | None):
    raise InputError(f"{where}: expected numbers, found {_yaml_kind(v)}", file=file, line=line)


def _yaml_kind(value: Any) -> str:
    if type(value).__name__ in ("date", "datetime"):
        return "a date"
    return {list: "a list", dict: "a mapping", bool: "true/false", bytes: "binary data", float: "a number",
            int: "a number", type(None): "nothing"}.get(type(value), type(value).__name__)


def yaml_number(flag, value: Any, *, file: str | None, line: int | None, key: str) -> Any:
    """A YAML scalar for a numeric flag: a real number of the right kind (not a bool, list, dict or date)."""
    if value is None:
        return value  # `key:` with no value: vLLM passes nothing; the flag keeps its default
    where = f"YAML key {key!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: expected a number, found {_yaml_kind(value)}", file=file, line=line)
    if isinstance(value, int) and abs(value) > _MAX_MAGNITUDE:
        raise InputError(f"{where}: the number is out of range (at most {_MAX_MAGNITUDE:.3g})", file=file, line=line)
    if _type(flag) in ("int", "size") and isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise InputError(f"{where}: {value!r} is not an integer", file=file, line=line)
        value = int(value)
    check_number(flag.dest, value, file=file, line=line, option=where)
    if value < 0 and flag.dest not in _NEGATIVE_OK:
        raise InputError(f"{where}: {value!r} must not be negative", file=file, line=line)
    if flag.dest in _POSITIVE and value == 0:
        raise InputError(f"{where}: 0 is not a valid value", file=file, line=line)
    return value


# --------------------------------------------------------------------- text and files


def read_text(path: str | Path) -> str:
    """A launch file's text (``-`` and ``/dev/fd/N`` too), bounded, UTF-8, not binary."""
    p = os.fspath(path)
    raw = files.read_bytes(p, limit=MAX_LAUNCH_BYTES, what="launch file", allow_stdin=True,
                           too_large="too large for a launch file ({size})")
    shown = files.display(p)
    if b"\x00" in raw[:8192]:
        raise InputError("binary file, expected a launch script or YAML", file=shown)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError("not UTF-8 text", file=shown, line=line) from None


def ignore_directives(text: str, launch: Launch, *, line_offset: int = 0) -> None:
    """``# oomguard: ignore OG101, OG902`` on a line silences findings located on that
    line; on a comment-only line it silences the rules for the whole file (a comment
    cannot sit inside a continued shell command, so per-line directives on
    multi-line commands are impractical)."""
    for no, raw in enumerate(text.splitlines(), start=1):
        if "oomguard" not in raw:
            continue
        m = _IGNORE.search(raw)
        if not m:
            continue
        ids = {x.strip().upper() for x in re.split(r"[,\s]+", m.group(1)) if x.strip()}
        if raw.lstrip().startswith("#"):
            launch.ignore_file |= ids
        else:
            launch.ignore_lines.setdefault(no + line_offset, set()).update(ids)


# --------------------------------------------------------------------- versions


_IMAGE_VERSION = lazy_re.compile(r"^v?(\d+\.\d+(?:\.\d+){0,2}(?:\.?post\d+)?)(?:$|[-_+])")
_EMBEDDED_VERSION = lazy_re.compile(r"vllm[_-]v?(\d+\.\d+(?:\.\d+){0,2}(?:\.?post\d+)?)(?:$|[-_+])", re.I)


def image_version(image: str | None) -> str | None:
    """The vLLM release a container image names in its tag (``vllm/vllm-openai:v0.11.0`` -> 0.11.0,
    ``rocm/vllm:rocm6.4_vllm_0.9.1_20250715`` -> 0.9.1); None for ``latest``, a digest, or an image
    that is not vLLM's."""
    if not image:
        return None
    ref = image.split("@", 1)[0]
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return None
    if "vllm" not in repo.lower():
        return None
    m = _IMAGE_VERSION.match(tag) or _EMBEDDED_VERSION.search(tag)
    return m.group(1) if m else None


def resolve_version(launch: Launch, version: str | None, *, source: Source | None = None):
    """The release to read the flags with: the user's ``--vllm-version``, else the image tag's, else
    the newest table. Sets ``launch.version`` / ``version_source`` (and a note for the image tag)."""
    tagged = image_version(launch.image)
    if version is not None:
        launch.version = version
        launch.version_source = Source("option", detail="--vllm-version")
        if tagged is not None and tagged.lstrip("v") != version.lstrip("v"):
            launch.notes.append(f"the image {launch.image} is vLLM {tagged}; read with --vllm-version {version} as asked")
        return _release(version)
    if tagged is not None:
        try:
            release = _release(tagged)
        except InputError as exc:
            raise InputError(f"the image {launch.image} names vLLM {tagged}: {exc.message}; pass --vllm-version",
                             file=source.file if source else launch.path, line=source.line if source else None) from None
        launch.version = tagged
        launch.version_source = Source("image-tag", source.file if source else None, source.line if source else None,
                                       source.column if source else None, source.yaml_path if source else None,
                                       detail=f"the image tag of {launch.image}")
        launch.notes.append(f"vLLM {tagged} from the image tag ({launch.image})"
                            + (f"; {release.note}" if getattr(release, "note", "") else ""))
        return release
    release = _release(None)
    launch.version_source = Source("default", detail=f"no --vllm-version and no image tag: the newest table, vLLM {release.version}")
    return release


# --------------------------------------------------------------------- finding the vLLM command


_CONTAINER_RUNNERS = frozenset({"docker", "podman", "nerdctl"})


def find_vllm(words: list[Word]) -> tuple[int, str, str | None] | None:
    """(index of the first flag word after the vLLM entry point, the program, the image) or None."""
    texts = [w.text for w in words]
    for i, t in enumerate(texts):
        base = os.path.basename(t)
        if base == "vllm" and i + 1 < len(texts) and texts[i + 1] == "serve":
            return i + 2, "vllm serve", None
        if t == "-m" and i + 1 < len(texts) and texts[i + 1].startswith("vllm.entrypoints"):
            mod = texts[i + 1]
            if mod.startswith("vllm.entrypoints.cli") and i + 2 < len(texts) and texts[i + 2] == "serve":
                return i + 3, "python -m " + mod + " serve", None
            return i + 2, "python -m " + mod, None
        if base in ("api_server.py",) and "vllm" in t:
            return i + 1, "python " + t, None
        if (re.search(r"(^|/)vllm[-/]openai(:|@|$)", t) or t.startswith(("vllm/vllm-openai", "vllm/vllm-cpu"))) \
                and any(os.path.basename(x) in _CONTAINER_RUNNERS for x in texts[:i]):
            # an image only on a container runner's command line: `--tokenizer vllm/vllm-cpu` is a flag's value
            return i + 1, "docker " + t, t
    return None


def _shell_script(words: list[Word]) -> tuple[int, int] | None:
    """(index of the script word, index of the shell word) of ``sh -c SCRIPT`` / ``bash -lc SCRIPT``."""
    for i, w in enumerate(words):
        if os.path.basename(w.text) in _SHELLS:
            j = i + 1
            while j < len(words) and words[j].text.startswith("-") and words[j].text != "--":
                opts = words[j].text
                if not opts.startswith("--") and "c" in opts[1:]:
                    return (j + 1, i) if j + 1 < len(words) else None
                j += 1
            return None
        if not (_ASSIGNMENT.match(w.text) or os.path.basename(w.text) in ("exec", "env", "nohup", "time", "sudo", "setsid", "command", "stdbuf")):
            return None
    return None


def _env_from_words(words: list[Word], launch: Launch, *, file: str | None, origin: str) -> None:
    """``VAR=x`` words (``env VAR=x vllm serve``, ``docker run -e VAR=x``) as the launch's env."""
    for j, w in enumerate(words):
        if w.text in ("-e", "--env") and j + 1 < len(words) and "=" in words[j + 1].text:
            _set_env(launch, words[j + 1].text, words[j + 1], file, origin)
        elif w.text.startswith("--env=") and "=" in w.text[6:]:
            _set_env(launch, w.text[6:], w, file, origin)
        elif _ASSIGNMENT.match(w.text) and (j == 0 or os.path.basename(words[j - 1].text) in ("env", "exec") or _ASSIGNMENT.match(words[j - 1].text)):
            _set_env(launch, w.text, w, file, origin)


def keep_env(launch: Launch, name: str, value: str) -> bool:
    """Whether ``name=value`` belongs in ``launch.env`` (what vLLM, CUDA and NCCL read: ``RELEVANT_ENV``).
    A credential outside those names (``redact.is_secret``: HF_TOKEN, OPENAI_API_KEY ...) is kept in
    ``launch.secret_env`` instead, for the exports to carry; anything else is not the launch's."""
    if RELEVANT_ENV.match(name):
        return True
    from oomguard.redact import is_secret

    if is_secret(name, value):
        launch.secret_env[name] = value
    return False


def _set_env(launch: Launch, assignment: str, w: Word | None, file: str | None, origin: str) -> None:
    k, _, v = assignment.partition("=")
    if keep_env(launch, k, v):
        launch.env[k] = v
        launch.env_sites[k] = FlagSite(k, file, (w.line or None) if w else None, value_word=w,
                                       column=(w.column or None) if w else None, origin=origin)


class QuotedScript(NamedTuple):
    """The vLLM command of a script runs inside a quoted ``sh -c`` string: ``quote`` is its quote
    character (text written into it is escaped for it); ``editable`` is False when the string's
    words cannot be mapped back to the file (an unquoted or mixed-quote string)."""

    quote: str
    editable: bool = True


def _locate_inner(word: Word, text: str) -> int | None:
    """Offset in ``text`` where a quoted script word's content starts, when the content maps one to one."""
    raw = word.raw
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"" and raw.count(raw[0]) == 2:
        return word.start + 1
    return None


def parse_script(text: str, *, path: str | None, version: str | None = None, lenient: bool = False,
                 env: dict[str, str] | None = None, kind: str = "script") -> Launch:
    """The vLLM launch of a shell script (or one command line given as text)."""
    launch = Launch(kind, path, None, text=text, lenient=lenient)
    found = _find_command(text, path=path, env=env or {}, launch=launch, origin=kind)
    if found is None:
        raise InputError("no vLLM command found (expected `vllm serve MODEL ...`, "
                         "`python -m vllm.entrypoints.openai.api_server ...` or a vllm-openai image)", file=path)
    cmd, start, program, image, variables = found
    launch.program, launch.image, launch.command_line = program, image, cmd.line
    launch.command, launch.flag_start = cmd, start
    for k, v in variables.items():
        if keep_env(launch, k, v):
            launch.env[k] = v
    for k, v in cmd.assignments.items():
        if keep_env(launch, k, v):
            launch.env[k] = v
    _env_from_words(cmd.words[:start], launch, file=path, origin=kind)
    image_word = next((w for w in cmd.words[:start] if image and w.text == image), None)
    release = resolve_version(launch, version, source=Source(kind, path, image_word.line if image_word else cmd.line,
                                                            image_word.column if image_word else None) if image else None)
    ignore_directives(text, launch)
    parse_flag_words(cmd.words[start:], launch, release=release, file=path, allow_positional_model=program == "vllm serve"
                     or program.endswith(" serve"), origin=kind)
    return launch


def _find_command(text: str, *, path: str | None, env: dict[str, str], launch: Launch, origin: str, depth: int = 0):
    """(command, flag start, program, image, variables) of the first vLLM command, looking inside
    ``sh -c`` wrappers; the inner words keep offsets into ``text`` where the quoting allows."""
    script = lex(text, path=path, env=env)
    for cmd in script.commands:
        found = find_vllm(cmd.words)
        if found is not None:
            start, program, image = found
            return cmd, start, program, image, script.variables
        wrapped = _shell_script(cmd.words) if depth < 3 else None
        if wrapped is None:
            continue
        idx, _shell_at = wrapped
        word = wrapped_word = cmd.words[idx]
        inner_at = _locate_inner(word, text)
        inner_text = word.raw[1:-1] if inner_at is not None else word.text
        env_inner = {**script.variables, **cmd.assignments}
        inner = _find_command(inner_text, path=path, env=env_inner, launch=launch, origin=origin, depth=depth + 1)
        if inner is None:
            continue
        icmd, istart, iprogram, iimage, ivars = inner
        line0 = wrapped_word.line - 1
        for w in icmd.words:
            if inner_at is not None:
                w.start += inner_at
                w.end += inner_at
                if w.line == 1:
                    w.column = (w.column or 0) + (wrapped_word.column or 1)
            else:
                w.start = w.end = -1  # not mappable to the outer text: check --fix rewrites the whole word
            w.line += line0
        icmd.line += line0
        if depth == 0:
            launch.carrier = QuotedScript(word.raw[0], True) if inner_at is not None else QuotedScript("", False)
        return icmd, istart, iprogram, iimage, {**env_inner, **ivars}
    return None


def parse_command(argv: list[str], *, version: str | None = None, lenient: bool = False) -> Launch:
    """A command given after ``--`` (already split into words, or one string)."""
    if len(argv) == 1 and " " in argv[0]:
        launch = parse_script(argv[0], path=None, version=version, lenient=lenient, kind="command")
        return launch
    if not argv:
        raise InputError("empty command after --")
    # words of an argv list reach vLLM as they are (no shell): "<" or "> log" are arguments, not
    # redirections (a Kubernetes args list, an export read back); marked like quoted shell words
    words = [Word(a, a, 0, 0, 0, quoted="'" if _REDIRECT.match(a) or _REDIRECT_ATTACHED.match(a) else "") for a in argv]
    launch = Launch("command", None, None, lenient=lenient)
    lead = 0
    while lead < len(words) and _ASSIGNMENT.match(words[lead].text):
        _set_env(launch, words[lead].text, None, None, "command")
        lead += 1
    rest = words[lead:]
    found = find_vllm(rest)
    start = 0
    if found:
        start, launch.program, launch.image = found
        _env_from_words(rest[:start], launch, file=None, origin="command")
    elif rest and (rest[0].text in ("python", "python3") or rest[0].text.endswith("/python")):
        raise InputError("no vLLM command found in the command after -- (expected `vllm serve MODEL ...`)")
    launch.command = Command(rest, 1, {})
    launch.flag_start = start
    release = resolve_version(launch, version, source=Source("command") if launch.image else None)
    parse_flag_words(rest[start:], launch, release=release, file=None,
                     allow_positional_model=found is None or launch.program.endswith("serve"), origin="command")
    return launch


def parse_flags(argv: list[str], *, version: str | None = None, lenient: bool = False) -> Launch:
    """vLLM flags given directly to an oomguard command (no program name)."""
    launch = Launch("flags", None, None, lenient=lenient)
    words = [Word(a, a, 0, 0, 0) for a in argv]
    launch.command = Command(words, 1, {})
    release = resolve_version(launch, version)
    parse_flag_words(words, launch, release=release, file=None, allow_positional_model=False, origin="flags")
    return launch


def parse_config_yaml(text: str, *, path: str | None, version: str | None = None, lenient: bool = False) -> Launch:
    """A ``vllm serve --config`` YAML: one key per flag."""
    launch = Launch("yaml", path, None, text=text, lenient=lenient)
    data, lines, node = yaml_mapping(text, path)
    launch.yaml_lines = lines
    release = resolve_version(launch, version)
    apply_yaml(data, lines, launch, release=release, file=path, node=node)
    ignore_directives(text, launch)
    return launch
