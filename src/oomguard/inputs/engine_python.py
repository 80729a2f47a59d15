"""Ask a real vLLM installation for its resolved engine defaults (``--engine-python PATH``).

oomguard's per-version tables model vLLM's defaults; when the user has vLLM
installed, its own ``EngineArgs.create_engine_config()`` is the ground truth.
We run a short script with that interpreter (never importing vLLM here), give
it the model's config.json in a temporary directory (no weights, no tokenizer)
and the launch's flags, and read back the resolved values as JSON.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from oomguard.errors import InputError

# Runs inside the user's vLLM environment. Reads {"model_dir", "flags", "usage"} on stdin.
_SCRIPT = r"""
import json, sys, os
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
req = json.load(sys.stdin)
import vllm
from vllm.engine.arg_utils import EngineArgs
try:
    from vllm.usage.usage_lib import UsageContext
    ctx = UsageContext.OPENAI_API_SERVER if req["usage"] == "serve" else UsageContext.LLM_CLASS
except Exception:
    ctx = None
fields = set(getattr(EngineArgs, "__dataclass_fields__", {}))
kw = {k: v for k, v in req["flags"].items() if k in fields}
args = EngineArgs(model=req["model_dir"], skip_tokenizer_init=True, load_format="dummy", **kw)
cfg = args.create_engine_config(ctx) if ctx is not None else args.create_engine_config()
sch, cache, comp = cfg.scheduler_config, cfg.cache_config, cfg.compilation_config
out = {
    "vllm_version": vllm.__version__,
    "max_model_len": cfg.model_config.max_model_len,
    "max_num_seqs": sch.max_num_seqs,
    "max_num_batched_tokens": sch.max_num_batched_tokens,
    "enable_chunked_prefill": getattr(sch, "enable_chunked_prefill", None) or getattr(sch, "chunked_prefill_enabled", None),
    "gpu_memory_utilization": cache.gpu_memory_utilization,
    "block_size": cache.block_size,
    "kv_cache_dtype": cache.cache_dtype,
    "enable_prefix_caching": cache.enable_prefix_caching,
    "cudagraph_mode": str(getattr(comp, "cudagraph_mode", "")),
    "num_capture_sizes": len(getattr(comp, "cudagraph_capture_sizes", None) or []),
    "platform": type(__import__("vllm.platforms", fromlist=["current_platform"]).current_platform).__name__,
}
print("OOMGUARD_ENGINE_JSON " + json.dumps(out, default=str))
"""


def query_engine(python: str, config_path: Path, flags: dict, *, usage: str = "serve", timeout: int = 300) -> dict:
    from oomguard.inputs import files

    exe = shutil.which(python) or python
    if not files.is_file(exe):
        raise InputError(f"--engine-python {python}: no such interpreter")
    with tempfile.TemporaryDirectory(prefix="oomguard-engine-") as tmp:
        shutil.copy(config_path, Path(tmp) / "config.json")
        hq = config_path.with_name("hf_quant_config.json")
        if files.is_file(hq):
            shutil.copy(hq, Path(tmp) / "hf_quant_config.json")
        req = json.dumps({"model_dir": tmp, "flags": _jsonable(flags), "usage": usage})
        try:
            proc = subprocess.run([exe, "-c", _SCRIPT], input=req, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InputError(f"--engine-python {python}: vLLM did not answer within {timeout} s") from None
    for line in proc.stdout.splitlines():
        if line.startswith("OOMGUARD_ENGINE_JSON "):
            return json.loads(line.split(" ", 1)[1])
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    raise InputError(f"--engine-python {python}: vLLM could not resolve the engine config: {last[:300]}")


def _jsonable(flags: dict) -> dict:
    out = {}
    for k, v in flags.items():
        try:
            json.dumps(v)
        except TypeError:
            continue
        out[k] = v
    return out


def merge_engine_defaults(flags: dict, resolved: dict) -> tuple[dict, str]:
    """Fill the flags the user did not set with the engine's resolved values."""
    merged = dict(flags)
    for key in ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "max_model_len"):
        if key not in merged and resolved.get(key) is not None:
            merged[key] = resolved[key]
    if "block_size" not in merged and resolved.get("block_size") and resolved.get("platform", "").startswith(("Cuda", "Rocm", "NvmlCuda", "NonNvmlCuda")):
        merged["block_size"] = resolved["block_size"]
    return merged, str(resolved.get("vllm_version") or "")
