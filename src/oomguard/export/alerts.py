"""Prometheus alerting rules for a vLLM deployment, in the metric names of its version.

The signals are the ones the founding deployments' operators asked for
before the cliff: KV cache nearly full, GPU memory past what the launch is
expected to hold, preemptions, the waiting queue growing, the server down,
vLLM's metrics gone (``absent()``: a renamed metric or a broken scrape would
silence every other rule), a container killed for memory (kube-state-metrics'
``OOMKilled``) and (from node_exporter) the host kernel's OOM killer.

Without a launch the thresholds are general defaults. With one
(``export alerts --launch FILE --gpu GPU``) they come from its plan
(``alert_plan.py``): the GPU memory the launch is expected to hold, the KV
share of one full-length request, whether the pool holds every admitted
request at full length. ``promtool check rules`` accepts the output;
``tests/unit/export`` runs it when promtool is installed, plus ``promtool test
rules`` on synthetic series.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oomguard.export.names import (
    GpuExporter,
    VllmSeries,
    gpu_memory_series,
    promql_string,
    vllm_series,
)

GROUP_NAME = "oomguard-vllm"


@dataclass(frozen=True)
class AlertSettings:
    """Thresholds and hold times (Prometheus durations such as ``5m``)."""

    vllm_version: str | None = None
    job: str = "vllm"
    gpu_exporter: GpuExporter = GpuExporter.DCGM
    kv_threshold: float = 0.9
    kv_for: str = "5m"
    gpu_mem_threshold: float = 0.95
    gpu_mem_for: str = "5m"
    preemption_window: str = "5m"
    preemption_for: str = "10m"
    queue_window: str = "10m"
    queue_for: str = "10m"
    down_for: str = "1m"
    host_oom: bool = True  # node_exporter's node_vmstat_oom_kill
    kube_oom: bool = True  # kube-state-metrics' OOMKilled termination reason
    container: str = "vllm"  # the container name kube-state-metrics reports (export launch --name)
    absent_for: str = "10m"
    # why each threshold is what it is (from the plan, or the default), for the descriptions
    kv_why: str = ""
    gpu_mem_why: str = ""
    preemption_why: str = ""
    source: str = ""  # "the plan of start_api.sh on 8x RTX-3090" (the rules file's header)


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    hold: str
    severity: str
    summary: str
    description: str
    signal: str  # kv | gpu-memory | preemptions | queue | down | absent | kube-oom | host-oom
    labels: dict[str, str] = field(default_factory=dict)

    def to_prometheus(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.hold,
            "labels": {"severity": self.severity, "source": "oomguard", **self.labels},
            "annotations": {"summary": self.summary, "description": self.description},
        }


def _pct(x: float) -> str:
    return f"{x * 100:g}%"


def alert_rules(settings: AlertSettings) -> list[AlertRule]:
    s = settings
    names: VllmSeries = vllm_series(s.vllm_version)
    gpu = gpu_memory_series(s.gpu_exporter)
    by = "instance, model_name"
    kv = names.any_of(names.kv_usage, "max", by)
    rules = [
        AlertRule(
            "VllmKvCacheNearlyFull",
            f"({kv}) > {s.kv_threshold:g}",
            s.kv_for,
            "warning",
            f"vLLM KV cache above {_pct(s.kv_threshold)} on {{{{ $labels.instance }}}}",
            "KV cache usage of {{ $labels.model_name }} has stayed at {{ $value | humanizePercentage }} "
            f"for {s.kv_for}. New requests queue and running ones get preempted; a long prompt now can "
            "tip the server over. Lower --max-num-seqs or --max-model-len, or give the KV pool more memory "
            "(oomguard plan shows by how much)." + (f" Threshold: {s.kv_why}." if s.kv_why else ""),
            "kv",
        ),
        AlertRule(
            "VllmGpuMemoryNearLimit",
            f"max by (instance, {gpu.label}) ({gpu.fraction}) > {s.gpu_mem_threshold:g}",
            s.gpu_mem_for,
            "critical",
            f"GPU memory above {_pct(s.gpu_mem_threshold)} on {{{{ $labels.instance }}}} GPU {{{{ $labels.{gpu.label} }}}}",
            "GPU memory has stayed at {{ $value | humanizePercentage }} of the card for "
            f"{s.gpu_mem_for} ({gpu.note}). vLLM reserves --gpu-memory-utilization at start; memory "
            "beyond it is prefill activations or another process, and the next long prompt can end in "
            "CUDA out of memory. Lower --max-num-batched-tokens (chunked prefill) to bound the peak."
            + (f" Threshold: {s.gpu_mem_why}." if s.gpu_mem_why else ""),
            "gpu-memory",
        ),
        AlertRule(
            "VllmPreemptionsRising",
            f"sum by ({by}) (rate({names.preemptions}[{s.preemption_window}])) > 0",
            s.preemption_for,
            "warning",
            "vLLM is preempting requests on {{ $labels.instance }}",
            f"{{{{ $labels.model_name }}}} has preempted requests continuously for {s.preemption_for} "
            "({{ $value | humanize }}/s): the KV cache cannot hold the running batch, so requests are "
            "recomputed. Lower --max-num-seqs, or shorten --max-model-len."
            + (f" {s.preemption_why}." if s.preemption_why else ""),
            "preemptions",
        ),
        AlertRule(
            "VllmWaitingQueueGrowing",
            f"sum by ({by}) ({names.waiting}) > 0 and sum by ({by}) (deriv({names.waiting}[{s.queue_window}])) > 0",
            s.queue_for,
            "warning",
            "vLLM waiting queue growing on {{ $labels.instance }}",
            f"Requests waiting for {{{{ $labels.model_name }}}} have grown for {s.queue_for}: arrivals "
            "exceed what the KV cache and --max-num-seqs admit. Add capacity or shed load.",
            "queue",
        ),
        AlertRule(
            "VllmServerDown",
            f"up{{job={promql_string(s.job)}}} == 0",
            s.down_for,
            "critical",
            "vLLM server {{ $labels.instance }} is down",
            # the job comes from the series' own label: a job name never becomes template code
            f"Prometheus cannot scrape job {{{{ $labels.job }}}} at {{{{ $labels.instance }}}} for {s.down_for}. "
            "If it died under load, run `oomguard diagnose` on its log and `dmesg`.",
            "down",
        ),
        AlertRule(
            "VllmMetricsAbsent",
            " and ".join(f"absent({n}{{job={promql_string(s.job)}}})" for n in names.kv_usage),
            s.absent_for,
            "warning",
            "vLLM's metrics are missing from Prometheus (job {{ $labels.job }})",
            f"No KV-cache series of job {{{{ $labels.job }}}} for {s.absent_for} ({' or '.join(names.kv_usage)}, "
            f"the names of vLLM {names.version}). Every other vLLM rule is silent until they are back: the "
            "server is not scraped, or it runs a vLLM version whose metric names differ (export the rules "
            "with its --vllm-version).",
            "absent",
        ),
    ]
    if s.kube_oom:
        c = promql_string(s.container)
        rules.append(
            AlertRule(
                "VllmContainerOOMKilled",
                f"max by (namespace, pod, container) (kube_pod_container_status_last_terminated_reason"
                f"{{reason=\"OOMKilled\", container={c}}}) == 1 and on (namespace, pod, container) "
                f"increase(kube_pod_container_status_restarts_total{{container={c}}}[10m]) > 0",
                "0m",
                "critical",
                "vLLM container {{ $labels.namespace }}/{{ $labels.pod }} was OOMKilled",
                "Kubernetes killed container {{ $labels.container }} for exceeding its memory limit "
                "(kube-state-metrics: last terminated reason OOMKilled, restarted in the last 10m). This is "
                "host RAM, not GPU memory: the CPU KV tier, --cpu-offload-gb and the workers count against the "
                "limit; `oomguard check` on the manifest (OG401) and `oomguard export launch --to kubernetes` "
                "size it from the plan.",
                "kube-oom",
            )
        )
    if s.host_oom:
        rules.append(
            AlertRule(
                "HostOomKill",
                "increase(node_vmstat_oom_kill[5m]) > 0",
                "0m",
                "critical",
                "Kernel OOM killer fired on {{ $labels.instance }}",
                "The host kernel killed a process for RAM (node_exporter node_vmstat_oom_kill). A vLLM "
                "server killed this way shows no CUDA error: check host RAM (CPU offload, swap space, "
                "pinned memory) with `oomguard host`.",
                "host-oom",
            )
        )
    return rules


def prometheus_rules(settings: AlertSettings) -> dict[str, Any]:
    """The rules file as a mapping (``groups:`` → one group)."""
    return {
        "groups": [
            {
                "name": GROUP_NAME,
                "rules": [r.to_prometheus() for r in alert_rules(settings)],
            }
        ]
    }


def render_prometheus(settings: AlertSettings) -> str:
    import yaml

    from oomguard.export.fields import visible

    names = vllm_series(settings.vllm_version)
    gpu = gpu_memory_series(settings.gpu_exporter)
    header = [
        "# Prometheus alerting rules for vLLM, generated by `oomguard export alerts`.",
        f"# Metric names: {names.note}.",
        f"# GPU memory: {gpu.note}.",
        "# Host OOM kills: node_exporter (node_vmstat_oom_kill)." if settings.host_oom else "",
        "# Container OOM kills: kube-state-metrics (kube_pod_container_status_last_terminated_reason)."
        if settings.kube_oom else "",
        f"# Thresholds from {visible(settings.source)}." if settings.source else "# Thresholds: the defaults (no launch given).",
        "# Check with: promtool check rules <this file>",
    ]
    body = yaml.safe_dump(prometheus_rules(settings), sort_keys=False, width=1000, allow_unicode=True)
    return "\n".join(h for h in header if h) + "\n" + body
