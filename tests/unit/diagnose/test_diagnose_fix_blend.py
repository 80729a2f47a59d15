"""Fixes that do not hang on the class being exactly right (issue 16 item 4): an uncertain verdict merges the
runner-up classes' fixes by probability, a flag the report suggests joins with its standard step, the launch's own
dtype against the GPU table, the launch's flags when nothing else applies, and each fix says why it is where it is.
Pure functions on built verdicts, and real diagnose runs on written reports with the shipped weights."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from oomguard.diagnose.classes import FailureClass as FC
from oomguard.diagnose.context import Context
from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose.events import Fix, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.fixes_blend import ALT_MIN, BLEND_BELOW, blend, suggested_fix, top_probability
from oomguard.diagnose.remedy import more_tp
from tests.conftest import run_cli


def _write(tmp_path: Path, text: str, name: str = "report.txt") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _verdict(cls: FC, confidence: float, fixes: list[str], alternatives: list[tuple[str, float]]) -> Verdict:
    v = Verdict(cls=cls, confidence=confidence, summary="")
    v.fix = [Fix(f, 1, f"{cls.value} fix") for f in fixes]
    v.alternatives = alternatives
    return v


def _build(table: dict[FC, list[str]]):  # noqa: ANN202 - a builder callback
    def build(cls, members, col, ctx):  # noqa: ANN001, ANN202
        return [Fix(f, 2, f"{cls.value} fix") for f in table.get(cls, [])]
    return build


def test_an_uncertain_class_merges_the_runner_ups_fixes_by_probability():
    v = _verdict(FC.RUNTIME_OOM, 0.4, ["--max-num-batched-tokens", "--max-num-seqs"],
                 [("startup-free-memory", 0.35), ("profile-oom", 0.05)])
    build = _build({FC.STARTUP_FREE_MEMORY: ["--gpu-memory-utilization"], FC.PROFILE_OOM: ["--enforce-eager"]})
    out = blend(v, build, [], Collector(), Context())
    # 0.40 for the top's first, 0.35 for the runner-up's first, 0.20 for the top's second; 0.05 is below ALT_MIN
    assert [f.flag for f in out] == ["--max-num-batched-tokens", "--gpu-memory-utilization", "--max-num-seqs"]
    assert out[1].why.startswith("if it is startup-free-memory (probability 0.35)")
    assert "startup-free-memory 0.35" in out[1].chosen and "runtime-oom" not in out[1].chosen
    # a fix both classes propose adds both probabilities and leads
    both = blend(_verdict(FC.RUNTIME_OOM, 0.4, ["--max-num-batched-tokens", "--gpu-memory-utilization"],
                          [("startup-free-memory", 0.35)]), build, [], Collector(), Context())
    assert both[0].flag == "--gpu-memory-utilization"


def test_a_sure_verdict_or_unlikely_runner_ups_keep_the_class_fixes():
    build = _build({FC.STARTUP_FREE_MEMORY: ["--gpu-memory-utilization"]})
    sure = _verdict(FC.RUNTIME_OOM, BLEND_BELOW, ["--max-num-batched-tokens"], [("startup-free-memory", 0.15)])
    assert blend(sure, build, [], Collector(), Context()) is sure.fix
    unlikely = _verdict(FC.RUNTIME_OOM, 0.3, ["--max-num-batched-tokens"], [("startup-free-memory", ALT_MIN / 2)])
    assert blend(unlikely, build, [], Collector(), Context()) is unlikely.fix
    # a verdict with no fix of its own takes the runner-up's
    empty = _verdict(FC.CONFIG_ERROR, 0.2, [], [("startup-free-memory", 0.15)])
    assert [f.flag for f in blend(empty, build, [], Collector(), Context())] == ["--gpu-memory-utilization"]


def test_a_words_only_verdict_is_weighed_at_its_share_not_its_display_cap():
    v = _verdict(FC.HOST_OOM, 0.5, ["--swap-space"], [("runtime-oom", 0.05), ("profile-oom", 0.03)])
    v.tier = "paraphrase"
    assert top_probability(v) >= 0.9  # the cap of 0.5 is for display; the runner-ups hold 0.08


def test_a_suggested_flag_takes_the_direction_of_its_words():
    ctx = Context(args={"gpu_memory_utilization": 0.9})
    v = _verdict(FC.RUNTIME_OOM, 0.5, [], [])
    up = suggested_fix("--gpu-memory-utilization", "try increasing gpu_memory_utilization", v, Collector(), ctx)
    down = suggested_fix("--gpu-memory-utilization", "lowering gpu_memory_utilization helped", v, Collector(), ctx)
    assert (up.value, down.value) == (0.95, 0.85)
    # no word of direction: the class's (a KV cache that is short wants more of the budget)
    kv = _verdict(FC.KV_TOO_SMALL, 0.5, [], [])
    assert suggested_fix("--gpu-memory-utilization", "set gpu_memory_utilization", kv, Collector(), ctx).value == 0.95
    assert suggested_fix("--served-model-name", "set served_model_name", v, Collector(), ctx) is None


def test_a_suggested_flag_no_builder_proposed_joins_second(tmp_path):
    text = ("It crashes with CUDA out of memory while serving long prompts after a while.\n"
            "Setting --cpu-offload-gb helped.\n")
    from oomguard.diagnose import fixes_rank

    with fixes_rank.hand_order():  # the join itself: second, after the class's first fix
        v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "runtime-oom"
    assert v.fix[1].flag == "--cpu-offload-gb" and v.fix[1].value == 4
    assert "report.txt:2" in v.fix[1].chosen
    # the ranker then puts it first: the reporter's own words say it helped (words-suggest, not a vLLM message)
    ranked = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert ranked.fix[0].flag == "--cpu-offload-gb" and "the reporter's own words suggest it" in ranked.fix[0].chosen


def test_every_fix_says_why_it_is_where_it_is_in_the_json_and_explain(tmp_path):
    text = "It crashes with CUDA out of memory while serving long prompts after a while.\n"
    path = _write(tmp_path, text)
    d = diagnose([path])
    assert d.verdicts and all(f.get("chosen") for f in d.to_dict()["verdicts"][0]["fix"])
    out = run_cli("diagnose", path, "--explain")
    assert out.returncode == 1, out.stderr
    assert "fix order: --gpu-memory-utilization" in out.stdout


def test_the_launch_dtype_against_the_gpu_table(tmp_path):
    # fp32 weights: 16-bit again (half on a card without bfloat16: the GPU table's T4)
    # placed in start-up by the engine's first line (an exception nothing places is less surely a configuration error)
    text = ("INFO 06-23 14:21:40 [core.py:1] Initializing a V1 LLM engine (v0.11.0) with config: model=facebook/opt-125m\n"
            "ValueError: The model configuration could not be loaded.\n")
    v = diagnose([_write(tmp_path, text)], launch_text="vllm serve facebook/opt-125m --dtype float32\n",
                 gpu="T4").verdicts[0]
    assert (v.fix[0].flag, v.fix[0].value) == ("--dtype", "half")
    v = diagnose([_write(tmp_path, text)], launch_text="vllm serve facebook/opt-125m --dtype float32\n",
                 gpu="A100-80GB").verdicts[0]
    assert (v.fix[0].flag, v.fix[0].value) == ("--dtype", "auto")
    # bfloat16 asked for on a T4, a report cut before vLLM's message: half precision
    v = diagnose([_write(tmp_path, text)], launch_text="vllm serve facebook/opt-125m --dtype bfloat16\n",
                 gpu="T4").verdicts[0]
    assert (v.fix[0].flag, v.fix[0].value) == ("--dtype", "half")
    # on a card with bfloat16 the launch's bfloat16 is not the dtype fix (the flag is only named as one the launch
    # sets, its value left to the reader)
    v = diagnose([_write(tmp_path, text)], launch_text="vllm serve facebook/opt-125m --dtype bfloat16\n",
                 gpu="A100-80GB").verdicts[0]
    assert ("--dtype", "half") not in [(f.flag, f.value) for f in v.fix]
    assert all("the launch sets it" in f.chosen for f in v.fix)


def test_a_tensor_parallel_step_divides_the_heads_when_the_config_is_read():
    ctx = Context(args={"tensor_parallel_size": 3})
    assert more_tp(ctx, "").value == 6  # no config read: twice the current size
    ctx.config_heads = 32  # 6 does not divide 32 heads (vLLM refuses it); 4 does
    assert more_tp(ctx, "").value == 4
    ctx.args["tensor_parallel_size"] = 2
    assert more_tp(ctx, "").value == 4


def test_the_kv_fix_the_planner_checked_passes_oomguard_check(tmp_path):
    """"What oomguard writes must pass oomguard check": the corrected launch (the first fix applied to the launch
    that failed) is checked by the real CLI on the same model and GPU."""
    log = _write(tmp_path, "ERROR 05-01 10:00:09 [core.py:700] ValueError: To serve at least one request with the "
                 "model's max seq len (131072), 18.00 GiB KV cache is needed, which is larger than the available KV "
                 "cache memory (4.20 GiB). Based on the available memory, the estimated maximum model length is "
                 "30576. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
                 "engine.\n", "vllm.log")
    command = "vllm serve Qwen/Qwen3-8B --max-model-len 131072 --gpu-memory-utilization 0.9"
    launch = _write(tmp_path, command + "\n", "launch.sh")
    out = run_cli("diagnose", log, "--launch", launch, "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--format", "json",
                  timeout=120)
    assert out.returncode == 1, out.stderr
    v = json.loads(out.stdout)["verdicts"][0]
    first = v["fix"][0]
    assert v["class"] == "kv-too-small" and first["flag"] == "--max-model-len"
    assert first["checked"].startswith("starts") and first["value"] <= 30576
    words = shlex.split(command)
    words[words.index("--max-model-len") + 1] = str(first["value"])
    fixed = _write(tmp_path, shlex.join(words) + "\n", "fixed.sh")
    chk = run_cli("check", fixed, "--gpu", "L4", "--format", "json", timeout=120)
    assert chk.returncode == 0, chk.stdout[-2000:] + chk.stderr
    assert json.loads(chk.stdout)["starts"]
