"""Ready commands and --from edits."""

from __future__ import annotations

import shlex

from oomguard.fit.command import Change, magnitude, render, size_text


def test_render_puts_searched_flags_first_and_quotes_json():
    cmd = render(
        "Qwen/Qwen3-8B",
        {"enable_prefix_caching": True, "max_model_len": 32768, "kv_transfer_config": {"kv_connector": "OffloadingConnector"}, "enforce_eager": False},
        {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
    )
    assert cmd.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3-8B --no-enforce-eager --max-model-len 32768")
    assert "--kv-transfer-config '{\"kv_connector\":\"OffloadingConnector\"}'" in cmd
    words = shlex.split(cmd)  # pastes into a shell as is
    assert words[words.index("--kv-transfer-config") + 1] == '{"kv_connector":"OffloadingConnector"}'


def test_booleans_follow_the_version_flag_table():
    # 0.6.6: --enable-prefix-caching is store_true, so "off" is its default and writes nothing
    assert render("m", {"enable_prefix_caching": False}, version=(0, 6, 3)) == "vllm serve m"  # 0.6.3 has no --no- form
    assert "--enable-prefix-caching" in render("m", {"enable_prefix_caching": True}, version=(0, 6, 6))
    assert "--no-enable-prefix-caching" in render("m", {"enable_prefix_caching": False})


def test_credentials_never_written():
    cmd = render("m", {"api_key": "sk-secret-123", "max_model_len": 4096})
    assert "sk-secret" not in cmd and "--api-key" not in cmd
    assert "--max-model-len 4096" in cmd


def test_sizes_read_as_vllm_suffixes():
    assert size_text(10 * 2**30) == "10G"
    assert size_text(57600 * 2**20) == "57600M"
    assert size_text(1234) == "1234"
    assert "--kv-cache-memory-bytes 15G" in render("m", {"kv_cache_memory_bytes": 15 * 2**30})


def test_change_descriptions():
    assert Change("max_num_batched_tokens", 1048576, 8192, 1048576, "start_api.sh", 6).describe() == "--max-num-batched-tokens 1048576 → 8192 (start_api.sh:6)"
    assert Change("kv_cache_dtype", None, "fp8", "auto").describe() == "add --kv-cache-dtype fp8 (default auto)"
    assert Change("enable_chunked_prefill", None, True, False).describe() == "add --enable-chunked-prefill (default off)"
    assert Change("VLLM_ALLOW_LONG_MAX_MODEL_LEN", None, "1", None, is_env=True).describe() == "set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    ktc_old = {"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": 200, "n_read_threads": 16}}
    ktc_new = {"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": 128, "n_read_threads": 16}}
    d = Change("kv_transfer_config", ktc_old, ktc_new, None).describe()
    assert "cpu_bytes_to_use 200 → 128" in d and "n_read_threads" not in d


def test_magnitude_orders_edits():
    small = magnitude(Change("max_num_batched_tokens", 8192, 4096, 8192))
    big = magnitude(Change("max_num_batched_tokens", 8192, 256, 8192))
    assert small < big
    assert magnitude(Change("gpu_memory_utilization", 0.9, 0.92, 0.9)) < magnitude(Change("gpu_memory_utilization", 0.9, 0.8, 0.9))
    # giving up context weighs more than tuning the engine around it
    assert magnitude(Change("max_model_len", 131072, 65536, 131072)) > magnitude(Change("max_num_batched_tokens", 131072, 65536, 131072)) + 1
    assert magnitude(Change("enforce_eager", False, True, False)) == 1.0
    assert magnitude(Change("kv_cache_dtype", None, "fp8", "auto")) > 1.0  # costs accuracy too
