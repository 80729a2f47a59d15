"""Every rule fires on a launch made to trigger it (with its severity), and its fix clears it.

The table has one row per registered rule; ``test_every_rule_has_a_case`` keeps it so.
"""

from __future__ import annotations

import pytest

from tests.unit.check.conftest import TOPO, check, finding, rules_of

YARN2 = '{"rope_scaling":{"rope_type":"yarn","factor":2.0,"original_max_position_embeddings":32768}}'
Q7 = "vllm serve Qwen/Qwen2.5-7B-Instruct"
L8 = "vllm serve meta-llama/Llama-3.1-8B-Instruct"

# rule -> (check options, command, expected severity)
CASES = {
    "OG001": (dict(gpu="A100-80GB"), "vllm serve /models/not-on-this-machine --max-model-len 8192", "warning"),
    "OG101": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 32768 --max-num-batched-tokens 32768", "warning"),
    "OG102": (dict(gpu="A100-80GB"), f"{Q7} --no-enable-chunked-prefill --max-model-len 32768 --max-num-batched-tokens 8192", "error"),
    "OG103": (dict(gpu="RTX-4090"), f"{Q7} --no-enable-chunked-prefill --max-model-len 32768", "warning"),
    "OG104": (dict(gpu="RTX-4090"), f"{Q7} --max-model-len 16384 --max-num-batched-tokens 65536", "error"),
    "OG105": (dict(gpu="A100-80GB"), f"{Q7} --max-num-batched-tokens 128 --max-num-seqs 256", "error"),
    "OG106": (dict(gpu="A100-80GB"), f"{Q7} --max-num-batched-tokens 256 --max-num-seqs 64", "info"),
    "OG201": (dict(gpu="RTX-3090"), L8, "error"),
    "OG202": (dict(gpu="RTX-4090"), f"{Q7} --max-model-len 8192 --gpu-memory-utilization 0.6", "error"),
    "OG203": (dict(gpu="A100-80GB", avg_input_len=32768), f"{Q7} --max-model-len 32768 --max-num-seqs 256", "warning"),
    "OG204": (dict(gpu="RTX-4090"), f"{Q7} --max-model-len 8192 --kv-cache-memory-bytes 20G", "error"),
    "OG205": (dict(gpu="MI300X"), f"{L8} --num-gpu-blocks-override 2048 --max-model-len 34048", "error"),
    "OG206": (dict(gpu="H200", num_gpus=2), "vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 2 --max-model-len 4096 --max-num-seqs 1024 --gpu-memory-utilization 0.6", "error"),
    "OG207": (dict(gpu="RTX-3090"), f"{L8} --max-model-len 40960", "info"),
    "OG301": (dict(gpu="A100-80GB", other_gpu_use_gib=20), f"{Q7} --max-model-len 8192 --gpu-memory-utilization 0.9", "error"),
    "OG302": (dict(gpu="A100-80GB", other_gpu_use_gib=4), f"{Q7} --max-model-len 8192 --gpu-memory-utilization 0.9", "warning"),
    "OG303": (dict(gpu="A100-80GB", version="0.15"), f"{Q7} --max-model-len 8192 --gpu-memory-utilization 0.99", "error"),
    "OG304": (dict(gpu="A100-80GB"), "vllm serve meta-llama/Meta-Llama-3.1-70B --max-model-len 8192", "error"),
    "OG305": (dict(gpu="RTX-3090"), f"{Q7} --max-model-len 8192 --max-num-batched-tokens 16384 --max-num-seqs 16384", "error"),
    "OG306": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --gpu-memory-utilization 0.99", "warning"),
    "OG307": (dict(gpu="H100", num_gpus=4), "vllm serve Qwen/Qwen3-235B-A22B-FP8 -tp 4 --max-model-len 32768 --gpu-memory-utilization 0.9", "info"),
    "OG401": (dict(gpu="A100-80GB", host_ram_gib=64), f"{Q7} --max-model-len 8192 --kv-offloading-size 64", "error"),
    "OG402": (dict(gpu="A100-80GB", num_gpus=2), f"{Q7} --max-model-len 8192 -tp 2 --kv-offloading-size 64", "info"),
    "OG403": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --cpu-offload-gb 10", "warning"),
    "OG404": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --kv-offloading-backend lmcache --kv-offloading-size 64", "warning"),
    "OG405": (dict(gpu="A100-80GB", host_ram_gib=512), f"{Q7} --max-model-len 8192 --kv-offloading-size 64", "info"),
    "OG406": (dict(gpu="A100-80GB", version="0.13.0"), f"{Q7} --max-model-len 8192 --kv-offloading-size 64", "error"),
    "OG501": (dict(gpu="A100-80GB"), "vllm serve Qwen/Qwen3-8B --max-model-len 131072", "error"),
    "OG502": (dict(gpu="A100-80GB"), f"vllm serve Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides '{YARN2}'", "warning"),
    "OG503": (dict(gpu="A100-80GB", avg_input_len=2000), f"vllm serve Qwen/Qwen3-8B --max-model-len 65536 --hf-overrides '{YARN2}'", "warning"),
    "OG504": (dict(gpu="A100-80GB"), f"vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 65536 --hf-overrides '{YARN2}'", "warning"),
    "OG505": (dict(gpu="A100-80GB"), f"{L8} --max-model-len 65536 --hf-overrides '{YARN2}'", "warning"),
    "OG601": (dict(gpu="A100-80GB"), f"{Q7} --max-modle-len 8192", "error"),
    "OG602": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --swap-space 4", "error"),
    "OG603": (dict(gpu="A100-80GB", version="0.10.2"), f"{Q7} --max-model-len 8192 --kv-offloading-size 8", "error"),
    "OG604": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --kv-cache-memory 8G", "warning"),
    "OG605": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --max-num 64", "error"),
    "OG606": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --disable-cascade-attn", "warning"),
    "OG607": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --gpu-memory-utilization 1.5", "error"),
    "OG608": (dict(gpu="A100-80GB"), f'{Q7} --max-model-len 8192 --speculative-config {{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}}', "error"),
    "OG609": (dict(gpu="A100-80GB"), None, "error"),  # YAML: see test_yaml_key_not_a_flag
    "OG610": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --max-model-len 16384", "warning"),
    "OG611": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len $MAX_LEN", "warning"),
    "OG612": (dict(gpu="A100-80GB"), f"{Q7} 8192 --max-model-len 8192", "error"),
    "OG613": (dict(gpu="A100-80GB"), f"VLLM_ALLOW_LONG_MAX_MODEL_LENGTH=1 {Q7} --max-model-len 8192", "warning"),
    "OG614": (dict(gpu="A100-80GB", version="0.6.6.post1"), "python -m vllm.entrypoints.api_server --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --api-key k", "error"),
    "OG615": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --enforce-eager --compilation-config '{{\"cudagraph_mode\":\"PIECEWISE\"}}'", "warning"),
    "OG616": (dict(gpu="A100-80GB", version="0.20"), f"{Q7} --max-model-len 8192 --max-num-partial-prefills 4", "error"),
    "OG701": (dict(gpu="A100-80GB", num_gpus=4), f"{L8} --max-model-len 8192 -tp 3", "error"),
    "OG702": (dict(gpu="A100-80GB"), f"CUDA_VISIBLE_DEVICES=0,1 {L8} --max-model-len 8192 -tp 4", "error"),
    "OG703": (dict(gpu="A100-80GB", num_gpus=2), f"VLLM_PP_LAYER_PARTITION=8,24 {L8} --max-model-len 8192 --pipeline-parallel-size 2", "warning"),
    "OG704": (dict(gpu="RTX-4090", topo=str(TOPO / "rtx4090_4x_two_sockets.txt")), f"{Q7} --max-model-len 8192 -tp 4", "warning"),
    "OG705": (dict(gpu="A100-80GB", num_gpus=16), f"{L8} --max-model-len 8192 -tp 16", "info"),
    "OG706": (dict(gpu="A100-80GB"), f"{L8} --max-model-len 8192 --enable-expert-parallel", "warning"),
    "OG801": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --speculative-config '{{\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_max\":4}}'", "info"),
    "OG802": (dict(gpu="A100-80GB"), f"{L8} --max-model-len 8192 --speculative-config '{{\"method\":\"mtp\",\"num_speculative_tokens\":1}}'", "error"),
    "OG803": (dict(gpu="A100-80GB"), "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 8192 --limit-mm-per-prompt '{\"image\":16,\"video\":4}'", "info"),
    "OG804": (dict(gpu="A100-80GB"), "vllm serve Qwen/Qwen3-32B-FP8 --max-model-len 8192", "info"),
    "OG805": (dict(gpu="H100"), "vllm serve nvidia/Qwen3.6-35B-A3B-NVFP4 --max-model-len 8192", "warning"),
    "OG806": (dict(gpu="T4"), "vllm serve Qwen/Qwen2.5-1.5B-Instruct --max-model-len 8192 --dtype bfloat16", "error"),
    "OG807": (dict(gpu="A100-80GB"), "vllm serve Qwen/Qwen2-VL-2B-Instruct-AWQ --max-model-len 8192 --quantization gptq", "error"),
    "OG808": (dict(gpu="A100-80GB", version="0.6.3"), "vllm serve meta-llama/Llama-3.2-11B-Vision-Instruct --max-model-len 1024", "error"),
    "OG901": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --enable-prefix-caching", "info"),
    "OG902": (dict(gpu="A100-80GB"), f"{Q7} --max-model-len 8192 --enforce-eager", "info"),
    "OG903": (dict(gpu="H200"), "vllm serve Qwen/Qwen3-Coder-30B-A3B-Instruct --max-model-len 262144", "info"),
    "OG904": (dict(gpu="H100"), L8, "info"),
}


def test_every_rule_has_a_case():
    from oomguard.check.registry import all_rules

    assert {r.id for r in all_rules()} == set(CASES)


@pytest.mark.parametrize("rule_id", [k for k, v in CASES.items() if v[1] is not None])
def test_rule_fires(rule_id):
    options, command, severity = CASES[rule_id]
    rep = check(command, **options)
    f = finding(rep, rule_id)
    assert f.severity.value == severity, f.message
    assert f.message and f.title and f.name
    if severity in ("error", "warning") and f.fix:
        # the corrected launch no longer has this error and passes the check
        assert rep.fix is not None and rep.fix.changed
        assert rep.fix.remaining == [], [x.rule for x in rep.fix.remaining]
        assert rule_id not in {x.rule for x in rep.fix.remaining}


def test_yaml_key_not_a_flag(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("model: Qwen/Qwen3-8B\nmax_num_seqss: 64\nswap_space: 4\n")
    rep = check(path=p, gpu="A100-80GB")
    hits = [f for f in rep.findings if f.rule == "OG609"]
    assert {f.flags[0] for f in hits} == {"max_num_seqss", "swap_space"}
    swap = next(f for f in hits if f.flags[0] == "swap_space")
    assert "removed in 0.18.0" in swap.message
    typo = next(f for f in hits if f.flags[0] == "max_num_seqss")
    assert [e.to_dict() for e in typo.fix][-1] == {"flag": "--max-num-seqs", "value": 64}
    assert rep.fix.text == "model: Qwen/Qwen3-8B\nmax_num_seqs: 64\n"


def test_og101_numbers_before_and_after():
    rep = check(f"{L8} --max-model-len 131072 --max-num-batched-tokens 131072", gpu="A100-80GB")
    f = finding(rep, "OG101")
    n = f.numbers
    assert n["suggested_max_num_batched_tokens"] in (8192, 4096, 2048, 1024, 512, 256)
    assert n["activation_peak_gib_after"] < n["activation_peak_gib_before"] / 4
    assert [e.to_dict() for e in f.fix] == [{"flag": "--max-num-batched-tokens", "value": n["suggested_max_num_batched_tokens"]}]


def test_og201_gives_largest_fitting_len_and_alternatives():
    rep = check(L8, gpu="RTX-3090")
    f = finding(rep, "OG201")
    plan = rep.ctx.plan
    assert f.numbers["max_fitting_len"] == plan.max_fitting_len
    assert f.numbers["suggested_max_model_len"] <= plan.max_fitting_len
    assert f.numbers["suggested_max_model_len"] % 1024 == 0
    assert "--kv-cache-dtype fp8" not in f.message  # 8 GiB of fp8 KV does not fit either
    assert rep.fix.starts is True
    f = finding(check(f"{L8} --max-model-len 65536", gpu="RTX-3090"), "OG201")
    assert "--kv-cache-dtype fp8 halves the KV bytes and keeps 65,536 tokens" in f.message


def test_og203_concurrency_vs_capacity():
    rep = check(f"{Q7} --max-model-len 32768 --max-num-seqs 256", gpu="A100-80GB", avg_input_len=32768, concurrency=100)
    hits = [f for f in rep.findings if f.rule == "OG203"]
    assert len(hits) == 2  # concurrency × ISL > capacity, and max-num-seqs never reached
    tokens = rep.ctx.plan.kv_cache_tokens
    seqs = next(f for f in hits if f.fix).fix[0].value
    assert seqs == tokens // 32768


def test_og203_needs_avg_input_len():
    assert "OG203" not in rules_of(check(f"{Q7} --max-model-len 32768 --max-num-seqs 256", gpu="A100-80GB"))


def test_og302_from_nvidia_smi(tmp_path):
    smi = tmp_path / "smi.txt"
    smi.write_text(
        "timestamp, index, name, memory.used [MiB], memory.total [MiB]\n"
        "2025/01/01 10:00:00.000, 0, NVIDIA A100-SXM4-80GB, 6144 MiB, 81920 MiB\n"
    )
    rep = check(f"{Q7} --max-model-len 8192 --gpu-memory-utilization 0.9", nvidia_smi=str(smi))
    f = finding(rep, "OG302")
    assert rep.ctx.gpu.name.startswith("A100")  # the GPU came from the nvidia-smi output
    assert f.numbers["other_gpu_use_gib"] == 6.0
    assert f.fix[0].value in (0.85, 0.8)


def test_og401_auto_reads_meminfo(tmp_path, monkeypatch):
    from oomguard.check.context import CheckOptions
    from oomguard.check.report import check_target

    mem = tmp_path / "meminfo"
    mem.write_text("MemTotal:       67108864 kB\nMemAvailable:   33554432 kB\n")
    opts = CheckOptions(gpu="A100-80GB", host_ram_gib="auto", meminfo_path=str(mem))
    rep = check_target(opts, command=[f"{Q7} --max-model-len 8192 --kv-offloading-size 64"])
    f = finding(rep, "OG401")
    assert f.severity.value == "error" and f.numbers["host_ram_gib"] == 32.0
    assert f.fix and f.fix[0].dest == "kv_offloading_size" and f.fix[0].value < 64


def test_og401_unknown_host_ram_is_info():
    f = finding(check(f"{Q7} --max-model-len 8192 --kv-offloading-size 64", gpu="A100-80GB"), "OG401")
    assert f.severity.value == "info" and "--host-ram-gib" in f.message


def test_og602_rope_scaling_becomes_hf_overrides():
    rep = check("vllm serve Qwen/Qwen3-8B --max-model-len 65536 --rope-scaling '{\"rope_type\":\"yarn\",\"factor\":2.0,\"original_max_position_embeddings\":32768}'", gpu="A100-80GB")
    f = finding(rep, "OG602")
    assert [e.flag for e in f.fix] == ["--rope-scaling", "--hf-overrides"]
    assert f.fix[1].value == {"rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32768}}
    assert "--hf-overrides '{\"rope_scaling\"" in rep.fix.text and "--rope-scaling" not in rep.fix.text


def test_og604_keeps_value_as_written():
    rep = check(f"{Q7} --max-model-len 8192 --kv-cache-memory 8G", gpu="A100-80GB")
    assert rep.fix.text.endswith("--kv-cache-memory-bytes 8G")


def test_og701_picks_a_valid_tp():
    f = finding(check(f"{L8} --max-model-len 8192 -tp 3", gpu="A100-80GB", num_gpus=4), "OG701")
    assert f.fix[0].value == 2


def test_og702_widens_cuda_visible_devices_when_gpus_exist(tmp_path):
    smi = tmp_path / "smi.csv"
    smi.write_text("index, name, memory.used [MiB], memory.total [MiB]\n" + "".join(f"{i}, NVIDIA A100-SXM4-80GB, 0 MiB, 81920 MiB\n" for i in range(4)))
    rep = check(f"CUDA_VISIBLE_DEVICES=0,1 {L8} --max-model-len 8192 -tp 4", nvidia_smi=str(smi))
    f = finding(rep, "OG702")
    assert f.fix[0].to_dict() == {"flag": "CUDA_VISIBLE_DEVICES", "value": "0,1,2,3"}
    assert rep.fix.text.startswith("CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve")


def test_og703_rebalances_pipeline_stages():
    f = finding(check(f"VLLM_PP_LAYER_PARTITION=8,24 {L8} --max-model-len 8192 --pipeline-parallel-size 2", gpu="A100-80GB", num_gpus=2), "OG703")
    parts = [int(x) for x in f.fix[0].value.split(",")]
    assert sum(parts) == 32 and parts[1] < 24


def test_og704_suggests_two_tp2_instances():
    f = finding(check(f"{Q7} --max-model-len 8192 -tp 4", gpu="RTX-4090", topo=str(TOPO / "rtx4090_4x_two_sockets.txt")), "OG704")
    assert "numactl --cpunodebind=0" in f.message and "--tensor-parallel-size 2" in f.message
    assert f.fix == []


def test_og704_quiet_on_nvlink():
    rep = check(f"{Q7} --max-model-len 8192 -tp 8", gpu="A100-80GB", topo=str(TOPO / "dgx_a100_8x_nv12.txt"))
    assert "OG704" not in rules_of(rep)


def test_og804_error_below_ampere():
    f = finding(check("vllm serve Qwen/Qwen3-8B --max-model-len 8192 --quantization fp8 --dtype half", gpu="V100-32GB"), "OG804")
    assert f.severity.value == "error" and f.fix[0].value is None


def test_og806_auto_dtype_is_info():
    f = finding(check("vllm serve Qwen/Qwen3-0.6B --max-model-len 8192", gpu="T4"), "OG806")
    assert f.severity.value == "info"


def test_rules_skip_without_gpu():
    rep = check(f"{Q7} --max-model-len 8192 --swap-space 4")
    assert "OG602" in rules_of(rep)  # flag rules need no GPU
    assert "OG201" in rep.result.skipped and "--gpu" in rep.result.skipped["OG201"]


def test_unknown_model_path_runs_flag_rules_only():
    rep = check("vllm serve /no/such/model --swap-space 4", gpu="A100-80GB")
    assert rules_of(rep) == {"OG602", "OG001"}  # and says which rules did not run
    assert "model config not found" in rep.result.skipped["OG201"]
