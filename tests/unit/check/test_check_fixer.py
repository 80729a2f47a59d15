"""The corrected launch keeps its form (script, YAML, command) and passes the check itself."""

from __future__ import annotations

import shutil

from tests.unit.check.conftest import FIXTURES, check, rules_of


def _recheck(report, **options):
    """Check the corrected text as a fresh launch of the same form."""
    from oomguard.check.context import CheckOptions
    from oomguard.check.report import check_read, reread

    read = reread(report.ctx.launch, report.fix.text, options.get("version"))
    return check_read(read, CheckOptions(**options))


def test_script_keeps_comments_continuations_and_redirections():
    rep = check(path=FIXTURES / "long_context.sh", gpu="A100-80GB")
    text = rep.fix.text
    original = (FIXTURES / "long_context.sh").read_text()
    # everything outside the vLLM command is untouched
    head = original.split('vllm serve "$MODEL"')[0]
    assert text.startswith(head)
    assert "MODEL=meta-llama/Llama-3.1-8B-Instruct   # served as \"chat\"" in text
    assert text.rstrip().endswith("--port 8000 2>&1 | tee vllm.log")
    # the fixes
    assert "--swap-space" not in text
    assert "--max-num-batched-tokens 8192 \\\n" in text
    assert "--kv-cache-memory-bytes 20G \\\n" in text
    assert "--speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_max\":4}' \\\n" in text
    # every continuation line of the command still ends in a backslash
    cmd = text.split('vllm serve "$MODEL"')[1].split("\n")
    assert all(line.endswith(" \\") for line in ['vllm serve "$MODEL"' + cmd[0]] + cmd[1:-2])
    again = _recheck(rep, gpu="A100-80GB")
    assert again.errors == [] and again.ctx.plan.starts


def test_removing_the_last_flag_drops_the_dangling_backslash(tmp_path):
    p = tmp_path / "run.sh"
    p.write_text("vllm serve Qwen/Qwen2.5-7B-Instruct \\\n  --max-model-len 8192 \\\n  --swap-space 4\necho started\n")
    rep = check(path=p, gpu="A100-80GB")
    assert rep.fix.text == "vllm serve Qwen/Qwen2.5-7B-Instruct \\\n  --max-model-len 8192\necho started\n"


def test_new_flags_follow_the_continuation_style(tmp_path):
    p = tmp_path / "run.sh"
    p.write_text("#!/bin/bash\nvllm serve meta-llama/Llama-3.1-8B-Instruct \\\n    --gpu-memory-utilization 0.9\n")
    rep = check(path=p, gpu="RTX-3090")  # default 131072 context does not fit: adds --max-model-len
    assert rep.fix.text.startswith("#!/bin/bash\nvllm serve meta-llama/Llama-3.1-8B-Instruct \\\n    --gpu-memory-utilization 0.9 \\\n    --max-model-len ")
    one_line = tmp_path / "one.sh"
    one_line.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000 &\nwait\n")
    rep = check(path=one_line, gpu="RTX-3090")
    assert rep.fix.text.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000 --max-model-len ")
    assert rep.fix.text.endswith(" &\nwait\n")


def test_environment_fix_is_exported_before_the_command(tmp_path):
    p = tmp_path / "run.sh"
    p.write_text("#!/bin/bash\n# long context\nvllm serve Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides '{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":32768}}'\n")
    rep = check(path=p, gpu="A100-80GB")
    assert "OG501" in rules_of(rep, "error")
    assert rep.fix.text.startswith("#!/bin/bash\n# long context\nexport VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\nvllm serve")
    assert _recheck(rep, gpu="A100-80GB").errors == []


def test_existing_assignment_is_rewritten_not_duplicated(tmp_path):
    p = tmp_path / "run.sh"
    p.write_text("export VLLM_ALLOW_LONG_MAX_MODEL_LEN=0\nvllm serve Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides '{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":32768}}'\n")
    rep = check(path=p, gpu="A100-80GB")
    assert rep.fix.text.startswith("export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\nvllm serve")
    assert rep.fix.text.count("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == 1


def test_yaml_keeps_comments_and_key_style():
    rep = check(path=FIXTURES / "chat.yaml", gpu="A100-80GB")
    text = rep.fix.text
    # "we need long prompts": the length is kept with the model's own YaRN recipe, not cut to 40,960
    assert "# vLLM config for the chat service (vllm serve --config chat.yaml)\nmodel: Qwen/Qwen3-8B\n" in text
    assert "max_model_len: 131072   # we need long prompts\n" in text
    assert '"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768' in text
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in text.splitlines()[0]  # YAML cannot set it: said on top
    assert "max_num_batched_tokens: 8192\n" in text
    assert "swap_space" not in text
    assert "max_num_seqs: 64\n" in text  # the abbreviation spelled out
    assert "speculative_config:\n  method: ngram\n" in text  # untouched block
    again = _recheck(rep, gpu="A100-80GB")
    # what is left is the variable the YAML cannot set (the comment on top says to export it)
    assert [(f.rule, [e.flag for e in f.fix]) for f in again.errors] == [("OG501", ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"])]
    assert again.warnings == []


def test_yaml_cannot_set_environment_variables(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("model: Qwen/Qwen3-8B\nmax_model_len: 131072\nhf_overrides: '{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":32768}}'\n")
    rep = check(path=p, gpu="A100-80GB")
    assert rep.fix.text.startswith("# oomguard: a YAML config cannot set environment variables: run `export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`")
    assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN" in n for n in rep.fix.notes)


def test_command_is_requoted():
    rep = check('vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --swap-space 4 --speculative-config {"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":3}', gpu="A100-80GB")
    assert rep.fixed_text == "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":2,\"prompt_lookup_max\":3}'"


def test_rename_in_place_and_duplicates_collapse():
    rep = check("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --kv-cache-memory 8G --max-model-len 16384", gpu="A100-80GB")
    assert rep.fixed_text == "vllm serve Qwen/Qwen2.5-7B-Instruct --kv-cache-memory-bytes 8G --max-model-len 16384"


def test_info_fixes_are_not_applied():
    rep = check("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --max-num-batched-tokens 256 --max-num-seqs 64", gpu="A100-80GB")
    assert "OG106" in rules_of(rep, "info")
    assert rep.fixed_text is None


def test_goal_fix_keeps_the_length_in_one_round():
    # chunking to 8192 alone would leave the 1M request just short of the pool (OG201 would then
    # lower max-model-len); the ranked goal fix picks an edit that keeps 1,048,576 and starts
    model = FIXTURES / "models" / "qwen2-7b-1m"
    rep = check(f"vllm serve {model} --max-model-len 1048576 --max-num-batched-tokens 1048576 --gpu-memory-utilization 0.9", gpu="A100-80GB")
    assert rules_of(rep, "error") == {"OG101"}  # the profile run fails first
    assert rep.goal_fixes and rep.goal_fixes[0].keeps_goal
    assert "--max-model-len 1048576" in rep.fix.text
    assert rep.fix.followups == [] and rep.fix.remaining == [] and rep.fix.starts


def test_followups_are_reported():
    # a launch that starts: the --fix rounds still chain (removing a flag reveals the next problem)
    rep = check("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --swap-space 4 --max-num-batched-tokens 128 --max-num-seqs 256", gpu="A100-80GB")
    assert rep.fix.remaining == [] and rep.fix.starts


def test_fix_cli_writes_next_to_the_input(tmp_path, capsys):
    from oomguard.cli.main import main

    src = tmp_path / "start_api.sh"
    shutil.copy(FIXTURES / "long_context.sh", src)
    src.chmod(0o755)
    before = src.read_text()
    rc = main(["check", str(src), "--gpu", "A100-80GB", "--fix"])
    assert rc == 1
    out = tmp_path / "start_api.fixed.sh"
    assert out.exists() and src.read_text() == before  # never overwrites the input
    assert out.stat().st_mode & 0o777 == 0o755
    assert "--swap-space" not in out.read_text()
    rc = main(["check", str(out), "--gpu", "A100-80GB"])
    assert rc == 0  # the corrected launch passes
    rc = main(["check", str(src), "--gpu", "A100-80GB", "--fix", "--in-place"])
    assert src.read_text() == out.read_text()
    capsys.readouterr()
