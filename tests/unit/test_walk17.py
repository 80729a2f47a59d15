"""What the issue-17 re-walk (a new user through the real CLI) still found, each fixed at its cause.

Every test runs ``python -m oomguard.cli.main`` in a subprocess on real files, as the user did.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, run_cli

LOGS = ROOT / "tests" / "fixtures" / "logs"
S2 = ROOT / "tests" / "scenarios" / "s2" / "start_api.sh"


def _cli(*argv, rc=(0, 1)):
    proc = run_cli(*map(str, argv), env={"HF_HUB_OFFLINE": "1", "COLUMNS": "200"}, timeout=180)
    assert proc.returncode in rc, (argv, proc.returncode, proc.stdout[-1500:], proc.stderr[-1500:])
    return proc


def _check_json(path, gpu: str) -> dict:
    return json.loads(_cli("check", path, "--gpu", gpu, "--format", "json").stdout)


@pytest.fixture
def s2_at(tmp_path):
    """S2's start_api.sh at utilization 0.95, written in tmp_path; ``extra`` flags go after --max-model-len 8192."""
    def write(extra: str = "") -> str:
        text = S2.read_text().replace("--gpu-memory-utilization 0.8", "--gpu-memory-utilization 0.95")
        if extra:
            text = text.replace("--max-model-len 8192", f"--max-model-len 8192 {extra}")
        path = tmp_path / "start_api.sh"
        path.write_text(text)
        return str(path)

    return write


def test_fit_lists_checks_fix_once_when_the_search_finds_it_too(s2_at):
    """S2 at utilization 0.95 on 0.10.0: check's fix (util 0.88) was fit's #1 and again its #2 (the search's
    copy wrote --max-num-batched-tokens 2048 --max-num-seqs 256, the defaults, out)."""
    script = s2_at()
    d = json.loads(_cli("fit", "--from", script, "--gpu", "RTX-3090", "--vllm-version", "0.10.0", "--format", "json").stdout)
    edits = [tuple((e["dest"], e["new"]) for e in c["edit"]) for c in d["candidates"]]
    assert edits[0] == (("gpu_memory_utilization", 0.88),), edits
    assert len(edits) == len(set(edits)), edits
    kv = [(c["flags"].get("gpu_memory_utilization"), c["plan"]["kv_cache_tokens"]) for c in d["candidates"]]
    assert len(kv) == len(set(kv)), kv


def test_fit_lenient_says_vllm_rejects_the_dropped_flag(s2_at):
    """S2 with --swap-space on 0.33 (removed in 0.18): check says vLLM rejects the command line; fit --lenient
    said "the launch as written: starts" and "#1 no edit needed" over a command that silently lost the flag."""
    script = s2_at("--swap-space 4")
    args = ("--from", script, "--gpu", "RTX-3090", "--vllm-version", "0.33.0", "--lenient", "--top", "2")
    text = _cli("fit", *args).stdout
    assert "no edit needed" not in text and "the launch as written: starts" not in text, text[:1500]
    assert "WILL NOT START: vLLM 0.33.0 rejects the command line ('unrecognized arguments: --swap-space')" in text
    assert "#1  edit: remove --swap-space 4 (" in text and "start_api.sh:7)" in text.split("#1  edit:")[1].split("\n")[0]
    d = json.loads(_cli("fit", *args, "--format", "json").stdout)
    assert d["launch"]["starts"] is False and d["launch"]["refused_flags"] == ["--swap-space"]
    assert d["launch"]["memory_plan_starts"] is True
    assert all(c["edit"][0]["flag"] == "--swap-space" and c["edit"][0]["new"] is None for c in d["candidates"])
    assert all("--swap-space" not in c["command"] for c in d["candidates"])
    assert any("--swap-space" in n for n in d["notes"])


def test_fit_lenient_carries_rope_scaling_as_hf_overrides(tmp_path):
    s3 = ROOT / "tests" / "scenarios" / "s3"
    args = ("--from", s3 / "start_api.sh", "--model", s3 / "model", "--gpu", "RTX-4090", "--vllm-version", "0.33.0",
            "--lenient", "--top", "1", "--format", "json")
    d = json.loads(_cli("fit", *args).stdout)
    edit = {e["flag"]: e for e in d["candidates"][0]["edit"]}
    assert edit["--rope-scaling"]["new"] is None and edit["--hf-overrides"]["new"]["rope_scaling"]["factor"] == 3.0
    assert not any("--rope-scaling" in n and n.endswith("not applied") for n in d["notes"]), d["notes"]


def test_check_fix_that_lowers_the_length_adds_no_yarn(tmp_path, deployment):
    """A Deployment asking 131,072 tokens of Qwen3-8B on an L4: nothing keeps the length, fix #1 lowers it to
    27,648 (within the native 40,960), and --fix also wrote OG501's YaRN --hf-overrides for 131,072."""
    deploy = deployment("""
        args: [Qwen/Qwen3-8B, --max-model-len, "131072", --gpu-memory-utilization=0.95,
               --max-num-batched-tokens, "131072"]
    """)
    proc = _cli("check", deploy, "--gpu", "L4", "--fix")
    fixed = (tmp_path / "deploy.fixed.yaml").read_text()
    assert "131072" not in fixed, fixed  # both the length and the token budget were lowered
    assert "hf-overrides" not in fixed and "rope_scaling" not in fixed, fixed
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in fixed
    again = _check_json(tmp_path / "deploy.fixed.yaml", "L4")
    assert again["starts"] is True and not [f for f in again["findings"] if f["severity"] == "error"], proc.stdout
    # when the length is kept, the YaRN override stays: the goal needs it
    keep = tmp_path / "keep.sh"
    keep.write_text("vllm serve Qwen/Qwen3-8B --max-model-len 131072\n")
    _cli("check", keep, "--gpu", "H100", "--vllm-version", "0.11.0", "--fix")
    assert "rope_scaling" in (tmp_path / "keep.fixed.sh").read_text()


def test_helm_extra_args_come_after_the_charts_prefix_caching_switch(tmp_path):
    """production-stack's deployment-vllm-multi.yaml writes --no-enable-prefix-caching (vllmConfig without
    enablePrefixCaching) before extraArgs: an --enable-prefix-caching in extraArgs wins; no vllmConfig at all
    writes neither."""
    values = tmp_path / "values.yaml"
    values.write_text("""servingEngineSpec:
  modelSpec:
    - name: pc-on
      repository: vllm/vllm-openai
      tag: v0.11.0
      modelURL: Qwen/Qwen3-8B
      requestGPU: 1
      vllmConfig:
        maxModelLen: 16384
        extraArgs: ["--enable-prefix-caching"]
    - name: pc-off
      repository: vllm/vllm-openai
      tag: v0.11.0
      modelURL: Qwen/Qwen3-8B
      requestGPU: 1
      vllmConfig:
        maxModelLen: 16384
    - name: pc-unset
      repository: vllm/vllm-openai
      tag: v0.11.0
      modelURL: Qwen/Qwen3-8B
      requestGPU: 1
""")
    d = json.loads(_cli("plan", values, "--gpu", "H100", "--format", "json").stdout)
    seen = {p["launch"]["name"]: p["launch"]["flags"].get("enable_prefix_caching", {}).get("value") for p in d["launches"]}
    assert seen == {"modelSpec pc-on": True, "modelSpec pc-off": False, "modelSpec pc-unset": None}, seen


def test_diagnose_says_once_why_the_planner_did_not_check_the_fixes():
    """A V1 log that names no GPU: the fixes used to carry no verdict and no reason (silently unchecked)."""
    proc = _cli("diagnose", LOGS / "v1-kv-too-small.log")
    assert proc.stdout.count("planner: not checked: no GPU known (pass --gpu") == 1, proc.stdout
    d = json.loads(_cli("diagnose", LOGS / "v1-kv-too-small.log", "--format", "json").stdout)
    fixes = d["verdicts"][0]["fix"]
    assert fixes and all(f["checked"].startswith("not checked: no GPU known") for f in fixes), fixes


def test_diagnose_checks_word_valued_fixes_with_the_planner():
    """--kv-cache-dtype fp8 was never planned (only numbers and switches were): now it says what it does."""
    d = json.loads(_cli("diagnose", LOGS / "v1-kv-too-small.log", "--gpu", "H100", "--model",
                        "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", "--format", "json").stdout)
    fp8 = next(f for f in d["verdicts"][0]["fix"] if f["flag"] == "--kv-cache-dtype")
    assert fp8["checked"].startswith("starts") and "KV pool" in fp8["effect"], fp8
    before, after = (int(x.split(" KV tokens")[0].split()[-1].replace(",", "")) for x in fp8["effect"].split("->")[1:])
    assert after == 2 * before  # fp8 halves the bytes per token: twice the tokens in the same pool


def test_check_fix_edits_the_env_value_a_k8s_reference_expands_from(tmp_path, deployment):
    """`- "$(MAXLEN)"` with MAXLEN in the container's env: --fix used to overwrite the reference with a literal;
    the value lives in the env entry, and that is what the fix now changes (the reference stays)."""
    deploy = deployment("""
        args: ["$(MODEL_ID)", --max-model-len, "$(MAXLEN)", --max-num-batched-tokens, "131072"]
        env:
          - name: MODEL_ID
            value: Qwen/Qwen3-8B
          - name: MAXLEN
            value: "131072"
    """)
    _cli("check", deploy, "--gpu", "L4", "--fix")
    fixed = (tmp_path / "deploy.fixed.yaml").read_text()
    assert '"$(MAXLEN)"' in fixed and '"$(MODEL_ID)"' in fixed, fixed
    import yaml

    (c,) = yaml.safe_load(fixed)["spec"]["template"]["spec"]["containers"]
    maxlen = int({e["name"]: e["value"] for e in c["env"]}["MAXLEN"])
    assert maxlen < 40960, fixed  # lowered within what the L4 holds
    again = _check_json(tmp_path / "deploy.fixed.yaml", "L4")
    assert again["plan"]["max_model_len"] == maxlen and again["starts"] is True
