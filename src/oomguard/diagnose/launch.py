"""Read the launch that produced a log: a shell script, a command line, a JSON/YAML config or ``LLM(...)``.

``--launch FILE`` is read by oomguard's one launch reader (``read_launch_text``:
``oomguard.inputs.reader`` in lenient mode, the same flags, env and version every
other command sees; scripts, ``--config`` YAML, manifests); only text it does not
take (an ``LLM(...)`` call, a JSON dict, a command line quoted inside a log) falls
back to the tolerant scan below (``parse_launch``), which also finds launches
inside the logs themselves.

Only what diagnose needs: the engine arguments (normalised to vLLM's
underscore names), the flags exactly as the user spelled them (to spot
renamed or mistyped ones), the model, and environment assignments. Text that
is not recognisably a vLLM launch (a sentence, a table) yields nothing
rather than a guess.
"""

from __future__ import annotations

import json
import re
from typing import Any

from oomguard.inputs.shell import split_words
import oomguard.lazy_re as lazy_re
from oomguard.records import field, record

# vLLM's own short aliases.
_SHORT = {"-tp": "tensor_parallel_size", "-pp": "pipeline_parallel_size", "-dp": "data_parallel_size",
          "-q": "quantization", "-O": "compilation_config", "-dcp": "decode_context_parallel_size",
          "-ep": "enable_expert_parallel"}
_STOP = {"&&", "||", ";", "|", ">", ">>", "2>&1", "&", "2>", "1>"}
_ENV = lazy_re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$")
_LLM_CALL = lazy_re.compile(r"\b(?:LLM|AsyncEngineArgs|EngineArgs)\s*\((.*?)\)\s*(?:$|\n)", re.DOTALL)
_KWARG = lazy_re.compile(r"(\w+)\s*=\s*(\"[^\"]*\"|'[^']*'|\{[^}]*\}|\[[^\]]*\]|[\w.+-]+)")
_KNOWN_KEYS = ("model", "max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "max_num_seqs",
               "max_num_batched_tokens", "enforce_eager", "dtype", "quantization", "kv_cache_dtype")


@record
class Launch:
    args: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)  # as spelled, e.g. "--swap-space", "-language-model-only"
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: str | None = None  # "vllm serve", "vllm.entrypoints.openai.api_server", "LLM(...)", "config"

    @property
    def found(self) -> bool:
        return bool(self.args or self.flags)


def _value(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    from oomguard.diagnose.parsers.numbers import maybe_number

    # Finite and in range, or kept as the text it was ('nan', '1e999', 5000 digits are not numbers here).
    number = maybe_number(text) if text[:1].isdigit() or text[:1] in "-+." else None
    return text if number is None else number


def flag_key(flag: str) -> str:
    """'--max-model-len' -> 'max_model_len' ('--max_model_len' too; vLLM accepts both)."""
    if flag in _SHORT:
        return _SHORT[flag]
    return flag.lstrip("-").replace("-", "_")


def _tokens(text: str) -> list[str]:
    text = re.sub(r"\\\r?\n", " ", text)
    out: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            out.extend(split_words(line))  # linear; shlex.split is quadratic in a word's length
        except ValueError:
            out.extend(line.split())
        out.append(";")
    return out


def _anchor(tokens: list[str]) -> tuple[int, str] | None:
    for i, tok in enumerate(tokens):
        base = tok.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return i + 2, "vllm serve"
        if tok == "-m" and i + 1 < len(tokens) and tokens[i + 1].startswith("vllm.entrypoints"):
            return i + 2, tokens[i + 1]
        if "vllm-openai" in tok or "vllm/vllm" in tok:
            return i + 1, "docker vllm-openai"
        if base.endswith("api_server.py"):
            return i + 1, base
    return None


def parse_launch(text: str) -> Launch:
    """Parse a launch text. Unrecognised text gives an empty ``Launch``."""
    stripped = text.strip()
    if not stripped:
        return Launch()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return Launch(args={k.replace("-", "_"): v for k, v in data.items()}, entrypoint="config")
    m = _LLM_CALL.search(text)
    if m:
        args = {k: _value(v) for k, v in _KWARG.findall(m.group(1))}
        if args:
            return Launch(args=args, entrypoint="LLM(...)")
    tokens = _tokens(text)
    found = _anchor(tokens)
    launch = Launch()
    if found is None:
        if not stripped.startswith("-"):
            return _yaml_config(stripped)
        start, launch.entrypoint = 0, None
    else:
        start, launch.entrypoint = found
    for tok in tokens[:start]:
        e = _ENV.match(tok)
        if e:
            launch.env[e.group(1)] = e.group(2)
    i = start
    positional_done = False
    while i < len(tokens):
        tok = tokens[i]
        if tok in _STOP:
            break
        if tok.startswith("-") and len(tok) > 1 and not re.match(r"^-\d", tok):
            name, eq, inline = tok.partition("=")
            launch.flags.append(name)
            key = flag_key(name)
            if eq:
                launch.args[key] = _value(inline)
            elif i + 1 < len(tokens) and tokens[i + 1] not in _STOP and (
                not tokens[i + 1].startswith("-") or re.match(r"^-\d", tokens[i + 1])
            ):
                launch.args[key] = _value(tokens[i + 1])
                i += 1
            elif key.startswith("no_"):
                launch.args[key[3:]] = False
            else:
                launch.args[key] = True
        elif launch.entrypoint == "vllm serve" and not positional_done:
            launch.args["model"] = tok
            positional_done = True
        i += 1
    return launch


def _yaml_config(text: str) -> Launch:
    """A ``vllm serve --config`` YAML file: top-level keys are engine arguments."""
    if ":" not in text or not any(k in text for k in _KNOWN_KEYS):
        return Launch()
    try:
        from oomguard.inputs.structured import load_yaml

        data = load_yaml(text)
    except Exception:  # noqa: BLE001 - not YAML (or past the bounds): not a launch
        return Launch()
    if not isinstance(data, dict) or not any(str(k).replace("-", "_") in _KNOWN_KEYS for k in data):
        return Launch()
    return Launch(args={str(k).replace("-", "_"): v for k, v in data.items()}, entrypoint="config")


def read_launch_text(text: str, path: str | None = None) -> Launch:
    """A ``--launch`` text as the one launch reader reads it (the first launch of a manifest holding
    several), converted to what diagnose needs; the tolerant scan for text that reader refuses."""
    from oomguard.errors import OomguardError
    from oomguard.inputs.reader import launches_from_text

    try:
        launches = launches_from_text(text, path=path or "--launch", lenient=True)
    except OomguardError:
        return parse_launch(text)
    read = launches[0]
    args: dict[str, Any] = dict(read.flags)
    if read.model:
        args["model"] = read.model
    written = [o.written for o in read.occurrences if o.written.startswith("-")]
    written += [p.option for p in read.problems if p.option.startswith("-")]
    entry = read.program if read.kind != "yaml" else "config"
    return Launch(args=args, flags=written, env=dict(read.env), entrypoint=entry)
