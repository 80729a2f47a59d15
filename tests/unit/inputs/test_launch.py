"""Launch parsing: scripts, commands, YAML, variables, abbreviations, located errors."""

import pytest

from oomguard.errors import InputError
from oomguard.inputs.command import parse_command, parse_flags, parse_script
from oomguard.inputs.reader import read_launch


def test_script_with_continuations_exports_and_json(tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text(
        "#!/bin/bash\n"
        "export MODEL=/models/qwen\n"
        "LEN=32768\n"
        "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\n"
        "CUDA_VISIBLE_DEVICES=0,1 vllm serve $MODEL \\\n"
        "  --tensor_parallel_size 2 \\\n"
        "  --max-model-len=${LEN} \\\n"
        "  --kv-cache-memory 10G \\\n"
        "  --enable-prefix-caching \\\n"
        "  --speculative-config '{\"method\": \"mtp\",\n"
        "     \"num_speculative_tokens\": 3}'  # oomguard: ignore OG101\n"
    )
    launch = read_launch(script)
    assert launch.model == "/models/qwen"
    assert launch.flags["tensor_parallel_size"] == 2
    assert launch.flags["max_model_len"] == 32768
    assert launch.flags["kv_cache_memory_bytes"] == 10 * 2**30  # abbreviation + binary suffix
    assert launch.flags["enable_prefix_caching"] is True
    assert launch.flags["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert launch.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    assert launch.sites["max_model_len"].line == 7
    assert any("OG101" in ids for ids in launch.ignore_lines.values())


def test_python_module_entrypoint():
    launch = parse_command(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B", "--max-num-seqs", "64"])
    assert launch.model == "Qwen/Qwen3-8B"
    assert launch.flags["max_num_seqs"] == 64


def test_negated_boolean_and_no_prefix():
    launch = parse_flags(["--no-enable-prefix-caching", "--enforce-eager"])
    assert launch.flags["enable_prefix_caching"] is False
    assert launch.flags["enforce_eager"] is True


def test_unknown_flag_names_line_and_suggestion():
    with pytest.raises(InputError) as e:
        parse_script("vllm serve m \\\n  --max-model-lenn 4096\n", path="s.sh", version="0.33")
    msg = str(e.value)
    assert msg.startswith("s.sh:2:") and "--max-model-len" in msg


def test_removed_flag_in_new_version_is_error_but_valid_in_old():
    with pytest.raises(InputError):
        parse_flags(["--swap-space", "4"], version="0.33")
    assert parse_flags(["--swap-space", "4"], version="0.11.0").flags["swap_space"] == 4


@pytest.mark.parametrize("value", ["-5", "abc"])
def test_bad_values(value):
    with pytest.raises(InputError):
        parse_flags(["--max-num-seqs", value])


def test_bad_json_value_located():
    with pytest.raises(InputError) as e:
        parse_script("vllm serve m --speculative-config '{\"method\": }'\n", path="x.sh", version=None)
    assert "x.sh:1" in str(e.value) and "JSON" in str(e.value)


def test_unterminated_quote():
    with pytest.raises(InputError) as e:
        parse_script("vllm serve m \\\n --served-model-name 'abc\n", path="x.sh", version=None)
    assert "x.sh:2" in str(e.value) and "unterminated" in str(e.value)


def test_no_vllm_command(tmp_path):
    p = tmp_path / "a.sh"
    p.write_text("echo hello\n")
    with pytest.raises(InputError, match="no vLLM command"):
        read_launch(p)


def test_yaml_config(tmp_path):
    y = tmp_path / "serve.yaml"
    y.write_text("model: Qwen/Qwen3-8B\nmax_model_len: 16384\ngpu-memory-utilization: 0.85\nenforce_eager: true\n")
    launch = read_launch(y)
    assert launch.model == "Qwen/Qwen3-8B"
    assert launch.flags == {"max_model_len": 16384, "gpu_memory_utilization": 0.85, "enforce_eager": True}
    assert launch.sites["gpu_memory_utilization"].line == 3


def test_yaml_bad_key_and_not_mapping(tmp_path):
    y = tmp_path / "serve.yaml"
    y.write_text("model: x\nnot_a_flag: 3\n")
    with pytest.raises(InputError) as e:
        read_launch(y)
    assert ":2:" in str(e.value)
    y.write_text("- a\n- b\n")
    with pytest.raises(InputError, match="mapping"):
        read_launch(y)


def test_config_flag_merges_yaml(tmp_path):
    (tmp_path / "c.yaml").write_text("max_num_batched_tokens: 1024\n")
    s = tmp_path / "s.sh"
    s.write_text("vllm serve m --config c.yaml --max-model-len 4096\n")
    launch = read_launch(s)
    assert launch.flags["max_num_batched_tokens"] == 1024 and launch.flags["max_model_len"] == 4096


def test_binary_file_refused(tmp_path):
    p = tmp_path / "bin.sh"
    p.write_bytes(b"\x7fELF\x00\x00\x01")
    with pytest.raises(InputError, match="binary"):
        read_launch(p)


def test_lenient_mode_records_unknown_flags():
    launch = parse_flags(["--rope-scaling", '{"rope_type":"yarn"}', "--max-model-len", "1000"], version="0.33", lenient=True)
    assert launch.flags == {"max_model_len": 1000}
    assert launch.unknown and launch.unknown[0][0] == "--rope-scaling"


def test_redirections_and_background_are_not_arguments():
    launch = parse_script("nohup vllm serve m --max-model-len 4096 > /var/log/vllm.log 2>&1 &\n", path="s.sh", version=None)
    assert launch.flags == {"max_model_len": 4096}


def test_dotted_json_subkey_and_attached_short_value():
    launch = parse_flags(["--compilation-config.cudagraph_mode=PIECEWISE", "-O3"], version="0.33")
    assert launch.flags["compilation_config"]["cudagraph_mode"] == "PIECEWISE"


def test_unset_variable_in_numeric_flag_is_a_located_error():
    with pytest.raises(InputError) as e:
        parse_script("vllm serve m \\\n  --max-model-len $MAX_LEN\n", path="s.sh", version=None)
    assert "s.sh:2" in str(e.value) and "$MAX_LEN" in str(e.value)


def test_zero_max_model_len_rejected():
    with pytest.raises(InputError, match="0 is not a valid"):
        parse_flags(["--max-model-len", "0"])


def test_list_items_typed_and_yaml_negation(tmp_path):
    launch = parse_flags(["--cudagraph-capture-sizes", "1", "2", "4"], version="0.33")
    assert launch.flags["cudagraph_capture_sizes"] == [1, 2, 4]
    y = tmp_path / "c.yaml"
    y.write_text("model: m\nno-enable-prefix-caching: true\n")
    assert read_launch(y, version="0.33").flags["enable_prefix_caching"] is False


def test_a_flag_value_that_names_a_vllm_image_is_a_value_not_the_image():
    # Found by the export round-trip property test: `--tokenizer vllm/vllm-cpu` was taken for a docker
    # image, and everything before it (the model, the flags) was dropped.
    from oomguard.inputs.reader import read_command

    launch = read_command(["--model", "Qwen/Qwen3-8B", "--tokenizer", "vllm/vllm-cpu"], version="0.32.0")
    assert launch.model == "Qwen/Qwen3-8B" and launch.flags == {"tokenizer": "vllm/vllm-cpu"} and launch.image is None
    docker = read_command(["docker", "run", "--rm", "--gpus", "all", "vllm/vllm-openai:v0.11.0", "--model", "m"])
    assert docker.image == "vllm/vllm-openai:v0.11.0" and docker.model == "m"
