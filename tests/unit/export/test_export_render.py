"""flags_to_argv: typed flags back to the words vLLM's argparse reads."""

from __future__ import annotations

import json
import shlex

from oomguard.inputs.reader import read_command as parse_command
from oomguard.inputs.render import flag_form, flags_to_argv, format_value, shell_command


def test_values_are_written_the_way_vllm_reads_them():
    argv = flags_to_argv(
        "Qwen/Qwen3-8B",
        {
            "max_model_len": 32768,
            "gpu_memory_utilization": 0.85,
            "enforce_eager": True,
            "enable_prefix_caching": False,
            "disable_log_stats": False,  # store_true only: False is its default, nothing written
            "kv_transfer_config": {"kv_connector": "OffloadingConnector", "extra": {"cpu_bytes_to_use": 214748364800}},
            "served_model_name": ["qwen", "my model"],
            "seed": -1,
            "api_key": ["secret"],
        },
        version="0.32.0",
        drop_secrets=True,
    )
    assert argv == [
        "Qwen/Qwen3-8B",
        "--max-model-len",
        "32768",
        "--gpu-memory-utilization",
        "0.85",
        "--enforce-eager",
        "--no-enable-prefix-caching",
        "--kv-transfer-config",
        '{"kv_connector":"OffloadingConnector","extra":{"cpu_bytes_to_use":214748364800}}',
        "--served-model-name",
        "qwen",
        "my model",
        "--seed=-1",
    ]
    assert "secret" not in " ".join(argv)


def test_model_as_option_and_versions_spelling():
    assert flags_to_argv("m", {}, model_option=True) == ["--model", "m"]
    # 0.10.0 predates --kv-cache-memory-bytes; the dest's own option is used where the table has it
    assert flag_form("kv_cache_memory_bytes", "0.33.0").option == "--kv-cache-memory-bytes"
    assert flag_form("tensor_parallel_size", "0.6.0").option == "--tensor-parallel-size"


def test_without_a_table_conventions_apply():
    form = flag_form("some_future_flag", release=None, version=None)
    assert form.option == "--some-future-flag"


def test_format_value():
    assert format_value(True) == "true"
    assert format_value(1e-05) == "1e-05" and float(format_value(1e-05)) == 1e-05
    assert json.loads(format_value({"a": [1, "x y"]})) == {"a": [1, "x y"]}


def test_shell_command_quotes_and_reads_back():
    flags = {
        "kv_transfer_config": {"q": 'it\'s "quoted" $HOME `x` %s'},
        "served_model_name": ["a b"],
        "max_model_len": 8192,
    }
    text = shell_command(["vllm", "serve"], flags_to_argv("/m", flags))
    assert text.splitlines()[0] == "vllm serve /m \\"
    assert shlex.split(text.replace("\\\n", " "))[2:] == flags_to_argv("/m", flags)
    launch = parse_command([text])
    assert launch.model == "/m" and launch.flags == flags
