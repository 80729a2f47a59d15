"""The one JSON object ``oomguard probe --format json`` prints (and the HTML reads).

Contract keys (issue 5; other tools depend on them): ``verdict``, ``class``,
``chain``, ``stages``, ``samples``, ``peak``, ``plan_comparison``. The rest is
extra context. Every string goes through the redactor before it leaves.
"""

from __future__ import annotations

from typing import Any

from oomguard.probe.classify import ENGINE_CRASHED
from oomguard.probe.client import Redactor
from oomguard.redact import safe_terminal_data
from oomguard.probe.runner import ProbeRun
from oomguard.probe.schedule import StageKind
from oomguard.probe.verdict import Limits, PlanNumbers, Verdict, compare_plan, gpu_limit_bytes, observed_usage_in, peaks

SCHEMA_VERSION = 1


def plan_comparison(run: ProbeRun, plan: PlanNumbers | None) -> dict[str, Any] | None:
    """Compare at the claimed-concurrency stage (the last concurrency stage that ran)."""
    if plan is None:
        return None
    conc = [s for s in run.stages if s.stage.kind is StageKind.CONCURRENCY and s.records]
    if not conc:
        conc = [s for s in run.stages if s.records]
    if not conc:
        return {"summary": "no stage ran; nothing to compare", "predicted_kv_cache_tokens": plan.kv_cache_tokens}
    target = conc[-1]
    return compare_plan(
        plan,
        claimed_concurrency=target.stage.concurrency,
        tokens_per_request=target.stage.prompt_tokens + target.stage.max_tokens,
        observed_peak_usage=observed_usage_in(run.samples, target.t_start, target.t_end),
        observed_kv_cache_tokens=run.kv_cache_tokens_served,
        observed_cache_config=getattr(run, "cache_config_served", None),
    )


def build_result(
    run: ProbeRun,
    verdict: Verdict,
    limits: Limits,
    plan: PlanNumbers | None,
    redact: Redactor,
    *,
    server_log: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cfg = run.config
    samples: dict[str, list[dict[str, Any]]] = {}
    for s in run.samples:
        samples.setdefault(s.source.value, []).append(s.to_json())
    limit_by_gpu, limit_how = gpu_limit_bytes(run.samples, limits)
    result = {
        "schema_version": SCHEMA_VERSION,
        "verdict": "pass" if verdict.passed else "fail",
        "class": verdict.cls.value if verdict.cls else None,
        "summary": verdict.summary,
        "findings": [f.to_json() for f in verdict.findings],
        "notes": verdict.notes + run.schedule_notes,
        "server": {
            "base_url": cfg.url.given,
            "root": cfg.url.root,
            "model": run.chain.model,
            "served_models": run.chain.served_models,
            "served_max_model_len": run.chain.served_max_model_len,
            "probed_max_model_len": run.max_model_len,
            "kv_cache_tokens": run.kv_cache_tokens_served,
            "pid": run.server_pid,
            "alive_after": run.server_alive,
            "alive_detail": run.alive_detail,
        },
        "chain": [c.to_json() for c in run.chain.checks],
        "stages": [s.to_json() for s in run.stages],
        "requests": [r.to_json() for s in run.stages for r in s.records],
        "samples": samples,
        "peak": peaks(run.samples),
        "limits": {
            "gpu_limit_bytes": limit_by_gpu,
            "gpu_limit": limit_how,
            "max_preemptions": limits.max_preemptions,
        },
        "samplers": {name: st.to_json() for name, st in run.samplers.items()},
        "plan_comparison": plan_comparison(run, plan),
        "prompts": run.prompt_method,
        "http_transport": run.http_transport if run.stages else None,
        "bounds": {
            "duration_s": cfg.bounds.duration_s,
            "max_requests": cfg.bounds.max_requests,
            "request_timeout_s": cfg.bounds.request_timeout_s,
            "stall_timeout_s": cfg.stall_timeout_s,
            "sample_interval_s": cfg.bounds.sample_interval_s,
        },
        "duration_s": round(run.duration_s, 3),
        "engine_crashed": any(ENGINE_CRASHED in n for n in verdict.notes),
        "server_log": server_log,
    }
    # Everything a server sent (model ids, error messages, stream text) is stripped of control
    # characters and terminal escapes, then redacted, as a structure, before any renderer sees it.
    return redact.data(safe_terminal_data(result))
