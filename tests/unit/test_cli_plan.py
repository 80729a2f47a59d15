"""``oomguard plan`` exit codes, JSON, and one-line errors for bad input."""

import json

import pytest

from tests.conftest import run_cli


def test_plan_json_starts():
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-model-len", "32768", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["starts"] and d["max_model_len"] == 32768 and d["per_gpu"]["weights_gib"] > 14


def test_plan_command_after_dashes():
    p = run_cli("plan", "--gpu", "H100", "--json", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len=8192", "--enforce-eager")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["max_model_len"] == 8192 and d["per_gpu"]["cuda_graph_gib"] == 0


def test_plan_text_output():
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-model-len", "32768")
    assert p.returncode == 0
    assert "KV cache pool" in p.stdout and "GPU KV cache size:" in p.stdout and "STARTS" in p.stdout


def test_plan_text_of_a_launch_that_fails_before_its_first_memory_line():
    # a bf16 8B model on a 15 GiB T4: served as fp16, weights do not fit; vLLM logs none of its memory lines
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "T4")
    assert p.returncode == 1, p.stderr
    assert "WILL NOT START (weights-oom)" in p.stdout and "served as float16" in p.stdout
    assert "vLLM will log:" not in p.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--model", "Qwen/Qwen3-8B", "--gpu", "H1000"], "unknown GPU"),
        (["--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-num-seqs", "-4"], "negative"),
        (["--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-model-len", "lots"], "not an integer"),
        (["--model", "nope/none-such", "--gpu", "A100-80GB"], "not found"),
    ],
)
def test_bad_input_exit_2_one_line(args, needle):
    p = run_cli("plan", *args, env={"HF_HUB_OFFLINE": "1"})
    assert p.returncode == 2
    assert needle in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_unterminated_quote_script(tmp_path):
    s = tmp_path / "start.sh"
    s.write_text("vllm serve Qwen/Qwen3-8B \\\n  --served-model-name 'oops\n")
    p = run_cli("plan", str(s), "--gpu", "A100-80GB")
    assert p.returncode == 2 and f"{s}:2" in p.stderr and "Traceback" not in p.stderr


def test_malformed_config_json(tmp_path):
    (tmp_path / "config.json").write_text("{ not json")
    p = run_cli("plan", "--model", str(tmp_path / "config.json"), "--gpu", "A100-80GB")
    assert p.returncode == 2 and "malformed JSON" in p.stderr


def test_two_gb_binary_as_config(tmp_path):
    big = tmp_path / "model.bin"
    with open(big, "wb") as fh:
        fh.truncate(2 * 1024**3)
    p = run_cli("plan", "--model", str(big), "--gpu", "A100-80GB")
    assert p.returncode == 2 and "not a config file" in p.stderr


def test_help_is_fast_and_lists_commands():
    p = run_cli("--help")
    assert p.returncode == 0 and "plan" in p.stdout
