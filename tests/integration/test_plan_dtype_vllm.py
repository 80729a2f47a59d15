"""--dtype reaches the KV layout: the plan against a real vLLM 0.32 CPU server.

With the pool pinned (--kv-cache-memory-bytes 64M) the token count is pure layout, so the
plan must match vLLM's own "GPU KV cache size" line exactly, for the checkpoint's dtype and
for --dtype float32 (the auto KV dtype follows the served dtype: twice the bytes per token).
"""

from __future__ import annotations

import re

import pytest

from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.planner import plan_launch

pytestmark = pytest.mark.vllm

CPU_BLOCK_SIZE = 128  # vLLM's CPU platform default block size


def _logged_tokens(log: str) -> int:
    m = re.search(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens", log)
    assert m, "no 'KV cache size' line in the vLLM log (the CPU build says CPU)"
    return int(m.group(1).replace(",", ""))


def _planned_tokens(model_dir, dtype: str | None) -> int:
    flags = {"kv_cache_memory_bytes": 64 * 2**20, "max_model_len": 1024, "block_size": CPU_BLOCK_SIZE, "enforce_eager": True}
    if dtype:
        flags["dtype"] = dtype
    p = plan_launch(load_model(str(model_dir)), lookup_gpu("L4"), flags, version="0.32.0")
    return p.kv_cache_tokens


def test_float32_halves_the_tokens_as_vllm_does(vllm_server, vllm_server_factory, tiny_model_dir):
    base = _logged_tokens(vllm_server.log_text())
    assert _planned_tokens(tiny_model_dir, None) == base
    server = vllm_server_factory(["--dtype", "float32"])
    try:
        fp32 = _logged_tokens(server.log_text())
    finally:
        server.stop()
    assert fp32 * 2 == base
    assert _planned_tokens(tiny_model_dir, "float32") == fp32
