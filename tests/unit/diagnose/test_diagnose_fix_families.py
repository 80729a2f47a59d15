"""The configuration families' standard fixes (issue 16 item 4): chosen from the error's words, frames and the GPU,
spelled as vLLM's flags (every flag the fix builders write is one oomguard.versions knows), and each one, applied to a
launch, passes ``oomguard check`` at a release that has it. Real diagnose runs on written reports, the real CLI."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest

from oomguard.diagnose import fixes, fixes_blend, fixes_config, fixes_env, fixes_memory, fixes_rank, remedy
from oomguard.diagnose.classes import FailureClass as FC
from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Evidence, FixValue, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.flags import versions_with_flag
from tests.conftest import top_verdict

ENGINE = ("(EngineCore_DP0 pid=7) INFO 05-01 10:00:00 [core.py:70] Initializing a V1 LLM engine (v0.10.1) with config: "
          "model='Qwen/Qwen2.5-7B-Instruct'\n")


_top = top_verdict


def test_a_dtype_mismatch_in_the_forward_is_fixed_with_the_checkpoints_own_dtype(tmp_path):
    text = (ENGINE + "(EngineCore_DP0 pid=7) ERROR 05-01 10:00:09 [core.py:700] EngineCore failed to start.\n"
            "(EngineCore_DP0 pid=7) ERROR 05-01 10:00:09 [core.py:700] RuntimeError: expected scalar type Half but "
            "found BFloat16\n")
    v = _top(tmp_path, text, launch_text="vllm serve Qwen/Qwen2.5-7B-Instruct --dtype half\n")
    assert v.cls in (FC.CONFIG_ERROR, FC.UNKNOWN), v.cls
    assert (v.fix[0].flag, v.fix[0].value) == ("--dtype", "auto"), [(f.flag, f.value) for f in v.fix]


def test_a_dtype_mismatch_read_as_a_rejected_configuration_is_not_a_gpu_without_bf16():
    # the rejected-configuration fix: "found BFloat16" is torch's dtype mismatch (the family's --dtype auto), not a GPU
    # without bfloat16 (--dtype half), whichever of config-error / unknown the weights give the report above
    assert re.search(fixes_config.DTYPE_MISMATCH, "RuntimeError: expected scalar type Half but found BFloat16", re.I)
    assert not re.search(fixes_config.DTYPE_MISMATCH, "Bfloat16 is only supported on GPUs with compute capability of "
                         "at least 8.0", re.I)


def test_an_error_in_a_tool_call_parser_names_the_parser_flag(tmp_path):
    text = ("(APIServer pid=85) ERROR 10-09 09:39:54 [hermes_tool_parser.py:157] Error in extracting tool call from "
            "response.\n"
            "(APIServer pid=85) ERROR 10-09 09:39:54 [hermes_tool_parser.py:157] Traceback (most recent call last):\n"
            '(APIServer pid=85) ERROR 10-09 09:39:54 [hermes_tool_parser.py:157]   File "/opt/vllm/entrypoints/openai/'
            'tool_parsers/hermes_tool_parser.py", line 134, in extract_tool_calls\n'
            "(APIServer pid=85) ERROR 10-09 09:39:54 [hermes_tool_parser.py:157] json.decoder.JSONDecodeError: "
            "Extra data: line 1 column 5 (char 4)\n")
    v = _top(tmp_path, text, launch_text="vllm serve Qwen/Qwen3-Coder-30B-A3B-Instruct --enable-auto-tool-choice "
                                         "--tool-call-parser hermes\n")
    assert "--tool-call-parser" in [f.flag for f in v.fix[:2]], (v.cls, [(f.flag, f.value) for f in v.fix])


def _written_flags() -> set[str]:
    """Every "--flag" string literal the fix builders can write (the first word of it)."""
    out: set[str] = set()
    for module in (fixes, fixes_blend, fixes_config, fixes_env, fixes_memory, remedy):
        for node in ast.walk(ast.parse(Path(module.__file__).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Fix" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                flag = node.args[0].value
                if flag.startswith("--"):
                    out.add(flag)
    for family in fixes_config._FAMILIES:
        out.add(family[4])
    return out


def test_every_flag_a_fix_builder_writes_is_one_the_versions_tables_know():
    flags = _written_flags()
    assert len(flags) > 25, flags  # the scan found the builders' literals
    unknown = sorted(f for f in flags if versions_with_flag(f) is None)
    assert not unknown, f"fix flags no vLLM release in oomguard.versions accepts: {unknown}"


def _family_fixes() -> list:
    """Every family's fix, from one verdict per class whose lines name every family's words."""
    words = ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0; custom_all_reduce failed; "
             "set trust_remote_code; expected scalar type Half but found BFloat16; hermes_tool_parser.py; "
             "tokenizer_mode mistral; mamba state blocks; Too large swap space; data parallel is not supported; "
             "attention heads must be divisible by tensor parallel size; cudagraph capture; VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    ctx = Context(args={"max_num_seqs": 256, "data_parallel_size": 2})
    ctx.config_max_len, ctx.config_heads = 32768, 14  # what a readable config gives (Qwen2.5-0.5B-Instruct's)
    out = {}
    for cls in (FC.CONFIG_ERROR, FC.UNKNOWN, FC.ILLEGAL_MEMORY_ACCESS, FC.HOST_OOM):
        v = Verdict(cls=cls, confidence=0.5, summary="", evidence=[Evidence("r.log", 1, words)])
        for f in fixes_config.family_fixes(v, [], Collector(), ctx):
            out.setdefault((f.flag, str(f.value)), f)
    for f in fixes_env._hang_fixes(Collector()):  # a collective's hang: the two launch changes (no family words)
        out.setdefault((f.flag, str(f.value)), f)
    return list(out.values())


def test_every_family_names_its_fix():
    flags = {f.flag for f in _family_fixes()}
    assert {family[4] for family in fixes_config._FAMILIES} <= flags, flags


@pytest.mark.parametrize("fix", _family_fixes(), ids=lambda f: f"{f.flag}={f.value}")
def test_every_family_fix_applied_to_a_launch_passes_oomguard_check(fix, tmp_path, capsys):
    from oomguard.cli.main import main
    from oomguard.versions import option_history

    value = fix.value
    if isinstance(value, FixValue) or isinstance(value, str) and value.startswith("<"):
        value = {"--tool-call-parser": "hermes", "--tensor-parallel-size": 2}.get(fix.flag, value)
    words = ["vllm", "serve", "Qwen/Qwen2.5-0.5B-Instruct", fix.flag]
    if value is not True:
        words.append(str(value))
    if fix.flag == "--tool-call-parser":
        words.append("--enable-auto-tool-choice")
    launch = tmp_path / "launch.sh"
    launch.write_text(shlex.join(words) + "\n", encoding="utf-8")
    release = option_history(fix.flag).last  # the newest release that has the flag (--swap-space: a V0 one)
    gpus = "2" if fix.flag == "--tensor-parallel-size" else "1"
    rc = main(["check", str(launch), "--gpu", "L4", "--num-gpus", gpus, "--vllm-version", release,
               "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    errors = [x["message"] for x in data["findings"] if x.get("severity") == "error"]
    assert rc == 0 and data["starts"] and not errors, (shlex.join(words), release, errors)


NCCL_HANG = ("(VllmWorker rank=1 pid=12) [E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation "
             "timeout: WorkNCCL(SeqNum=20518, OpType=ALLREDUCE, NumelIn=106496, NumelOut=106496, "
             "Timeout(ms)=1800000) ran for 1800270 milliseconds before timing out.\n")


def test_a_collective_that_hangs_offers_the_two_launch_changes_not_only_a_debug_step(tmp_path):
    v = _top(tmp_path, ENGINE + NCCL_HANG, launch_text="vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2\n")
    assert v.cls == FC.NCCL_ERROR, v.cls
    flags = [f.flag for f in v.fix]
    assert {"--disable-custom-all-reduce", "--enforce-eager"} <= set(flags), flags


def test_a_hang_the_report_ties_to_cuda_graphs_puts_eager_mode_before_the_custom_all_reduce():
    col = Collector()
    col.cues["words:capture"] = None  # type: ignore[assignment] - only the key is read
    assert [f.flag for f in fixes_env._hang_fixes(col)] == ["--enforce-eager", "--disable-custom-all-reduce"]
    assert [f.flag for f in fixes_env._hang_fixes(Collector())] == ["--disable-custom-all-reduce", "--enforce-eager"]


def test_a_hang_in_graph_capture_gets_eager_mode_as_the_first_fix(tmp_path):
    text = (ENGINE + NCCL_HANG + "It hangs only with CUDA graphs enabled; the collective runs inside the captured "
            "graph.\n")
    with fixes_rank.hand_order():
        v = _top(tmp_path, text, launch_text="vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2\n")
    assert v.cls == FC.NCCL_ERROR, v.cls
    assert v.fix[0].flag == "--enforce-eager", [f.flag for f in v.fix]
