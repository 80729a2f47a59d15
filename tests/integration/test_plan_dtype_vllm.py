"""--dtype reaches the KV layout: the plan against a real vLLM 0.32 CPU server.

With the pool pinned (--kv-cache-memory-bytes) the token count is pure layout, so the plan
must match vLLM's own "KV cache size" line exactly. The shared test server serves the float32
tiny model with --dtype float32 (the auto KV dtype follows the served dtype: 4 B per element),
the case the plan once priced at 2 B; no second server is started for it.
"""

from __future__ import annotations

import re

import pytest

from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.planner import plan_launch
from vllm_server import TINY_DTYPE, TINY_KV_CACHE_BYTES, TINY_KV_TOKENS  # noqa: E402

pytestmark = pytest.mark.vllm

CPU_BLOCK_SIZE = 128  # vLLM's CPU platform default block size


def _logged_tokens(log: str) -> int:
    m = re.search(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens", log)
    assert m, "no 'KV cache size' line in the vLLM log (the CPU build says CPU)"
    return int(m.group(1).replace(",", ""))


def _planned_tokens(model_dir, dtype: str | None) -> int:
    flags = {"kv_cache_memory_bytes": TINY_KV_CACHE_BYTES, "max_model_len": 1024, "block_size": CPU_BLOCK_SIZE, "enforce_eager": True}
    if dtype:
        flags["dtype"] = dtype
    p = plan_launch(load_model(str(model_dir)), lookup_gpu("L4"), flags, version="0.32.0")
    return p.kv_cache_tokens


def test_float32_tokens_match_vllm_and_auto_halves_them(vllm_server, tiny_model_dir):
    logged = _logged_tokens(vllm_server.log_text())
    assert logged == TINY_KV_TOKENS
    assert _planned_tokens(tiny_model_dir, TINY_DTYPE) == logged
    # --dtype auto on CUDA serves this float32 checkpoint in bf16 (>= 0.9.1): half the bytes per token
    assert _planned_tokens(tiny_model_dir, None) == 2 * logged
