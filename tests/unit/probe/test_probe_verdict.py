"""The verdict: every pass criterion, the class chosen when several fail, and the plan comparison."""

from __future__ import annotations

import pytest

from oomguard.probe.chain import ChainOutcome, CheckResult
from oomguard.probe.classes import ProbeClass, Severity, Source
from oomguard.probe.client import normalize_base_url
from oomguard.probe.runner import ProbeConfig, ProbeRun, StageResult
from oomguard.probe.samplers import Sample
from oomguard.probe.schedule import Stage, StageKind
from oomguard.probe.stream import RequestRecord
from oomguard.probe.verdict import Limits, PlanNumbers, compare_plan, decide, peaks

GiB = 1 << 30
TOTAL = 24 * GiB


def rec(i: int, ok: bool = True, cls: str | None = None, error: str | None = None, status: int = 200) -> RequestRecord:
    r = RequestRecord(id=i, stage="concurrency-8", prompt_tokens=8000, max_tokens=64, t_start=1.0, t_end=3.0, ttft_s=0.5)
    r.ok, r.cls, r.error, r.status = ok, cls, error, status
    return r


def make_run(records=None, samples=None, alive=True, kernel=(), checks=(), pids=frozenset({4242}), kernel_checked=True) -> ProbeRun:
    stage = Stage("concurrency-8", StageKind.CONCURRENCY, 8000, 64, 8, 8)
    run = ProbeRun(config=ProbeConfig(url=normalize_base_url("http://127.0.0.1:8000")), chain=ChainOutcome(checks=list(checks)))
    records = [rec(i) for i in range(8)] if records is None else records
    run.stages = [StageResult(stage, records, 1.0, 3.0)]
    run.samples = list(samples or [])
    run.server_alive = alive
    run.alive_detail = "/health answered 200" if alive else "/health: connection refused"
    run.kernel_lines = list(kernel)
    run.kernel_checked = kernel_checked
    run.server_pids = set(pids)
    return run


def gpu(t: float, used_gib: float, key: str = "gpu0", src: Source = Source.NVML) -> Sample:
    return Sample(t, src, key, {"used_bytes": used_gib * GiB, "total_bytes": float(TOTAL)})


def metrics(t: float, usage: float, pre: float, running: float = 8) -> Sample:
    return Sample(t, Source.METRICS, "engine", {"kv_cache_usage": usage, "preemptions_total": pre, "running": running, "waiting": 0.0})


def test_pass_when_every_criterion_holds():
    v = decide(make_run(samples=[gpu(0, 18), gpu(1, 20.5), gpu(2, 21), metrics(1, 0.5, 0), metrics(2, 0.8, 1)]), Limits())
    assert v.passed and v.cls is None and "pass" in v.summary


def test_gpu_peak_over_limit_is_runtime_oom_with_the_numbers():
    v = decide(make_run(samples=[gpu(0, 18), gpu(2.5, 23.4)]), Limits())
    assert v.cls is ProbeClass.RUNTIME_OOM
    assert "23.40 GiB" in v.summary and "23.00 GiB" in v.summary  # 24 GiB minus the 1 GiB margin
    assert decide(make_run(samples=[gpu(0, 18), gpu(2.5, 23.4)]), Limits(gpu_margin_bytes=0)).passed
    assert decide(make_run(samples=[gpu(0, 18)]), Limits(max_gpu_mem_bytes=16 * GiB)).cls is ProbeClass.RUNTIME_OOM


def test_nvidia_smi_samples_count_too():
    v = decide(make_run(samples=[gpu(1, 23.9, src=Source.NVIDIA_SMI)]), Limits())
    assert v.cls is ProbeClass.RUNTIME_OOM


def test_kernel_oom_kill_of_the_server_is_host_oom_first():
    line = "Out of memory: Killed process 4242 (python) total-vm:98765432kB, anon-rss:60123456kB"
    v = decide(make_run(samples=[gpu(1, 23.9)], alive=False, kernel=[line]), Limits())
    assert v.cls is ProbeClass.HOST_OOM
    assert "server's process 4242" in v.summary
    assert line in v.findings[0].evidence
    assert "vm.overcommit_memory=1" in v.findings[0].fix


def test_kernel_kill_of_another_process_still_fails():
    v = decide(make_run(kernel=["Out of memory: Killed process 77 (chrome) total-vm:1kB"]), Limits())
    assert v.cls is ProbeClass.HOST_OOM and "pid 77 (chrome)" in v.summary


def test_dead_server_with_full_gpu_is_runtime_oom():
    recs = [rec(0, False, "stream-broken", "connection cut mid-stream (reset)")] + [rec(i) for i in range(1, 8)]
    v = decide(make_run(recs, samples=[gpu(0, 20), gpu(2, 23.8)], alive=False), Limits(gpu_margin_bytes=0))
    assert v.cls is ProbeClass.RUNTIME_OOM and "died" in v.summary
    classes = [f.cls for f in v.findings]
    assert ProbeClass.STREAM_BROKEN in classes  # the request-level symptom is kept as evidence


def test_dead_server_with_host_ram_exhausted_is_host_oom():
    rss = Sample(2, Source.RSS, "server", {"rss_bytes": 60.0 * GiB, "host_available_bytes": 0.5 * GiB, "host_total_bytes": 64.0 * GiB})
    v = decide(make_run(samples=[gpu(0, 10), rss], alive=False), Limits())
    assert v.cls is ProbeClass.HOST_OOM and "host RAM available" in v.summary


def test_dead_server_without_evidence_is_unknown():
    v = decide(make_run(samples=[gpu(0, 10)], alive=False), Limits())
    assert v.cls is ProbeClass.UNKNOWN and "diagnose" in v.findings[0].fix


def test_out_of_memory_error_bodies_are_runtime_oom():
    recs = [rec(0, False, "server-error", "HTTP 500: CUDA out of memory. Tried to allocate 2.00 GiB", 500)]
    v = decide(make_run(recs), Limits())
    assert v.cls is ProbeClass.RUNTIME_OOM
    assert all(f.cls is not ProbeClass.SERVER_ERROR for f in v.findings)


def test_preemption_storm_is_kv_too_small():
    v = decide(make_run(samples=[metrics(0, 0.2, 10), metrics(2, 1.0, 25)]), Limits())
    assert v.cls is ProbeClass.KV_TOO_SMALL and "15 preemptions" in v.summary
    assert any("90%" in n for n in v.notes)
    assert decide(make_run(samples=[metrics(0, 0.2, 10), metrics(2, 0.5, 25)]), Limits(max_preemptions=20)).passed


def test_request_failures_by_class():
    recs = [rec(0, False, "context-too-long", "This model's maximum context length is 1024 tokens.", 400), rec(1)]
    v = decide(make_run(recs), Limits())
    assert v.cls is ProbeClass.CONTEXT_TOO_LONG and "HTTP 400" in v.findings[0].evidence[0]


def test_chain_failure_class_comes_before_request_classes():
    chk = CheckResult("max-model-len", False, "claimed 4096 but serves 1024", cls=ProbeClass.CONTEXT_TOO_LONG, severity=Severity.FAIL_CONTINUE)
    warn = CheckResult("chat", False, "no template", cls=ProbeClass.BAD_REQUEST, severity=Severity.WARN)
    recs = [rec(0, False, "timeout", "stalled", 200)]
    v = decide(make_run(recs, checks=[warn, chk]), Limits())
    assert [f.cls for f in v.findings] == [ProbeClass.CONTEXT_TOO_LONG, ProbeClass.TIMEOUT]


def test_run_cut_by_duration_fails_with_timeout():
    run = make_run()
    run.hit_duration = True
    run.stages[0].not_started = 3
    v = decide(run, Limits())
    assert v.cls is ProbeClass.TIMEOUT and "3 request(s) not started" in v.summary


def test_unchecked_kernel_log_is_noted():
    v = decide(make_run(kernel_checked=False), Limits())
    assert v.passed and any("kernel OOM kills were not checked" in n for n in v.notes)


def test_peaks_per_source():
    pk = peaks([gpu(0, 10), gpu(1, 12), gpu(2, 11), gpu(1, 3, "gpu1"), metrics(0, 0.1, 5), metrics(3, 0.7, 9)])
    assert pk["nvml"]["gpu0"]["used_bytes"] == 12 * GiB and pk["nvml"]["gpu0"]["t"] == 1
    assert pk["nvml"]["gpu1"]["used_bytes"] == 3 * GiB
    assert pk["metrics"]["kv_cache_usage"] == 0.7 and pk["metrics"]["preemptions_delta"] == 4
    assert pk["kernel"]["oom_lines"] == 0


def test_compare_plan_arithmetic():
    plan = PlanNumbers(kv_cache_tokens=131072, max_concurrency=128.0, block_size=128, source="test")
    out = compare_plan(plan, claimed_concurrency=8, tokens_per_request=1000, observed_peak_usage=0.0625, observed_kv_cache_tokens=131072)
    # 1000 tokens round up to 8 blocks of 128 = 1024; 8 requests need 8192 tokens = 6.25% of the pool.
    assert out["kv_tokens_needed_at_claim"] == 8192
    assert out["predicted_usage_at_claim"] == pytest.approx(0.0625)
    assert out["usage_difference"] == pytest.approx(0.0)
    assert out["implied_kv_cache_tokens"] == 131072
    assert out["kv_cache_tokens_difference_pct"] == 0.0


def test_compare_plan_reports_a_smaller_real_pool_and_an_impossible_claim():
    plan = PlanNumbers(kv_cache_tokens=327680, max_concurrency=0.44, block_size=16)
    out = compare_plan(plan, claimed_concurrency=8, tokens_per_request=750000, observed_peak_usage=1.0, observed_kv_cache_tokens=300000)
    assert out["kv_cache_tokens_difference"] == -27680
    assert out["predicted_usage_at_claim"] == 1.0
    assert "more than it holds" in out["summary"] and "maximum concurrency 0.44" in out["summary"]
    assert out["implied_kv_cache_tokens"] is None  # a full pool says nothing about its size
