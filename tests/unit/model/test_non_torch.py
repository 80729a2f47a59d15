"""Non-torch memory and the CUDA context: charged as each release's profiling path does."""

import pytest

from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.engine import resolve
from oomguard.model.non_torch import (
    CUDA_CONTEXT_BYTES,
    Topology,
    accounting,
    custom_all_reduce_bytes,
    custom_all_reduce_enabled,
    non_torch,
)
from oomguard.model.planner import plan_launch
from oomguard.units import GiB, MiB


@pytest.fixture(scope="module")
def llama8b():
    return load_model("meta-llama/Llama-3.1-8B-Instruct")


def _settings(model, version, gpu, **flags):
    return resolve(model, flags, {}, version=version, gpu_total_bytes=gpu.total_bytes, gpu_name=gpu.name, gpu_cc=gpu.cc_major_minor)


@pytest.mark.parametrize(
    "version, env, context_in, comm_in",
    [
        ("0.6.3", {}, False, True),  # init_free baseline read before NCCL init
        ("0.6.4", {}, True, True),  # used_total − torch_allocated: the context is charged
        ("0.6.6", {}, False, True),  # memory_profiling baseline
        ("0.8.5", {}, True, True),  # early V1: everything on the device
        ("0.8.5", {"VLLM_USE_V1": "0"}, False, True),  # the V0 engine of the same release
        ("0.11.0", {}, False, True),  # snapshot before NCCL init
        ("0.12.0", {}, False, False),  # snapshot after NCCL init
        ("0.33.0", {}, False, False),
    ],
)
def test_accounting_per_release(llama8b, version, env, context_in, comm_in):
    gpu = lookup_gpu("A100-80GB")
    s = resolve(llama8b, {}, env, version=version, gpu_total_bytes=gpu.total_bytes, gpu_name=gpu.name, gpu_cc=gpu.cc_major_minor)
    a = accounting(s)
    assert (a.context_in_budget, a.comm_init_in_budget) == (context_in, comm_in)
    assert "@" in a.source or "init_device" in a.source


def test_context_charged_once(llama8b):
    """0.6.4 and 0.8.5 charge the context (and other processes) once, inside the non-torch term."""
    gpu = lookup_gpu("A100-80GB")
    for version in ("0.6.4", "0.8.5"):
        p = plan_launch(llama8b, gpu, {"max_model_len": 8192}, version=version, other_gpu_use_bytes=1 * GiB)
        q = plan_launch(llama8b, gpu, {"max_model_len": 8192}, version="0.6.6" if version == "0.6.4" else "0.11.0", other_gpu_use_bytes=1 * GiB)
        r = p.tight_rank
        assert r.non_torch.bytes - q.tight_rank.non_torch.bytes == CUDA_CONTEXT_BYTES + 1 * GiB
        assert abs(r.requested_bytes - r.weights.bytes - r.non_torch.bytes - r.activation.bytes - r.kv_bytes - (r.cuda_graph.bytes if p.settings.estimate_cudagraphs else 0)) <= 1
        assert p.outside_bytes == 0 and q.outside_bytes == CUDA_CONTEXT_BYTES + 1 * GiB


@pytest.mark.parametrize(
    "gpu, tp, nnodes, disabled, on, why",
    [
        ("H100", 8, 1, False, True, "on"),
        ("H100", 8, 1, True, False, "--disable-custom-all-reduce"),
        ("L40S", 2, 1, False, True, "on"),  # two PCIe GPUs with P2P
        ("L40S", 4, 1, False, False, "more than two PCIe-only GPUs"),
        ("RTX-4090", 2, 1, False, False, "no GPU P2P (GeForce cards)"),
        ("H100", 8, 2, False, False, "TP group spans nodes"),
        ("H100", 3, 1, False, False, "unsupported world size 3"),
        ("H100", 1, 1, False, False, "TP 1"),
    ],
)
def test_custom_all_reduce_rules(gpu, tp, nnodes, disabled, on, why):
    g = lookup_gpu(gpu)
    topo = Topology.of(g, nnodes=nnodes, tp=tp, gpus_per_node=8 // nnodes if nnodes > 1 else None)
    assert custom_all_reduce_enabled(tp, topo, disabled_flag=disabled) == (on, why)


def test_custom_all_reduce_buffers_from_the_code(llama8b):
    """meta + max_size, the IPC buffer and rank_data: tens of MiB, not a flat GiB."""
    gpu = lookup_gpu("L40S")
    old = _settings(llama8b, "0.11.0", gpu, tensor_parallel_size=2)
    new = _settings(llama8b, "0.32.0", gpu, tensor_parallel_size=2)
    topo = Topology.of(gpu)
    assert custom_all_reduce_bytes(2, old, topo) == 24 * MiB
    assert custom_all_reduce_bytes(2, new, topo) == 32 * MiB  # 0.32: legacy buffer = reduce-scatter max 16 MiB
    assert custom_all_reduce_bytes(2, new, Topology.of(lookup_gpu("H200"))) == 32 * MiB + 96 * MiB  # + MNNVL buffer


def test_disable_custom_all_reduce_changes_the_pool_where_it_is_charged(llama8b):
    gpu = lookup_gpu("L40S")
    base = {"max_model_len": 8192, "tensor_parallel_size": 2}
    on = plan_launch(llama8b, gpu, base, version="0.11.0", num_gpus=2)
    off = plan_launch(llama8b, gpu, dict(base, disable_custom_all_reduce=True), version="0.11.0", num_gpus=2)
    assert on.tight_rank.non_torch.bytes - off.tight_rank.non_torch.bytes == 24 * MiB
    assert "custom all-reduce off (--disable-custom-all-reduce)" in off.tight_rank.non_torch.formula
    # From 0.12 the communicators are built before the snapshot: baseline, not budget.
    on12 = plan_launch(llama8b, gpu, base, version="0.33.0", num_gpus=2)
    off12 = plan_launch(llama8b, gpu, dict(base, disable_custom_all_reduce=True), version="0.33.0", num_gpus=2)
    assert on12.tight_rank.non_torch.bytes == off12.tight_rank.non_torch.bytes
    assert on12.baseline_bytes - off12.baseline_bytes == 32 * MiB


def test_nccl_by_tp_and_pp(llama8b):
    gpu = lookup_gpu("H100")
    v = "0.11.0"
    tp1 = non_torch(llama8b, _settings(llama8b, v, gpu), gpu).term.bytes
    tp2 = non_torch(llama8b, _settings(llama8b, v, gpu, tensor_parallel_size=2), gpu).term.bytes
    pp2 = non_torch(llama8b, _settings(llama8b, v, gpu, pipeline_parallel_size=2), gpu).term.bytes
    pcie = non_torch(llama8b, _settings(llama8b, v, lookup_gpu("L40S"), tensor_parallel_size=2), lookup_gpu("L40S")).term.bytes
    assert tp1 < pp2 < pcie < tp2  # NVSwitch TP pays ring + NVLS; PCIe two ring channels; PP send/recv
    assert pcie - tp1 == 2 * (4 * MiB + 512 * 1024) + 24 * MiB
