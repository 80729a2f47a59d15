"""Read a vLLM launch: a shell script, a ``--config`` YAML, or a command line.

Everything becomes one ``Launch``: the model, the flags keyed by vLLM's own
``dest`` names with typed values, the environment variables the launch sets,
and where each flag was written (file, line, source span) so that ``check``
can point at it and rewrite it. Nothing is executed.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oomguard.errors import InputError
from oomguard.inputs import files
from oomguard.inputs.shell import Word, lex
from oomguard.units import parse_size

_MAX_SCRIPT_BYTES = 1024 * 1024  # a start_api.sh is a few KiB; the cap is also the time bound (~1 MiB/s lexed)
# Environment variables that change memory behaviour or GPU visibility.
RELEVANT_ENV = re.compile(r"^(VLLM_[A-Z0-9_]+|LMCACHE_[A-Z0-9_]+|CUDA_VISIBLE_DEVICES|PYTORCH_CUDA_ALLOC_CONF|HF_HUB_OFFLINE|OMP_NUM_THREADS|NCCL_[A-Z_]+)$")
_WRAPPERS = {"exec", "nohup", "time", "sudo", "env", "stdbuf", "setsid", "command"}
_SKIP_WITH_ARG = {"numactl", "taskset", "timeout", "nice", "ionice", "chrt"}


@dataclass
class FlagSite:
    """Where one flag was written."""

    option: str  # as the user wrote it, e.g. "--kv-cache-memory"
    file: str | None
    line: int | None
    option_word: Word | None = None
    value_word: Word | None = None
    yaml_key: str | None = None


@dataclass
class Launch:
    kind: str  # "script" | "yaml" | "command" | "flags"
    path: str | None
    model: str | None
    flags: dict[str, Any] = field(default_factory=dict)  # dest -> typed value
    sites: dict[str, FlagSite] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    program: str = "vllm serve"
    version: str | None = None
    text: str | None = None  # original script / YAML text (for rewriting)
    ignored_rules: dict[int | None, set] = field(default_factory=dict)  # line (None=file) -> rule ids
    notes: list[str] = field(default_factory=list)
    model_site: FlagSite | None = None
    command_line: int | None = None
    lenient: bool = False  # unknown flags become notes instead of errors
    unknown: list = field(default_factory=list)  # (option, value text, file, line) skipped in lenient mode
    deployment: dict | None = None  # a manifest's GPUs, memory limit and /dev/shm (oomguard.inputs.manifests)

    def get(self, dest: str, default: Any = None) -> Any:
        return self.flags.get(dest, default)

    def is_set(self, dest: str) -> bool:
        return dest in self.flags

    def location(self, dest: str) -> tuple[str | None, int | None]:
        site = self.sites.get(dest)
        return (site.file, site.line) if site else (self.path, self.command_line)

    def argv(self) -> list[str]:
        """The launch as ``vllm serve`` arguments (for printing and export)."""
        from oomguard.inputs.render import flags_to_argv

        return flags_to_argv(self.model, self.flags, version=self.version)


def _release(version: str | None):
    from oomguard.versions import get_release

    return get_release(version)


class _Item:
    """A list flag's element type, seen as a flag of its own for conversion."""

    def __init__(self, flag):
        self.dest = flag.dest
        self.type = getattr(flag, "item", None) or "str"
        self.choices = None
        self.accepts_auto = False


def convert_value(flag, text: str, *, file: str | None, line: int | None, option: str) -> Any:
    """Type a flag value the way vLLM's argparse would, with a located error."""
    t = getattr(flag, "type", "str")
    if getattr(flag, "accepts_auto", False) and text.strip().lower() == "auto":
        return "auto"
    try:
        if t == "int":
            v = int(text) if re.fullmatch(r"-?\d+", text.strip()) else parse_size(text)
        elif t == "size":
            v = parse_size(text)
        elif t == "float":
            v = float(text)
        elif t == "json":
            v = json.loads(text)
        elif t == "bool":
            low = text.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            v = low in ("true", "1", "yes")
        elif t == "list":
            v = [x for x in re.split(r"[,\s]+", text) if x]
        else:
            v = text
    except (ValueError, TypeError) as exc:
        kind = {"int": "an integer", "size": "an integer (k/m/g suffixes allowed, e.g. 32k, 10G)", "float": "a number", "json": "valid JSON", "bool": "true/false"}.get(t, t)
        detail = f" ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
        raise InputError(f"{option}: {text!r} is not {kind}{detail}", file=file, line=line) from None
    if t in ("int", "float", "size"):
        check_number(flag.dest, v, file=file, line=line, option=option, text=text)
    choices = getattr(flag, "choices", None)
    if choices and t in ("str",) and v not in choices and str(v) not in [str(c) for c in choices]:
        raise InputError(f"{option}: {text!r} is not one of {', '.join(map(str, choices))}", file=file, line=line)
    if t in ("int", "float", "size") and isinstance(v, (int, float)) and v < 0 and flag.dest not in _NEGATIVE_OK:
        raise InputError(f"{option}: {text!r} must not be negative", file=file, line=line)
    if flag.dest in _POSITIVE and isinstance(v, (int, float)) and v == 0:
        raise InputError(f"{option}: 0 is not a valid value", file=file, line=line)
    return v


# No vLLM quantity needs more: token counts, bytes, GiB, seconds (2**53 is also where floats stop being exact).
_MAX_MAGNITUDE = 2**53


def check_number(dest: str, value: Any, *, file: str | None, line: int | None, option: str, text: str | None = None) -> None:
    """A typed numeric flag value: finite and of a magnitude vLLM could hold (range rules by dest stay in check/plan)."""
    shown = text if text is not None else repr(value)
    shown = shown if len(shown) <= 40 else shown[:40] + "…"
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{option}: {shown!r} is not a finite number", file=file, line=line)
    if abs(value) > _MAX_MAGNITUDE:
        raise InputError(f"{option}: {shown!r} is out of range (at most {_MAX_MAGNITUDE:.3g})", file=file, line=line)


_NEGATIVE_OK = {"max_model_len", "seed", "num_gpu_blocks_override", "port"}
_POSITIVE = {"max_model_len", "max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "block_size"}
_REDIRECT = re.compile(r"^(\d*>>?(&\d+)?|&>>?|<<?)\S*$")


def parse_flag_words(
    words: list[Word] | list[str],
    launch: Launch,
    *,
    version: str | None,
    file: str | None,
    allow_positional_model: bool,
) -> None:
    """Parse ``--flag value`` words into ``launch.flags`` using the version's flag table."""
    from oomguard.versions import UnknownFlagError  # noqa: F401  (documented error type)

    rel = _release(version)
    ws = [w if isinstance(w, Word) else Word(w, w, 0, 0, 0) for w in words]
    i = 0
    while i < len(ws):
        w = ws[i]
        line = w.line or None
        tok = w.text
        if _REDIRECT.match(tok):
            # shell redirections (2>&1, > log, >> log) are not arguments
            bare_operator = re.fullmatch(r"\d*>>?|&>>?|<<?", tok) is not None
            i += 2 if bare_operator else 1  # "> log" also skips its target
            continue
        if tok.startswith("-") and len(tok) > 1 and not re.fullmatch(r"-\d+(\.\d+)?", tok):
            opt, eq, inline = tok.partition("=")
            if w.unresolved and not eq:
                launch.notes.append(f"{file or 'command'}:{line}: {w.raw} uses variables not set in the script")
            try:
                res = rel.resolve_option(opt)
            except InputError as exc:
                exc.file, exc.line = file, line
                exc.args = (str(exc),)
                if not launch.lenient:
                    raise
                # Lenient mode: record the problem, skip the flag and its likely value.
                launch.notes.append(str(exc))
                value_text = inline if eq else None
                i += 1
                if not eq and i < len(ws) and not ws[i].text.startswith("-"):
                    value_text = ws[i].text
                    i += 1
                launch.unknown.append((opt, value_text, file, line))
                continue
            flag = res.flag
            if not eq and getattr(res, "value", None) is not None:
                eq, inline = "=", res.value  # attached short-option value, e.g. -O3
            site = FlagSite(opt, file, line, option_word=w)
            subkey = getattr(res, "subkey", None)
            if subkey:
                # --compilation-config.cudagraph_mode=PIECEWISE sets one key of a JSON flag
                if eq:
                    raw = inline
                    i += 1
                else:
                    raw = ws[i + 1].text if i + 1 < len(ws) else ""
                    i += 2
                current = launch.flags.get(flag.dest)
                merged = dict(current) if isinstance(current, dict) else {}
                try:
                    merged[subkey] = json.loads(raw)
                except ValueError:
                    merged[subkey] = raw
                launch.flags[flag.dest] = merged
                launch.sites[flag.dest] = site
                continue
            if flag.type == "bool" and not flag.takes_value:
                value: Any = not res.negated
                if eq:
                    value = convert_value(flag, inline, file=file, line=line, option=opt)
                    if res.negated:
                        value = not value
                i += 1
            else:
                if eq:
                    text, vw = inline, w
                    i += 1
                else:
                    if i + 1 >= len(ws):
                        raise InputError(f"{opt} expects a value", file=file, line=line)
                    vw = ws[i + 1]
                    text = vw.text
                    site.value_word = vw
                    i += 2
                if vw.unresolved:
                    problem = (
                        f"value of {opt} uses variable(s) the script does not set: "
                        + ", ".join("$" + v if not v.startswith("$") else v for v in vw.unresolved)
                    )
                    # a credential passed as "$VLLM_API_KEY" is the right way to write one: kept as the
                    # reference (export turns it into the target's own reference to that variable)
                    secret = _is_secret_flag(flag.dest)
                    if flag.type in ("str",) or launch.lenient or secret:
                        launch.notes.append(f"{file or 'command'}:{vw.line or line}: {problem}; value not checked")
                        if flag.type in ("str",) or secret:
                            launch.flags[flag.dest] = [text] if getattr(flag, "nargs", None) in ("+", "*") else text
                            launch.sites[flag.dest] = site
                        continue
                    raise InputError(problem + " (set it in the script, or give the flag on the command line)", file=file, line=vw.line or line)
                nargs = getattr(flag, "nargs", None)
                if nargs in ("+", "*") and not eq:
                    vals = [text]
                    while i < len(ws) and not ws[i].text.startswith("--"):
                        vals.append(ws[i].text)
                        i += 1
                    item_flag = _Item(flag) if getattr(flag, "item", None) else flag
                    value = [convert_value(item_flag, v, file=file, line=line, option=opt) if (flag.type != "list" or getattr(flag, "item", None)) else v for v in vals]
                else:
                    value = convert_value(flag, text, file=file, line=line, option=opt)
            if flag.dest == "model":
                launch.model = str(value)
                launch.model_site = site
            elif flag.dest == "config":
                _merge_yaml(Path(str(value)), launch, version=version, base=file)
            else:
                launch.flags[flag.dest] = value
                launch.sites[flag.dest] = site
            continue
        if allow_positional_model and launch.model is None:
            launch.model = tok
            launch.model_site = FlagSite("MODEL", file, line, value_word=w)
            i += 1
            continue
        raise InputError(f"unexpected argument {tok!r}", file=file, line=line)


def _is_secret_flag(dest: str) -> bool:
    from oomguard.redact import is_secret_name

    return is_secret_name(dest)


def _merge_yaml(path: Path, launch: Launch, *, version: str | None, base: str | None) -> None:
    if not path.is_absolute() and base:
        cand = Path(base).parent / path
        if files.exists(cand):
            path = cand
    if not files.exists(path):
        launch.notes.append(f"--config {path}: file not found here; its flags were not read")
        return
    data, lines = read_yaml_mapping(path)
    apply_yaml(data, lines, launch, version=version, file=str(path))


_MAX_YAML_KEYS = 2000


def read_yaml_mapping(path: Path) -> tuple[dict, dict]:
    return yaml_mapping(_read_text(path), str(path))


def yaml_mapping(text: str, file: str | None) -> tuple[dict, dict]:
    """(data, key -> line) of a ``--config`` YAML text, parsed once with the bounds of ``inputs.structured``."""
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
    return data, lines


def apply_yaml(data: dict, lines: dict, launch: Launch, *, version: str | None, file: str) -> None:
    rel = _release(version)
    for key, value in data.items():
        line = lines.get(str(key))
        opt = "--" + str(key).replace("_", "-")
        if str(key) in ("model", "model_tag"):
            launch.model = str(value)
            launch.model_site = FlagSite(str(key), file, line, yaml_key=str(key))
            continue
        try:
            res = rel.resolve_option(opt)
        except InputError as exc:
            err = InputError(f"YAML key {key!r} is not a vLLM flag: {exc}", file=file, line=line)
            if not launch.lenient:
                raise err from None
            launch.notes.append(str(err))
            launch.unknown.append((opt, None if isinstance(value, (dict, list)) else str(value), file, line))
            continue
        flag = res.flag
        value = yaml_value(flag, value, file=file, line=line, key=str(key), option=opt)
        if flag.type == "bool" and res.negated and isinstance(value, bool):
            value = not value  # no-enable-prefix-caching: true
        if isinstance(value, list) and getattr(flag, "item", None) in ("int", "float"):
            value = [convert_value(_Item(flag), str(v), file=file, line=line, option=opt) for v in value]
        launch.flags[flag.dest] = value
        launch.sites[flag.dest] = FlagSite(opt, file, line, yaml_key=str(key))


def yaml_value(flag, value: Any, *, file: str | None, line: int | None, key: str, option: str) -> Any:
    """Type one ``--config`` YAML value for ``flag`` (shared by ``apply_yaml`` and check's lenient reader)."""
    nargs = getattr(flag, "nargs", None) in ("+", "*")
    if nargs and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        # `served-model-name: foo` is `--served-model-name foo`: argparse's nargs='+' makes it a list
        value = [value]
    if flag.type == "json" and isinstance(value, str):
        return convert_value(flag, value, file=file, line=line, option=option)
    if flag.type in ("int", "float", "size") and isinstance(value, str):
        return convert_value(flag, value, file=file, line=line, option=option)
    if flag.type in ("int", "float", "size") and not nargs:
        return yaml_number(flag, value, file=file, line=line, key=key)
    if flag.type == "bool" and not isinstance(value, bool):
        if not isinstance(value, (str, int)) or isinstance(value, float):
            raise InputError(f"YAML key {key!r}: expected true/false, found {_yaml_kind(value)}", file=file, line=line)
        return convert_value(flag, str(value), file=file, line=line, option=option)
    if flag.type == "str" and not nargs and value is not None:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InputError(f"YAML key {key!r}: expected a string, found {_yaml_kind(value)}", file=file, line=line)
        if getattr(flag, "choices", None):
            return convert_value(flag, str(value), file=file, line=line, option=option)
        return str(value)
    return value


def _yaml_kind(value: Any) -> str:
    if type(value).__name__ in ("date", "datetime"):
        return "a date"
    return {list: "a list", dict: "a mapping", bool: "true/false", bytes: "binary data", float: "a number",
            int: "a number"}.get(type(value), type(value).__name__)


def yaml_number(flag, value: Any, *, file: str | None, line: int | None, key: str) -> Any:
    """A YAML scalar for a numeric flag: a real number of the right kind (not a bool, list, dict or date)."""
    if value is None:
        return value  # `key:` with no value: vLLM passes nothing; the flag keeps its default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"YAML key {key!r}: expected a number, found {_yaml_kind(value)}", file=file, line=line)
    if flag.type in ("int", "size") and isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise InputError(f"YAML key {key!r}: {value!r} is not an integer", file=file, line=line)
        value = int(value)
    check_number(flag.dest, value, file=file, line=line, option=f"YAML key {key!r}")
    if value < 0 and flag.dest not in _NEGATIVE_OK:
        raise InputError(f"YAML key {key!r}: {value!r} must not be negative", file=file, line=line)
    if flag.dest in _POSITIVE and value == 0:
        raise InputError(f"YAML key {key!r}: 0 is not a valid value", file=file, line=line)
    return value


def _read_text(path: Path) -> str:
    raw = files.read_bytes(path, limit=_MAX_SCRIPT_BYTES, what="launch file",
                           too_large="too large for a launch file ({size})")
    if b"\x00" in raw[:8192]:
        raise InputError("binary file, expected a launch script or YAML", file=str(path))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError("not UTF-8 text", file=str(path), line=line) from None


def _find_vllm(words: list[Word]) -> tuple[int, str] | None:
    """Index of the first flag word after the vLLM entry point, and the program name."""
    texts = [w.text for w in words]
    for i, t in enumerate(texts):
        base = os.path.basename(t)
        if base == "vllm" and i + 1 < len(texts) and texts[i + 1] == "serve":
            return i + 2, "vllm serve"
        if t == "-m" and i + 1 < len(texts) and texts[i + 1].startswith("vllm.entrypoints"):
            return i + 2, "python -m " + texts[i + 1]
        if re.search(r"(^|/)vllm[-/]openai(:|$)", t) or t.startswith(("vllm/vllm-openai", "vllm/vllm-cpu")):
            return i + 1, "docker " + t
    return None


def read_launch(path: str | Path, *, version: str | None = None, lenient: bool = False) -> Launch:
    """Read a launch script or a ``--config`` YAML (``lenient``: unknown flags become notes)."""
    p = Path(path)
    text = _read_text(p)
    if p.suffix in (".yaml", ".yml") or (not text.lstrip().startswith(("#!", "vllm", "python", "export")) and _looks_like_yaml(text)):
        from oomguard.inputs import manifests

        if manifests.is_manifest(text):
            return manifests.read_manifest(p, text, version=version, lenient=lenient)
        launch = Launch("yaml", str(p), None, text=text, version=version, lenient=lenient)
        data, lines = yaml_mapping(text, str(p))
        apply_yaml(data, lines, launch, version=version, file=str(p))
        return launch
    return parse_script(text, path=str(p), version=version, lenient=lenient)


def _looks_like_yaml(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(lines) and all(re.match(r"^[A-Za-z0-9_\-]+\s*:", ln) or ln.startswith((" ", "-")) for ln in lines)


def parse_script(text: str, *, path: str | None, version: str | None, lenient: bool = False) -> Launch:
    script = lex(text, path=path)
    launch = Launch("script", path, None, text=text, version=version, lenient=lenient)
    for line, comment in script.comments:
        m = re.search(r"oomguard:\s*ignore\s+([A-Z0-9, ]+)", comment)
        if m:
            ids = {x.strip() for x in re.split(r"[,\s]+", m.group(1)) if x.strip()}
            launch.ignored_rules.setdefault(line, set()).update(ids)
    for k, v in script.variables.items():
        if RELEVANT_ENV.match(k):
            launch.env[k] = v
    for cmd in script.commands:
        found = _find_vllm(cmd.words)
        if not found:
            continue
        start, program = found
        launch.program = program
        launch.command_line = cmd.line
        for k, v in cmd.assignments.items():
            if RELEVANT_ENV.match(k):
                launch.env[k] = v
        # docker -e VAR=x before the image
        for j, w in enumerate(cmd.words[:start]):
            if w.text in ("-e", "--env") and j + 1 < len(cmd.words) and "=" in cmd.words[j + 1].text:
                k, v = cmd.words[j + 1].text.split("=", 1)
                if RELEVANT_ENV.match(k):
                    launch.env[k] = v
        parse_flag_words(cmd.words[start:], launch, version=version, file=path, allow_positional_model=program == "vllm serve")
        return launch
    raise InputError("no vLLM command found (expected `vllm serve MODEL ...` or `python -m vllm.entrypoints.openai.api_server ...`)", file=path)


def parse_command(argv: list[str], *, version: str | None = None, lenient: bool = False) -> Launch:
    """Parse a command given after ``--`` (already split into words)."""
    if len(argv) == 1 and " " in argv[0]:
        return parse_script(argv[0], path=None, version=version, lenient=lenient)
    words = [Word(a, a, 0, 0, 0) for a in argv]
    launch = Launch("command", None, None, version=version, lenient=lenient)
    env_words = []
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0].text):
        env_words.append(words.pop(0))
    for w in env_words:
        k, v = w.text.split("=", 1)
        if RELEVANT_ENV.match(k):
            launch.env[k] = v
    found = _find_vllm(words)
    if found:
        start, launch.program = found
        words = words[start:]
    parse_flag_words(words, launch, version=version, file=None, allow_positional_model=found is None or launch.program == "vllm serve")
    return launch


def parse_flags(argv: list[str], *, version: str | None = None, lenient: bool = False) -> Launch:
    """vLLM flags given directly to an oomguard command (no program name)."""
    launch = Launch("flags", None, None, version=version, lenient=lenient)
    parse_flag_words([Word(a, a, 0, 0, 0) for a in argv], launch, version=version, file=None, allow_positional_model=False)
    return launch
