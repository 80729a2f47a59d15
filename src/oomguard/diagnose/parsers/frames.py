"""Traceback frames in every shape people paste them, reduced to the function name.

- CPython: ``  File "/x/vllm/worker/model_runner.py", line 1024, in load_model``
  (also behind ``[rank0]:``, a Ray or worker prefix, a quote ``>`` or a box ``│``);
- IPython / Jupyter: ``File /x/vllm/worker/model_runner.py:1024, in GPUModelRunner.load_model(self)``
  and the older ``/x/model_runner.py in load_model(self)``;
- rich: ``│ /x/vllm/worker/model_runner.py:1024 in load_model``;
- faulthandler / py-spy style: ``File "/x.py", line 12 in load_model`` (no comma) and
  ``load_model (vllm/worker/model_runner.py:1024)``;
- hand-trimmed trees where only ``model_runner.py, line 1024, in load_model`` is left.
"""

from __future__ import annotations

import re
import oomguard.lazy_re as lazy_re

_CPYTHON = lazy_re.compile(r'^[\s>|│┃]*File "([^"]{1,500})", line (\d{1,9}),? in ([\w.<>]{1,120})')
_IPYTHON = lazy_re.compile(r"^[\s>|│┃]*File ([^\s,]{1,500}\.py):(\d{1,9}),? in ([\w.<>]{1,120})")
_IPYTHON_OLD = lazy_re.compile(r"^[\s>|│┃]*(/[^\s]{1,500}\.py) in ([\w.<>]{1,120})\(")
_RICH = lazy_re.compile(r"^[\s>|│┃]*(?:[^\s│]{0,500}/)?[\w.-]{1,100}\.py:(\d{1,9}) in ([\w.<>]{1,120})\s*(?:│|$)")
_PYSPY = lazy_re.compile(r"^[\s>|│┃]*([\w<>]{1,120}) \(([^\s()]{1,500}\.py):\d{1,9}\)\s*$")
_TRIMMED = lazy_re.compile(r'^[\s>|│┃.]*"?[^\s"]{0,500}\.py"?,? line \d{1,9},? in ([\w.<>]{1,120})\s*$')


def frame_function(message: str) -> str | None:
    """The function of a traceback frame line, or None when ``message`` is not one."""
    found = frame(message)
    return found[0] if found is not None else None


_RICH_PATH = lazy_re.compile(r"^[\s>|│┃]*([^\s│]{0,500}\.py):\d")
# (pattern, group of the function, where the file path is: its group, a pattern of its own, or None: not kept)
_SHAPES = ((_CPYTHON, 3, 1), (_IPYTHON, 3, 1), (_IPYTHON_OLD, 2, 1), (_RICH, 2, _RICH_PATH), (_PYSPY, 1, 2),
           (_TRIMMED, 1, None))


def frame(message: str) -> tuple[str, str | None] | None:
    """(function, file path or None) of a traceback frame line, or None when ``message`` is not one."""
    if ".py" not in message:
        return None
    for rx, group, path in _SHAPES:
        m = rx.match(message)
        if m:
            # "GPUModelRunner.load_model" (IPython qualifies methods): the method is what matters.
            name = m.group(group).rsplit(".", 1)[-1]
            if isinstance(path, int):
                return name, m.group(path)
            p = path.match(message) if path is not None else None
            return name, p.group(1) if p else None
    return None


# Who wrote the code a frame runs: the package its file belongs to. The innermost frame of a traceback is the code
# that raised (a TypeError's call site, an assert, a check), which says whose fault the exception is (issue 16):
# vLLM's own checks, a library under it, the wrapper that embeds it, or the HTTP client that called it.
COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vllm", ("vllm",)),
    # vLLM's platform plugins and forks' packages: vLLM code for another backend
    ("plugin", ("vllm_ascend", "vllm_gaudi", "vllm_hpu_extension", "tpu_inference", "vllm_omni", "vllm_metal",
                "vllm_spyre", "vllm_neuron", "vllm_rbln", "aphrodite")),
    ("torch", ("torch", "torch_npu", "torch_xla", "triton", "jax", "jaxlib", "flax", "xformers", "flash_attn",
               "flashinfer", "deep_gemm", "intel_extension_for_pytorch", "habana_frameworks", "bitsandbytes")),
    ("transformers", ("transformers", "tokenizers", "huggingface_hub", "safetensors", "sentencepiece",
                      "mistral_common", "tiktoken", "accelerate", "peft")),
    ("ray", ("ray",)),
    ("client", ("openai", "requests", "httpx", "httpcore", "aiohttp", "urllib3", "litellm", "langchain",
                "langchain_openai", "langchain_core", "llama_index")),
    # the web framework vLLM's server (and a wrapper's) runs in: neither side's fault on its own
    ("server", ("uvicorn", "starlette", "fastapi", "uvloop", "grpc", "click", "typer", "argparse", "asyncio",
                "multiprocessing", "concurrent", "threading", "runpy", "importlib", "pydantic", "pydantic_core")),
)
_PACKAGE_COMPONENT = {pkg: comp for comp, pkgs in COMPONENTS for pkg in pkgs}
_SITE = lazy_re.compile(r"(?:site|dist)-packages/([A-Za-z_][\w]*)")
# vLLM's own tree outside site-packages (a source checkout, /workspace/vllm/vllm/...): "vllm/" followed by one of its
# subpackages; a wrapper's "huggingfaceserver/vllm/vllm_model.py" is not vLLM's.
_VLLM_TREE = lazy_re.compile(r"(?:^|/)vllm/(?:v1|engine|entrypoints|model_executor|worker|executor|distributed|attention|"
                             r"config|transformers_utils|multimodal|platforms|lora|inputs|core|spec_decode|compilation|"
                             r"utils|device_allocator|usage|plugins|reasoning|tool_parsers|profiler|model_loader|"
                             r"third_party|_custom_ops\.py|envs\.py|sequence\.py|outputs\.py|sampling_params\.py|"
                             r"config\.py|utils\.py|forward_context\.py|logger\.py|tokenizers|renderers)\b")
_PLUGIN_TREE = lazy_re.compile(r"(?:^|/)(vllm_ascend|vllm_gaudi|vllm_hpu_extension|tpu_inference|vllm_omni|vllm_metal)/")
_STDLIB = lazy_re.compile(r"(?:^|/)(?:lib/)?python3(?:\.\d+)?/(?!site-packages|dist-packages)([A-Za-z_]\w*)")


def component(path: str | None) -> str | None:
    """The component (COMPONENTS) whose code ``path`` is; "wrapper" for any other package or script (the code that
    embeds vLLM, a user's own script included); None when the frame kept no path."""
    if not path:
        return None
    path = path.replace("\\", "/")
    m = _SITE.search(path)
    if m:
        return _PACKAGE_COMPONENT.get(m.group(1), "wrapper")
    if _VLLM_TREE.search(path):
        return "vllm"
    if _PLUGIN_TREE.search(path):
        return "plugin"
    m = _STDLIB.search(path)
    if m:
        return "server" if m.group(1) in _PACKAGE_COMPONENT else "python"
    if path.startswith("<"):  # "<frozen runpy>", "<string>"
        return "python"
    return "wrapper"


# Lines that carry a frame but no keyword of the prefilter's first list (added there).
KEYWORDS: tuple[bytes, ...] = (b"File /", b".py in ", b" in load_model", b" in profile_run", b"capture_model",
                               b"_dummy_sampler_run", b" in execute_model", b"load_weights")



# The interpreter's own wording for a program error (CPython's messages for TypeError, AttributeError, NameError,
# IndexError, ValueError on unpacking...): code and the code it calls are out of step (a bug, or two packages'
# versions), whatever words the message holds ("unsupported operand type(s)" states no unsupported configuration,
# "got an unexpected keyword argument" is not a command line's argument).
PYTHON_MESSAGE = lazy_re.compile(
    r"unsupported operand type\(s\)|object has no attribute '|module '[\w.]+' has no attribute|"
    r"got an unexpected keyword argument|got multiple values for (?:keyword )?argument|"
    r"missing \d+ required (?:positional|keyword-only) arguments?|takes (?:from )?\d+ (?:to \d+ )?positional "
    r"arguments? but \d+ (?:were|was) given|object is not (?:subscriptable|callable|iterable)|"
    r"cannot unpack non-iterable|(?:not enough|too many) values to unpack|can only concatenate|unhashable type|"
    r"name '\w+' is not defined|(?:list|tuple|string) index out of range|object of type '\w+' has no len\(\)|"
    r"argument of type '\w+' is not iterable|'NoneType' object")

# Helpers on lines already chosen (a frame line, an exception line): not part of the byte scan (parsers/scanset.py).
NOT_SCANNED = (_RICH_PATH, _SITE, _VLLM_TREE, _PLUGIN_TREE, _STDLIB, PYTHON_MESSAGE)
