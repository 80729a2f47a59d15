"""Cutting streams into start-ups, and the offsets the planner applies (pure parts of calibrate)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from oomguard.calibrate.sources import SourceLine
from oomguard.calibrate.startups import Segmenter, facts_of
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.calibration import Calibration, Group, GroupKey, TermOffset, group_key
from oomguard.model.planner import plan_launch
from oomguard.units import GiB
from tests.conftest import ROOT

V1 = """(APIServer pid={api}) INFO 09-04 01:02:21 [api_server.py:1805] vLLM API server version 0.11.0
(APIServer pid={api}) INFO 09-04 01:02:21 [utils.py:326] non-default args: {{'model': 'Qwen/Qwen3-8B', 'max_model_len': 8192}}
(EngineCore_DP0 pid={core}) INFO 09-04 01:03:03 [gpu_model_runner.py:2007] Model loading took 15.27 GiB and 4.4 seconds
(EngineCore_DP0 pid={core}) INFO 09-04 01:04:29 [gpu_worker.py:276] Available KV cache memory: {kv} GiB
(EngineCore_DP0 pid={core}) INFO 09-04 01:04:29 [kv_cache_utils.py:849] GPU KV cache size: 93,872 tokens"""


def _cut(lines: list[tuple[str, str]]) -> list:
    seg = Segmenter()
    for i, (stream, text) in enumerate(lines, 1):
        seg.feed(SourceLine("f.log", i, text, stream))
    return [facts_of(s) for s in seg.startups]


def test_a_restart_with_the_same_pid_is_a_new_startup():
    text = V1.format(api=1, core=7, kv="5.01") + "\n" + V1.format(api=1, core=7, kv="6.02")
    facts = _cut([("", ln) for ln in text.splitlines()])
    assert [f.logged["kv_pool"].value for f in facts] == [5.01, 6.02]
    assert all(f.version == "0.11.0" and f.model == "Qwen/Qwen3-8B" and f.args["max_model_len"] == 8192 for f in facts)


def test_interleaved_servers_are_kept_apart_by_pid():
    a = V1.format(api=10, core=11, kv="5.01").splitlines()
    b = V1.format(api=20, core=21, kv="9.99").splitlines()
    # both API servers announce themselves, then their engine cores log in turns
    order = [a[0], a[1], b[0], b[1], a[2], b[2], b[3], a[3], a[4], b[4]]
    facts = _cut([("", ln) for ln in order])
    assert sorted(f.logged["kv_pool"].value for f in facts) == [5.01, 9.99]


def test_replicas_of_one_stream_are_kept_apart_by_their_prefix():
    a = V1.format(api=1, core=7, kv="5.01").splitlines()
    b = V1.format(api=1, core=7, kv="9.99").splitlines()  # same pids in both containers
    lines = [(f"vllm-{i % 2}", ln) for pair in zip(a, b) for i, ln in enumerate(pair)]
    facts = _cut(lines)
    assert sorted(f.logged["kv_pool"].value for f in facts) == [5.01, 9.99]


def test_kubectl_and_compose_prefixes_name_the_replica(tmp_path):
    from oomguard.calibrate import sources

    f = tmp_path / "all.log"
    f.write_text("[pod/vllm-0/vllm] INFO 01-01 [gpu_worker.py:1] Available KV cache memory: 5.0 GiB\n"
                 "chat-1  | INFO 01-01 [gpu_worker.py:1] Available KV cache memory: 6.0 GiB\n")
    _rep, lines = sources.read(str(f))
    got = [(x.stream, x.text[:4]) for x in lines]
    assert got == [("pod/vllm-0/vllm", "INFO"), ("chat-1", "INFO")]


def test_actual_usage_line_gives_the_whole_ledger():
    line = ("(Worker_TP0 pid=1806413) INFO 10-23 15:14:56 [gpu_worker.py:391] Free memory on device (139.21/139.81 GiB) on startup. "
            "Desired GPU memory utilization is (0.9, 125.83 GiB). Actual usage is 74.28 GiB for weight, 5.58 GiB for peak activation, "
            "1.38 GiB for non-torch memory, and 2.37 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with "
            "`--kv-cache-memory=45175492096` to fit into requested memory")
    (f,) = _cut([("", line)])
    assert {k: f.logged[k].value for k in ("weights", "activation", "non_torch", "cuda_graph")} == \
        {"weights": 74.28, "activation": 5.58, "non_torch": 1.38, "cuda_graph": 2.37}
    assert f.total_gib == 139.81


def _cal(term: str, gib: float, n: int, key: GroupKey) -> Calibration:
    off = int(gib * GiB)
    return Calibration((Group(key, n, {term: TermOffset(term, off, n, off - GiB // 10, off + GiB // 10)}),), source="p.yaml")


def test_planner_applies_the_group_offset_and_keeps_the_uncalibrated_figure():
    model, gpu = load_model("Qwen/Qwen3-8B"), lookup_gpu("H100")
    flags = {"max_model_len": 8192}
    base = plan_launch(model, gpu, flags, version="0.11.0")
    key = group_key(gpu, base.settings.version, model)
    assert key == GroupKey("H100-SXM-80GB", "0.11-0.19", "dense")
    cal = plan_launch(model, gpu, flags, version="0.11.0", calibration=_cal("activation", 1.5, 5, key))
    a0, a1 = base.tight_rank.activation, cal.tight_rank.activation
    assert a1.bytes == a0.bytes + int(1.5 * GiB) and a1.uncalibrated_bytes == a0.bytes
    assert a1.calibration.startswith("calibrated: +1.50 GiB from 5 start-ups on H100-SXM-80GB / 0.11-0.19 / dense")
    assert cal.tight_rank.kv_bytes == base.tight_rank.kv_bytes - int(1.5 * GiB)
    assert a1.low <= a1.bytes <= a1.high
    # below the minimum: refused, said, not applied
    few = plan_launch(model, gpu, flags, version="0.11.0", calibration=_cal("activation", 1.5, 2, key))
    assert few.tight_rank.activation.bytes == a0.bytes
    assert any("refused" in m and "minimum 3" in m for m in few.messages)
    # another release family: no group
    other = plan_launch(model, gpu, flags, version="0.32.0", calibration=_cal("activation", 1.5, 5, key))
    assert other.tight_rank.activation.calibration is None
    assert any("no group for H100-SXM-80GB / 0.28- / dense" in m for m in other.messages)


@pytest.mark.slow
def test_cross_validation_benchmark_runs_and_lowers_the_pool_error():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "calibration_cv.py"), "--json"], capture_output=True, text=True,
                         timeout=300, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr
    import json

    d = json.loads(out.stdout)
    assert d["groups"], "no group large enough to cross-validate"
    pooled = d["pooled"]["kv_pool"]
    assert pooled["median_abs_after"] < pooled["median_abs_before"]
