"""Who is running what, and how far it got: version, engine, model, arguments, phase markers.

Arguments come from V1's ``non-default args: {...}`` (a Python dict literal),
V0's ``args: Namespace(...)`` and the ``Initializing an LLM engine ... with
config: key=value, ...`` line. Serving is recognised from the throughput
line (which also gives the requests in flight), HTTP access lines and request
bookkeeping.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from oomguard.diagnose.classes import Phase
from oomguard.diagnose.events import LogLine
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.numbers import integer, maybe_number, num
import oomguard.lazy_re as lazy_re

_VERSION_PATTERNS = (
    lazy_re.compile(r"vLLM API server version\s+v?(\d+\.\d+[\w.+-]*)"),
    lazy_re.compile(r"LLM engine \(v(\d+\.\d+[\w.+-]*)\)"),
    lazy_re.compile(r"vLLM Version\s*:\s*v?(\d+\.\d+[\w.+-]*)"),
    lazy_re.compile(r"\bvllm[ =-]+v?(\d+\.\d+\.\d+[\w.+-]*)", re.IGNORECASE),
)
_BANNER_VERSION = lazy_re.compile(r"\bversion\s+v?(\d+\.\d+(?:\.\d+)?[\w.+-]*)")
_BANNER_MODEL = lazy_re.compile(r"\bmodel\s{2,}(\S+)")
_ENGINE_CONFIG = lazy_re.compile(r"Initializing an? (?:(V[01]) )?LLM engine(?: \(v([\w.+-]+)\))? with config: (.*)")
_CONFIG_PAIR = lazy_re.compile(r"(\w{1,60})=('(?:[^'\\]|\\.){0,500}'|\"[^\"]{0,500}\"|[^,]{1,300})")
_NON_DEFAULT = lazy_re.compile(r"non-default args:\s*(\{.*)")
_NAMESPACE = lazy_re.compile(r"args:\s*Namespace\((.*)\)")
_DICT_PAIR = lazy_re.compile(r"'(\w+)':\s*('(?:[^'\\]|\\.)*'|\"[^\"]*\"|\[[^\]]*\]|\{[^}]*\}|[^,}]+)")
_PLATFORM = lazy_re.compile(r"detected platform\s+(\w+)")
_MAX_LEN = lazy_re.compile(r"Using max model len\s+(\d+)")
_CHUNKED = lazy_re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
_METRICS = lazy_re.compile(
    r"Running:\s*(\d+)\s*reqs,\s*(?:Swapped:\s*(\d+)\s*reqs,\s*)?(?:Pending|Waiting):\s*(\d+)\s*reqs"
    r"(?:,\s*GPU KV cache usage:\s*([\d.]+)%)?"
)
_THROUGHPUT = lazy_re.compile(r"Avg prompt throughput:\s*([\d.]+)\s*tokens/s,\s*Avg generation throughput:\s*([\d.]+)")
_STARTING = ("vLLM API server version", "non-default args:", "args: Namespace(", "Initializing a V1 LLM engine",
             "Initializing a V0 LLM engine", "Initializing an LLM engine")
_LOADING = ("Starting to load model", "Loading model weights", "Loading weights", "Loading safetensors",
            "Loading pt checkpoint", "Loading model from", "Using model weights format", "loading model",
            "Loading checkpoint shards")
_PROFILING = ("Memory profiling takes", "torch.compile takes", "Compiling a graph", "Dynamo bytecode transform",
              "Encoder cache will be initialized", "profile run", "Profiling", "compiled graph")
_READY = ("init engine (profile, create kv cache, warmup model) took", "Starting vLLM API server",
          "Uvicorn running on", "Application startup complete", "Started server process", "Available routes are",
          "Starting vLLM server on",
          # Ray Serve (serve run / serve deploy, Ray Serve LLM, KubeRay's RayService): the application is up
          "' is ready at http", "Deployed app '",
          # the API server lists its routes once it is up ("Route: /v1/models, Methods: GET")
          "Route: /v1/")
_SERVING = ('"POST /', "Received request", "Added request", "Finished request")
# Answers the server gave: an OpenAI API GET it served (any status: a 401 or 404 is an answer too), a completion's
# JSON body pasted by its client. Scanned (not frequent: "/health" and "/metrics" scrapes are not /v1/).
_ANSWERED = lazy_re.compile(r'"GET /(?:v1/|models\b)[^" ]{0,200} HTTP/\d(?:\.\d)?" \d{3}|'
                            r'"object": ?"(?:chat\.completion|text_completion)"')
_MODEL_KEYS = ("model", "model_tag")
_MAX_ARG_VALUE = 300
_STARTING_RX = lazy_re.compile("|".join(map(re.escape, _STARTING)))
_LOADING_RX = lazy_re.compile("|".join(map(re.escape, _LOADING)))
_PROFILING_RX = lazy_re.compile("|".join(map(re.escape, _PROFILING)))
_READY_RX = lazy_re.compile("|".join(map(re.escape, _READY)))
_SERVING_RX = lazy_re.compile("|".join(map(re.escape, _SERVING)))


# Literal signs (substring tests below), named so that the byte scan (SCAN) looks for the same text.
_V1_SIGN, _V1_PROC, _V0_SIGN, _V0_PROC = "V1 LLM engine", "EngineCore", "V0 LLM engine", "VllmWorkerProcess"
_BANNER = "\u2588"  # the block character of the start-up banner
_CPU_SOURCES = ("cpu_worker.py", "cpu_model_runner.py")
_MULTIMODAL = ("Encoder cache will be initialized", "multi-modal", "mm_processor")

_PROC_PID = lazy_re.compile(r"pid=(\d{1,10})")
MAX_PIDS = 64


def parse_identity(line: LogLine, col: Collector) -> None:
    msg = line.message
    if line.proc and "pid=" in line.proc and len(col.vllm_pids) < MAX_PIDS:
        p = _PROC_PID.search(line.proc)
        if p:
            col.vllm_pids.setdefault(int(p.group(1)), line.proc)
    _version(msg, col)
    if line.old_prefix and col.engine is None:
        col.engine = "V0"  # "file.py:123]" without a bracket: vLLM <= 0.7, where V1 was opt-in
    if _V1_SIGN in msg or _V1_PROC in line.proc or _V1_PROC in msg:
        col.engine = col.engine or "V1"
    elif _V0_SIGN in msg or _V0_PROC in line.proc:
        col.engine = col.engine or "V0"
    m = _ENGINE_CONFIG.search(msg) if "with config:" in msg else None
    if m:
        if m.group(1):
            col.engine = m.group(1)
        elif col.engine is None:
            col.engine = "V0"
        if m.group(2):
            col.version = m.group(2)
        for key, value in _CONFIG_PAIR.findall(m.group(3)):
            _set_arg(col, key, value, from_config=True)
    m = _NON_DEFAULT.search(msg) if "non-default args" in msg else None
    if m:
        _parse_dict_args(m.group(1), col)
    m = _NAMESPACE.search(msg) if "Namespace(" in msg else None
    if m:
        for key, value in _CONFIG_PAIR.findall(m.group(1)):
            if value.strip() not in ("None", "False") or key in ("enforce_eager",):
                _set_arg(col, key, value)
    if _BANNER in msg:  # the start-up banner
        b = _BANNER_VERSION.search(msg)
        if b:
            col.version = col.version or b.group(1)
        b = _BANNER_MODEL.search(msg)
        if b:
            col.model = col.model or b.group(1)
    m = _PLATFORM.search(msg) if "platform" in msg else None
    if m:
        col.platform = m.group(1).lower()
    elif line.src and line.src.startswith(_CPU_SOURCES) and col.platform is None:
        col.platform = "cpu"
    m = _MAX_LEN.search(msg) if "max model len" in msg else None
    if m:
        col.args.setdefault("max_model_len", integer(m.group(1)))
    m = _CHUNKED.search(msg) if "Chunked prefill" in msg else None
    if m:
        col.args.setdefault("max_num_batched_tokens", integer(m.group(1)))
    if any(w in msg for w in _MULTIMODAL):
        col.multimodal_seen = True
    _phase_markers(line, col)


def _version(msg: str, col: Collector) -> None:
    if "ersion" not in msg and "engine (v" not in msg and "vllm" not in msg.lower():
        return
    for rx in _VERSION_PATTERNS:
        m = rx.search(msg)
        if m:
            col.version = m.group(1).rstrip(".,;)")
            return


def _phase_markers(line: LogLine, col: Collector) -> None:
    msg = line.message
    if _STARTING_RX.search(msg):
        col.set_phase(Phase.STARTING, line)
        return
    if "took" not in msg and _LOADING_RX.search(msg):
        col.advance_phase(Phase.LOADING, line)
        return
    if _PROFILING_RX.search(msg) and "CUDA graph" not in msg:
        col.advance_phase(Phase.PROFILING, line)
        return
    if _READY_RX.search(msg):
        col.advance_phase(Phase.READY, line)
        return
    m = _METRICS.search(msg) if "Running:" in msg else None
    if m:
        running, swapped, waiting, kv_usage = m.groups()
        t = _THROUGHPUT.search(msg)
        col.requests = {
            "running": integer(running), "waiting": integer(waiting),
            **({"swapped": integer(swapped)} if swapped else {}),
            **({"kv_cache_usage_pct": num(kv_usage)} if kv_usage else {}),
            **({"prompt_tokens_per_s": num(t.group(1)), "generation_tokens_per_s": num(t.group(2))} if t else {}),
            "file": line.file, "line": line.line,
        }
        busy = integer(running) > 0 or (t is not None and (num(t.group(1)) > 0 or num(t.group(2)) > 0))
        col.advance_phase(Phase.SERVING if busy else Phase.READY, line)
        return
    if _SERVING_RX.search(msg) or (('"GET /' in msg or '"object":' in msg) and _ANSWERED.search(msg)):
        col.advance_phase(Phase.SERVING, line)


def _parse_dict_args(text: str, col: Collector) -> None:
    try:
        value = ast.literal_eval(text.strip())
        if isinstance(value, dict):
            for key, v in value.items():
                _set_arg(col, str(key), v)
            return
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    # Not a pure literal (objects in the repr): fall back to key: value pairs.
    for key, v in _DICT_PAIR.findall(text):
        _set_arg(col, key, v)


def _coerce(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    number = maybe_number(text) if text[:1].isdigit() or text[:1] in "-." else None
    return text if number is None else number


def _set_arg(col: Collector, key: str, value: Any, *, from_config: bool = False) -> None:
    key = key.strip()
    value = _coerce(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and maybe_number(repr(value)) is None:
        value = repr(value)  # inf / nan / an absurd integer from a literal dict: kept as text, never as a number
    if isinstance(value, str) and len(value) > _MAX_ARG_VALUE:
        value = value[:_MAX_ARG_VALUE] + "..."
    if key in _MODEL_KEYS and isinstance(value, str) and value:
        col.model = value
    if from_config:
        # The V0 config line uses the config names; map the few that differ from the CLI.
        key = {"max_seq_len": "max_model_len", "quantization": "quantization"}.get(key, key)
        if key not in ("max_model_len", "tensor_parallel_size", "pipeline_parallel_size", "enforce_eager",
                       "kv_cache_dtype", "quantization", "dtype", "model", "max_num_seqs", "enable_prefix_caching",
                       "gpu_memory_utilization", "block_size", "seed", "device_config"):
            return
        if value is None:
            return
    col.args[key] = value
    if not from_config:
        col.cli_args[key] = value


# For diagnose's byte scan (parsers/scanset.py: every module-level pattern here is scanned, but NOT_SCANNED; SCAN
# adds the literals where a substring test alone decides).
SCAN = (_V1_SIGN, _V1_PROC, _V0_SIGN, _V0_PROC, _BANNER, *_CPU_SOURCES, *_MULTIMODAL)
# Not the serving lines (_METRICS, _THROUGHPUT, _SERVING_RX): every request logs one, and the scanner feeds the
# first and last of each run of them instead (diagnose/prefilter.py's FREQUENT). A process prefix's pid and the
# pairs of a config line are read from whichever lines are parsed.
NOT_SCANNED = (_METRICS, _THROUGHPUT, _SERVING_RX, _PROC_PID, _CONFIG_PAIR, _DICT_PAIR)
