"""Facts about the committed tables, checked against the source-traced reference
(../shared/vllm-memory.md §0 commits, §3.1 defaults, §3.3 renamed/removed flags)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomguard.versions import SUPPORTED, FlagType, get_release, parse_version
from oomguard.versions.releases import DATA_DIR

# §3.3: presence of the literal option string (True = present) per release
PRESENCE = {
    "--swap-space":                      dict.fromkeys(["0.6.6.post1", "0.8.5.post1", "0.10.2", "0.11.0", "0.15.0", "0.17.0"], True) | dict.fromkeys(["0.18.0", "0.20.0", "0.25.0", "0.30.0", "0.33.0"], False),
    "--use-v2-block-manager":            {"0.6.6.post1": True, "0.8.5.post1": True, "0.10.2": False, "0.33.0": False},
    "--num-scheduler-steps":             {"0.6.6.post1": True, "0.8.5.post1": True, "0.10.2": False},
    "--preemption-mode":                 {"0.6.6.post1": True, "0.10.2": True, "0.11.0": False},
    "--max-seq-len-to-capture":          {"0.6.6.post1": True, "0.10.2": True, "0.11.0": False},
    "--num-lookahead-slots":             {"0.6.6.post1": True, "0.11.0": True, "0.15.0": False},
    "--cuda-graph-sizes":                {"0.8.5.post1": False, "0.10.2": True, "0.11.0": True, "0.12.0": True, "0.13.0": False, "0.15.0": False},
    "--max-cudagraph-capture-size":      {"0.11.0": False, "0.15.0": True, "0.20.0": True, "0.33.0": True},
    "--kv-cache-memory-bytes":           {"0.8.5.post1": False, "0.10.2": True, "0.11.0": True, "0.33.0": True},
    "--kv-offloading-size":              {"0.11.0": False, "0.15.0": True, "0.33.0": True},
    "--scheduler-reserve-full-isl":      {"0.15.0": False, "0.18.0": False, "0.19.0": True, "0.20.0": True, "0.33.0": True},
    "--performance-mode":                {"0.15.0": False, "0.20.0": True, "0.33.0": True},
    "--disable-hybrid-kv-cache-manager": {"0.8.5.post1": False, "0.10.2": True, "0.33.0": True},
    "--calculate-kv-scales":             {"0.6.6.post1": False, "0.8.5.post1": True, "0.25.0": True, "0.30.0": False},
    "--max-num-partial-prefills":        {"0.6.6.post1": False, "0.8.5.post1": True, "0.25.0": True, "0.30.0": False},
    "--mamba-cache-mode":                {"0.11.0": False, "0.15.0": True, "0.30.0": True, "0.33.0": True},
    # §3.3 marks it at 0.33 and absent at 0.30; the tables show it arrived in 0.31.0
    "--device-memory-utilization":       {"0.30.0": False, "0.31.0": True, "0.33.0": True},
    "--disable-cascade-attn":            {"0.6.6.post1": False, "0.8.5.post1": True, "0.33.0": True},
    "--cpu-offload-gb":                  dict.fromkeys(["0.6.6.post1", "0.8.5.post1", "0.10.2", "0.11.0", "0.15.0", "0.20.0", "0.25.0", "0.30.0", "0.33.0"], True),
}

# §0: commit recorded in each wheel's vllm/_version.py
COMMITS = {
    "0.33.0": "4ba787ec9", "0.32.0": "5df63a720", "0.31.0": "db9527a46", "0.30.0": "ced6857af",
    "0.29.0": "98dff2a81", "0.28.0": "2cf0a6915", "0.27.0": "4bdc8a788", "0.26.0": "ffd46bfab",
    "0.25.0": "dd10e03f9", "0.21.0": "ad7125a43", "0.20.0": "b8160878f", "0.19.0": "2a69949bd",
    "0.18.0": "bcf2be961", "0.17.0": "b31e9326a", "0.16.0": "89a77b108", "0.15.0": "f17644344",
    "0.14.0": "b17039bcc", "0.13.0": "72506c983", "0.12.0": "4fd9d6a85", "0.11.0": "f71952c1c",
    "0.10.2": "26b999c71", "0.8.5.post1": None, "0.6.6.post1": None,
}


def _v(text: str):
    return parse_version(text)


@pytest.mark.parametrize("option", sorted(PRESENCE))
def test_presence_matches_reference(option):
    for version, present in PRESENCE[option].items():
        assert get_release(version).has_option(option) is present, f"{option} in {version}"


def test_deprecated_no_ops_in_033():
    rel = get_release("0.33.0")
    assert rel.resolve_option("--mamba-cache-mode").deprecated
    assert rel.resolve_option("--disable-cascade-attn").deprecated
    assert not rel.resolve_option("--gpu-memory-utilization").deprecated


@pytest.mark.parametrize("version,commit", sorted(COMMITS.items()))
def test_commit(version, commit):
    assert get_release(version).commit == commit


@pytest.mark.parametrize("version", SUPPORTED)
def test_gpu_memory_utilization_default(version):
    expected = 0.92 if _v(version) >= _v("0.20.0") else 0.9
    flag = get_release(version).flags["gpu_memory_utilization"]
    assert flag.default == expected and flag.type is FlagType.FLOAT


@pytest.mark.parametrize("version", SUPPORTED)
def test_memory_flag_defaults_every_release(version):
    flags = get_release(version).flags
    # None = computed at start-up (by GPU, usage context, model); the lead's model derives these
    runtime = ["block_size", "max_num_batched_tokens", "max_num_seqs", "max_model_len",
               "enable_prefix_caching", "enable_chunked_prefill", "num_gpu_blocks_override"]
    if _v(version) < _v("0.6.4"):
        # 0.6.0-0.6.3.post1 still wrote the V0 block size into the parser; 0.6.4 made it
        # `16 if not current_platform.is_hpu() else 128` (left unevaluated: a platform question)
        assert flags["block_size"].default == 16
        runtime.remove("block_size")
    if _v(version) < _v("0.6.5"):
        # up to 0.6.4.post1 the parser held the V0 values; 0.6.5 moved them to start-up
        assert flags["max_num_seqs"].default == 256
        assert flags["enable_prefix_caching"].default is False
        runtime = [r for r in runtime if r not in ("max_num_seqs", "enable_prefix_caching")]
    # None = computed at start-up (by GPU, usage context, model); the lead's model derives these
    for name in runtime:
        assert flags[name].default is None, name
    assert flags["enforce_eager"].default is False
    assert flags["enforce_eager"].takes_value is False
    assert flags["kv_cache_dtype"].default == "auto"
    assert flags["tensor_parallel_size"].default == 1
    assert flags["pipeline_parallel_size"].default == 1
    assert flags["cpu_offload_gb"].default == 0
    assert flags["disable_custom_all_reduce"].default is False


def test_swap_space_default_until_removed():
    for version in SUPPORTED:
        flags = get_release(version).flags
        if _v(version) < _v("0.18.0"):
            assert flags["swap_space"].default == 4
        else:
            assert "swap_space" not in flags


def test_v0_and_early_v1_specifics():
    v066 = get_release("0.6.6.post1").flags
    assert v066["max_seq_len_to_capture"].default == 8192
    assert v066["block_size"].choices == (8, 16, 32, 64, 128)
    # the LLM class (EngineArgs) starts enforce_eager at None, vllm serve at False
    assert v066["enforce_eager"].engine_default is None
    assert get_release("0.10.2").flags["cuda_graph_sizes"].type is FlagType.LIST


def test_value_types_of_memory_flags():
    v33 = get_release("0.33.0").flags
    assert v33["kv_cache_memory_bytes"].type is FlagType.SIZE
    assert v33["max_num_batched_tokens"].type is FlagType.SIZE
    assert v33["max_model_len"].type is FlagType.SIZE and v33["max_model_len"].accepts_auto
    assert v33["max_num_seqs"].type is FlagType.INT
    assert v33["compilation_config"].type is FlagType.JSON
    assert v33["compilation_config"].default_repr == "CompilationConfig()"
    assert v33["cudagraph_capture_sizes"].type is FlagType.LIST and v33["cudagraph_capture_sizes"].item is FlagType.INT
    assert v33["scheduler_reserve_full_isl"].default is True
    assert get_release("0.6.6.post1").flags["max_model_len"].type is FlagType.INT


def test_cuda_graph_estimate_env_default():
    assert "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS" not in get_release("0.17.0").env
    assert get_release("0.18.0").env_default("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS") is False
    assert get_release("0.19.0").env_default("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS") is False
    assert get_release("0.20.0").env_default("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS") is True


def test_other_memory_env_vars_recorded():
    env = get_release("0.33.0").env
    for name in ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_USE_V2_MODEL_RUNNER", "VLLM_CPU_KVCACHE_SPACE",
                 "VLLM_PP_LAYER_PARTITION", "VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE", "VLLM_ENABLE_STARTUP_PLAN"):
        assert name in env, name
    assert env["VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE"]["default"] == 394 * 1024 * 1024
    # a path default must not leak the generating machine's home directory
    assert env["VLLM_CACHE_ROOT"]["default"] == "~/.cache/vllm"


@pytest.mark.parametrize("version", SUPPORTED)
def test_table_file_shape(version):
    path = Path(DATA_DIR) / f"vllm-{version}.json"
    data = json.loads(path.read_text())
    assert data["version"] == version and data["format"] == 1
    dests = [f["dest"] for f in data["flags"]]
    assert len(dests) == len(set(dests))
    options = [o for f in data["flags"] for o in f.get("options", []) + f.get("neg", [])]
    assert len(options) == len(set(options)), "an option string maps to two flags"
    assert all(o.startswith("-") for o in options)
    assert all("help" not in f for f in data["flags"])
    assert path.stat().st_size < 120_000
