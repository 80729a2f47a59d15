"""Does a file hold a vLLM launch? Content, not names, decides (the pre-commit hook asks it).

A repository holds many shell scripts and YAML files; only those that start vLLM are launches:

- a script (or any text) with a ``vllm serve`` command or vLLM's OpenAI server module
  (``python -m vllm.entrypoints.openai.api_server``), outside comments;
- a Kubernetes object or compose file that runs a vLLM image or such a command;
- production-stack Helm values (``servingEngineSpec``: the vLLM stack's own chart);
- a ``vllm serve --config`` YAML: a flat mapping whose keys are vLLM flags, at least one of them
  one that sizes memory (an unrelated chart's ``values.yaml`` has none).

``kind_of`` returns what it is, or None with the reason a file is not a launch.
"""

from __future__ import annotations

import re

_COMMAND = re.compile(r"(^|[\s;&|(`'\"\[,])vllm\s+serve\b|vllm\.entrypoints\.(openai\.api_server|api_server)")
# a script runs vLLM where a command starts: after env assignments / exec / nohup ..., a pipe or
# `&&`; or as a container (`docker run ... vllm/vllm-openai`). A quoted mention is not a launch.
_LEAD = r"(?:^|&&|\|\||[;|(]|\$\()\s*(?:(?:[A-Za-z_][A-Za-z0-9_]*=\S*|exec|nohup|sudo|env|time|command|setsid|numactl(?:\s+-\S+)*|taskset\s+\S+)\s+)*"
_SCRIPT = re.compile(_LEAD + r"(?:\S*/)?(?:vllm\s+serve\b|python[0-9.]*\s+(?:-\S+\s+)*-m\s+vllm\.entrypoints\.)", re.M)
_CONTAINER = re.compile(r"\b(?:docker|podman|nerdctl)\s+run\b[^\n]*(?:\\\n[^\n]*)*?\bvllm[^\s]*(?:openai|vllm)", re.M)
_IMAGE = re.compile(r"^\s*-?\s*image\s*:\s*['\"]?[^\s'\"#]*vllm[^\s'\"#]*", re.M | re.I)
_YAML_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)\s*:", re.M)
# keys of a vLLM --config YAML that change memory: one of them makes a flat mapping a launch
MEMORY_KEYS = frozenset({
    "max-model-len", "gpu-memory-utilization", "tensor-parallel-size", "pipeline-parallel-size",
    "max-num-batched-tokens", "max-num-seqs", "kv-cache-dtype", "kv-cache-memory-bytes", "cpu-offload-gb",
    "enforce-eager", "enable-chunked-prefill", "quantization", "swap-space", "block-size", "dtype",
    "kv-offloading-size", "data-parallel-size",
})


def _code_lines(text: str) -> str:
    """The text without shell / YAML comment lines (a commented-out launch is not a launch)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _yaml_keys(text: str) -> set[str]:
    return {m.group(1).replace("_", "-") for m in _YAML_KEY.finditer(text)}


def kind_of(path: str, text: str) -> tuple[str | None, str]:
    """(launch kind or None, why): ``script``, ``manifest`` or ``config``."""
    code = _code_lines(text)
    is_yaml = path.lower().endswith((".yaml", ".yml"))
    if is_yaml:
        from oomguard.inputs.manifests import is_manifest

        if re.search(r"^servingEngineSpec\s*:", code, re.M):
            return "manifest", "production-stack Helm values (servingEngineSpec)"
        if is_manifest(code):
            if _IMAGE.search(code) or _COMMAND.search(code):
                return "manifest", "a Kubernetes object or compose service that runs vLLM"
            return None, "a Kubernetes / compose file that runs no vLLM image or command"
        keys = _yaml_keys(code)
        mem = sorted(keys & MEMORY_KEYS)
        if mem and ("model" in keys or len(mem) >= 2):
            return "config", f"a vllm serve --config YAML ({', '.join(mem[:3])})"
        if _COMMAND.search(code):
            return None, "YAML with a vllm serve command that is no Kubernetes, compose or Helm file (a CI workflow?): not read"
        return None, "YAML without vLLM flags, image or command"
    if _SCRIPT.search(code):
        return "script", "a vllm serve command"
    if _CONTAINER.search(code):
        return "script", "a vLLM container (docker run vllm/vllm-openai)"
    if _COMMAND.search(code):
        return None, "vLLM is mentioned, but no command starts it"
    return None, "no vllm serve command"
