"""From what the probe observed to pass or fail, with the class and its evidence.

Pass only if every request completed, the server is alive afterwards, peak
GPU memory stayed under the limit (the card's total minus a margin, or
``--max-gpu-mem-gib``), no kernel OOM kill appeared and no preemption storm
happened. Otherwise every failed criterion becomes a :class:`Finding`; the
first, by the order below, gives the run its class:

1. memory: a kernel OOM kill (host-oom), the server dying (runtime-oom when GPU
   memory was full or the errors say "out of memory", host-oom when host RAM
   ran out, else unknown), GPU peak over the limit (runtime-oom), a
   preemption storm (kv-too-small);
2. the client chain's failed checks, in chain order;
3. failed requests, by class; then a run cut short by ``--duration``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oomguard.probe.classes import ProbeClass, Source
from oomguard.probe.classify import ENGINE_CRASHED, engine_crashed
from oomguard.probe.kernel import oom_kill
from oomguard.units import GiB

if TYPE_CHECKING:
    from oomguard.probe.runner import ProbeRun
    from oomguard.probe.samplers import Sample

GPU_SOURCES = (Source.NVML, Source.NVIDIA_SMI)
DEFAULT_GPU_MARGIN_BYTES = 1 * GiB
HOST_LOW_FRACTION = 0.05  # host RAM "exhausted" below 5% available
GPU_FULL_FRACTION = 0.98
KV_HIGH_USAGE = 0.90

FIXES = {
    ProbeClass.RUNTIME_OOM: (
        "bound the prefill peak with chunked prefill: --max-num-batched-tokens 1024 (512 when memory is "
        "tight), then raise it while headroom lasts; lowering --gpu-memory-utilization does not shrink "
        "activations"
    ),
    ProbeClass.HOST_OOM: (
        "host RAM ran out: reduce --swap-space / --cpu-offload-gb / KV offload bytes, or give the host "
        "more RAM; operators also used sysctl vm.overcommit_memory=1, vm.max_map_count=2621440 and "
        "echo -900 > /proc/<pid>/oom_score_adj (oomguard never runs these; -900 as in its exported units: at "
        "-1000 a cgroup OOM finds nothing to kill)"
    ),
    ProbeClass.KV_TOO_SMALL: (
        "the KV pool does not hold the claimed concurrency of long prompts: lower --max-num-seqs or "
        "--max-model-len, or give KV more memory (--gpu-memory-utilization, --kv-cache-memory-bytes)"
    ),
    ProbeClass.CONTEXT_TOO_LONG: (
        "the server refuses prompts this long: restart it with a larger --max-model-len, or claim less"
    ),
    ProbeClass.TIMEOUT: "the server stalled or is too slow for the bounds: check its log, or raise --stall-timeout / --duration",
    ProbeClass.STREAM_BROKEN: "the stream was cut or garbled: check proxies in between and the server log",
    ProbeClass.SERVER_ERROR: "the server answered with errors: read its log (oomguard diagnose LOG)",
    ProbeClass.UNKNOWN: "the server died without memory evidence here: run oomguard diagnose on its log and dmesg",
}
ENGINE_FIX = (
    "the root error is in the server log, above vLLM's 'EngineCore encountered an issue': rerun with "
    "--server-log FILE (or run oomguard diagnose on the log and dmesg)"
)


@dataclass(frozen=True)
class Limits:
    max_gpu_mem_bytes: int | None = None
    gpu_margin_bytes: int = DEFAULT_GPU_MARGIN_BYTES
    max_preemptions: int | None = None  # None: max(2, 10% of the requests)


@dataclass
class Finding:
    cls: ProbeClass
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"class": self.cls.value, "summary": self.summary, "evidence": self.evidence, "fix": self.fix}


@dataclass
class Verdict:
    findings: list[Finding]
    notes: list[str]

    @property
    def passed(self) -> bool:
        return not self.findings

    @property
    def cls(self) -> ProbeClass | None:
        return self.findings[0].cls if self.findings else None

    @property
    def summary(self) -> str:
        if self.passed:
            return "pass: every request completed, the server is alive, memory stayed within limits"
        return self.findings[0].summary


# -- peaks -------------------------------------------------------------------


def _by(samples: list[Sample], source: Source) -> list[Sample]:
    return [s for s in samples if s.source is source]


def peaks(samples: list[Sample]) -> dict[str, Any]:
    """Peak (or delta, for counters) per source and key; JSON-ready."""
    out: dict[str, Any] = {}
    for src in GPU_SOURCES:
        gpus: dict[str, Any] = {}
        for s in _by(samples, src):
            cur = gpus.get(s.key)
            used = s.values.get("used_bytes")
            if used is None:
                continue
            if cur is None or used > cur["used_bytes"]:
                gpus[s.key] = {
                    "used_bytes": used,
                    "total_bytes": s.values.get("total_bytes"),
                    "t": round(s.t, 3),
                    **({"server_bytes": s.values["server_bytes"]} if "server_bytes" in s.values else {}),
                }
        if gpus:
            out[src.value] = gpus
    metrics = _by(samples, Source.METRICS)
    if metrics:
        m: dict[str, Any] = {}
        for key in ("kv_cache_usage", "running", "waiting"):
            vals = [s.values[key] for s in metrics if key in s.values]
            if vals:
                m[key] = max(vals)
        for key in ("preemptions_total", "prefix_cache_hits_total", "prefix_cache_queries_total"):
            vals = [s.values[key] for s in metrics if key in s.values]
            if vals:
                m[key.replace("_total", "") + "_delta"] = vals[-1] - vals[0]
        q, h = m.get("prefix_cache_queries_delta"), m.get("prefix_cache_hits_delta")
        if q:
            m["prefix_cache_hit_rate"] = (h or 0) / q
        tokens = [s.values["kv_cache_tokens"] for s in metrics if "kv_cache_tokens" in s.values]
        if tokens:
            m["kv_cache_tokens"] = tokens[-1]
        out[Source.METRICS.value] = m
    rss = _by(samples, Source.RSS)
    if rss:
        top = max(rss, key=lambda s: s.values.get("rss_bytes", 0))
        out[Source.RSS.value] = {
            "rss_bytes": top.values.get("rss_bytes"),
            "t": round(top.t, 3),
            "host_available_bytes_min": min(s.values.get("host_available_bytes", math.inf) for s in rss),
            "host_total_bytes": rss[-1].values.get("host_total_bytes"),
            "swap_used_bytes_max": max(s.values.get("swap_used_bytes", 0) for s in rss),
        }
    kernel = _by(samples, Source.KERNEL)
    out[Source.KERNEL.value] = {"oom_lines": len(kernel), "lines": [s.text for s in kernel][:20]}
    client = _by(samples, Source.CLIENT)
    if client:
        out[Source.CLIENT.value] = {"in_flight": max(s.values.get("in_flight", 0) for s in client)}
    return out


def gpu_limit_bytes(samples: list[Sample], limits: Limits) -> tuple[dict[str, float], str]:
    """The limit per GPU key, and how it was chosen."""
    if limits.max_gpu_mem_bytes is not None:
        keys = {s.key for s in samples if s.source in GPU_SOURCES}
        return {k: float(limits.max_gpu_mem_bytes) for k in keys}, (
            f"--max-gpu-mem-gib {limits.max_gpu_mem_bytes / GiB:.2f}"
        )
    out: dict[str, float] = {}
    for s in samples:
        if s.source in GPU_SOURCES and s.values.get("total_bytes"):
            out[s.key] = s.values["total_bytes"] - limits.gpu_margin_bytes
    return out, f"card total minus {limits.gpu_margin_bytes / GiB:.2f} GiB margin"


# -- plan comparison --------------------------------------------------------------


@dataclass(frozen=True)
class PlanNumbers:
    """What a memory plan predicts; from ``oomguard plan`` or ``--kv-cache-tokens``."""

    kv_cache_tokens: int
    max_concurrency: float | None = None
    block_size: int = 16
    source: str = ""
    num_gpu_blocks: int | None = None


def compare_plan(
    plan: PlanNumbers,
    *,
    claimed_concurrency: int,
    tokens_per_request: int,
    observed_peak_usage: float | None,
    observed_kv_cache_tokens: int | None,
    observed_cache_config: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Predicted vs observed KV use at the claimed concurrency (pure arithmetic).

    ``observed_cache_config``: the server's ``vllm:cache_config_info`` as
    ``probe.metrics.cache_config_values`` gives it (blocks, block size, vLLM's
    maximum concurrency from 0.24), set against the plan's.
    """
    bs = max(1, plan.block_size)
    per_request = math.ceil(tokens_per_request / bs) * bs
    need = claimed_concurrency * per_request
    predicted_usage = min(1.0, need / plan.kv_cache_tokens) if plan.kv_cache_tokens else None
    out: dict[str, Any] = {
        "source": plan.source,
        "predicted_kv_cache_tokens": plan.kv_cache_tokens,
        "observed_kv_cache_tokens": observed_kv_cache_tokens,
        "kv_cache_tokens_difference": None,
        "kv_cache_tokens_difference_pct": None,
        "predicted_max_concurrency": plan.max_concurrency,
        "claimed_concurrency": claimed_concurrency,
        "tokens_per_request": tokens_per_request,
        "kv_tokens_needed_at_claim": need,
        "predicted_usage_at_claim": predicted_usage,
        "observed_peak_usage_at_claim": observed_peak_usage,
        "usage_difference": None,
        "implied_kv_cache_tokens": None,
    }
    parts = [f"plan predicts a KV pool of {plan.kv_cache_tokens:,} tokens"]
    if observed_kv_cache_tokens:
        diff = observed_kv_cache_tokens - plan.kv_cache_tokens
        out["kv_cache_tokens_difference"] = diff
        out["kv_cache_tokens_difference_pct"] = 100.0 * diff / plan.kv_cache_tokens if plan.kv_cache_tokens else None
        parts.append(
            f"the server allocated {observed_kv_cache_tokens:,} ({out['kv_cache_tokens_difference_pct']:+.1f}%)"
        )
    if predicted_usage is not None:
        parts.append(
            f"{claimed_concurrency} x {tokens_per_request:,} tokens need {need:,} "
            f"= {predicted_usage:.0%} of the predicted pool"
            + (" (more than it holds: expect queueing or preemption)" if need > plan.kv_cache_tokens else "")
        )
    if observed_peak_usage is not None:
        parts.append(f"observed peak KV usage {observed_peak_usage:.0%}")
        if predicted_usage is not None:
            out["usage_difference"] = observed_peak_usage - predicted_usage
        if 0 < observed_peak_usage < 0.999:
            out["implied_kv_cache_tokens"] = int(need / observed_peak_usage)
    cc = observed_cache_config or {}
    out["observed_num_gpu_blocks"] = cc.get("kv_num_gpu_blocks")
    out["predicted_num_gpu_blocks"] = plan.num_gpu_blocks
    out["observed_max_concurrency"] = cc.get("kv_max_concurrency")
    live_conc = cc.get("kv_max_concurrency")
    if live_conc and plan.max_concurrency:
        parts.append(f"vLLM reports a maximum concurrency of {live_conc:.2f}x (plan {plan.max_concurrency:.2f}x, {100.0 * (live_conc - plan.max_concurrency) / plan.max_concurrency:+.1f}%)")
    blocks, bs = cc.get("kv_num_gpu_blocks"), cc.get("kv_block_size")
    if blocks and plan.num_gpu_blocks and bs == plan.block_size:
        parts.append(f"{int(blocks):,} KV blocks of {int(bs)} tokens (plan {plan.num_gpu_blocks:,})")
    if plan.max_concurrency is not None and claimed_concurrency > plan.max_concurrency:
        parts.append(f"the claim exceeds the plan's maximum concurrency {plan.max_concurrency:.2f}")
    out["summary"] = "; ".join(parts)
    return out


def observed_usage_in(samples: list[Sample], t0: float, t1: float) -> float | None:
    vals = [
        s.values["kv_cache_usage"]
        for s in samples
        if s.source is Source.METRICS and t0 <= s.t <= t1 + 1.0 and "kv_cache_usage" in s.values
    ]
    return max(vals) if vals else None


# -- the verdict --------------------------------------------------------------------


def decide(run: ProbeRun, limits: Limits) -> Verdict:
    memory: list[Finding] = []
    notes: list[str] = []
    samples = run.samples
    pk = peaks(samples)
    records = run.records

    # kernel OOM kills
    kills = [k for k in (oom_kill(line) for line in run.kernel_lines) if k]
    if run.kernel_lines:
        victims = [k for k in kills if k.pid in run.server_pids]
        who = (
            f"the server's process {victims[0].pid} ({victims[0].name})"
            if victims
            else (f"pid {kills[0].pid} ({kills[0].name})" if kills else "a process")
        )
        memory.append(
            Finding(
                ProbeClass.HOST_OOM,
                f"the kernel OOM killer killed {who} during the probe",
                evidence=run.kernel_lines[:5],
                fix=FIXES[ProbeClass.HOST_OOM],
            )
        )
    elif not run.kernel_checked and run.stages:
        notes.append("kernel OOM kills were not checked (kernel log not readable here)")

    gpu_full = _gpu_full(samples)
    host_low = _host_low(pk)
    oom_errors = [r for r in records if r.error and "out of memory" in r.error.lower()]
    crashed = [r for r in records if engine_crashed(r.error)]
    crashed_checks = [c for c in run.chain.checks if not c.ok and engine_crashed(c.detail)]
    if crashed or crashed_checks:
        notes.append(f"{ENGINE_CRASHED}: vLLM answered 'EngineCore encountered an issue' "
                     f"({len(crashed)} request(s), {len(crashed_checks)} chain check(s))")
    if run.server_alive is False:
        if not (crashed or crashed_checks):
            notes.append(f"{ENGINE_CRASHED}: the server died under load ({run.alive_detail})")
        evidence = [run.alive_detail] + [_evidence(r) for r in _failed(records)[:3]]
        if any(f.cls is ProbeClass.HOST_OOM for f in memory):
            memory[0].evidence = evidence + memory[0].evidence
        elif gpu_full or oom_errors:
            why = gpu_full or "requests failed with 'out of memory'"
            memory.append(
                Finding(ProbeClass.RUNTIME_OOM, f"the server died under load; {why}", evidence, FIXES[ProbeClass.RUNTIME_OOM])
            )
        elif host_low:
            memory.append(
                Finding(ProbeClass.HOST_OOM, f"the server died under load; {host_low}", evidence, FIXES[ProbeClass.HOST_OOM])
            )
        elif crashed:
            memory.append(
                Finding(ProbeClass.UNKNOWN, f"{ENGINE_CRASHED} under load (vLLM: EngineCore encountered an issue) "
                        "and the server is down; no memory evidence here", evidence, ENGINE_FIX)
            )
        else:
            memory.append(
                Finding(ProbeClass.UNKNOWN, f"the server died under load ({ENGINE_CRASHED} or was killed) without "
                        "memory evidence here", evidence, FIXES[ProbeClass.UNKNOWN] + "; or rerun with --server-log FILE")
            )
    elif crashed and not oom_errors:
        memory.append(
            Finding(ProbeClass.UNKNOWN, f"{ENGINE_CRASHED} under load (vLLM: EngineCore encountered an issue); "
                    "the API server still answered /health", [_evidence(r) for r in crashed[:3]], ENGINE_FIX)
        )
    elif oom_errors:
        memory.append(
            Finding(
                ProbeClass.RUNTIME_OOM,
                f"{len(oom_errors)} request(s) failed with 'out of memory' (server survived)",
                [_evidence(r) for r in oom_errors[:3]],
                FIXES[ProbeClass.RUNTIME_OOM],
            )
        )

    limit_by_gpu, limit_how = gpu_limit_bytes(samples, limits)
    for src in GPU_SOURCES:
        for key, p in (pk.get(src.value) or {}).items():
            limit = limit_by_gpu.get(key)
            if limit is not None and p["used_bytes"] > limit:
                memory.append(
                    Finding(
                        ProbeClass.RUNTIME_OOM,
                        f"{key} peaked at {p['used_bytes'] / GiB:.2f} GiB, above the limit "
                        f"{limit / GiB:.2f} GiB ({limit_how})",
                        [f"{src.value} {key} at t={p['t']}s: {p['used_bytes'] / GiB:.2f} GiB used"],
                        FIXES[ProbeClass.RUNTIME_OOM],
                    )
                )

    m = pk.get(Source.METRICS.value) or {}
    preempt = m.get("preemptions_delta")
    allowed = limits.max_preemptions if limits.max_preemptions is not None else max(2, len(records) // 10)
    if preempt is not None and preempt > allowed:
        memory.append(
            Finding(
                ProbeClass.KV_TOO_SMALL,
                f"preemption storm: {int(preempt)} preemptions during the probe (allowed {allowed})",
                [f"vllm:num_preemptions rose by {int(preempt)}; peak KV usage {m.get('kv_cache_usage', 0):.0%}"],
                FIXES[ProbeClass.KV_TOO_SMALL],
            )
        )
    if m.get("kv_cache_usage", 0) >= KV_HIGH_USAGE:
        notes.append(f"KV cache usage reached {m['kv_cache_usage']:.0%} (alert threshold 90%)")

    chain = [
        Finding(c.cls or ProbeClass.UNKNOWN, f"{c.check}: {c.detail}", [], c.fix)
        for c in run.chain.checks
        if c.failed
    ]

    failed = _failed(records)
    request_findings = []
    by_cls = Counter(r.cls for r in failed if r.cls)
    for cls_name, n in by_cls.most_common():
        cls = ProbeClass(cls_name)
        if cls is ProbeClass.SERVER_ERROR and oom_errors:
            continue  # already a runtime-oom finding
        examples = [r for r in failed if r.cls == cls_name]
        request_findings.append(
            Finding(
                cls,
                f"{n} request(s) failed: {cls.value} ({examples[0].error})",
                [_evidence(r) for r in examples[:3]],
                FIXES.get(cls),
            )
        )
    if run.hit_duration:
        left = sum(s.not_started for s in run.stages)
        request_findings.append(
            Finding(
                ProbeClass.TIMEOUT,
                f"the run reached --duration {run.config.bounds.duration_s:.0f}s before every stage "
                f"completed ({left} request(s) not started)",
                run.schedule_notes[-2:],
                FIXES[ProbeClass.TIMEOUT],
            )
        )
    if not run.chain.blocking and not run.stages:
        request_findings.append(
            Finding(ProbeClass.UNKNOWN, "stage 2 did not run: " + "; ".join(run.schedule_notes), [], None)
        )
    if run.stages and run.server_alive is None:
        notes.append("server liveness after the load was not checked")
    return Verdict(memory + chain + request_findings, notes)


def _evidence(r: Any) -> str:
    status = f" HTTP {r.status}" if r.status and not (r.error or "").startswith("HTTP") else ""
    return f"{r.stage} #{r.id}:{status} {r.error}"


def _failed(records: list[Any]) -> list[Any]:
    return [r for r in records if not r.ok]


def _gpu_full(samples: list[Sample]) -> str:
    for s in samples:
        if s.source in GPU_SOURCES and s.values.get("total_bytes"):
            if s.values.get("used_bytes", 0) >= GPU_FULL_FRACTION * s.values["total_bytes"]:
                return (
                    f"{s.source.value} showed {s.key} at {s.values['used_bytes'] / GiB:.2f} of "
                    f"{s.values['total_bytes'] / GiB:.2f} GiB (t={s.t:.1f}s)"
                )
    return ""


def _host_low(pk: dict[str, Any]) -> str:
    rss = pk.get(Source.RSS.value)
    if not rss or not rss.get("host_total_bytes"):
        return ""
    avail = rss["host_available_bytes_min"]
    if avail < HOST_LOW_FRACTION * rss["host_total_bytes"]:
        return f"host RAM available fell to {avail / GiB:.2f} GiB of {rss['host_total_bytes'] / GiB:.2f} GiB"
    return ""
