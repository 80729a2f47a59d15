"""Which Prometheus series carry each signal, per vLLM version and GPU exporter.

vLLM renamed its KV-cache gauge. Traced from ``vllm/v1/metrics/loggers.py`` at
the release tags (and confirmed on the 0.32 CPU server's ``/metrics``):

- up to 0.9.1: ``vllm:gpu_cache_usage_perc`` only;
- 0.9.2 to 0.10.x: both; the old one's help says "DEPRECATED: Use
  vllm:kv_cache_usage_perc instead";
- 0.11.x: ``vllm:kv_cache_usage_perc``; the old name is hidden unless the
  server runs with ``--show-hidden-metrics-for-version=0.10``;
- 0.12.0 on: ``vllm:kv_cache_usage_perc`` only.

The prefix-cache counters moved the same way (``vllm:gpu_prefix_cache_*`` to
``vllm:prefix_cache_*``). ``vllm:num_requests_running``,
``vllm:num_requests_waiting`` and the ``vllm:num_preemptions_total`` counter
kept their names. All are 0..1 fractions or counts, labelled ``model_name``
(and ``engine`` on V1).

GPU memory is not on vLLM's ``/metrics``: it comes from a GPU exporter.
NVIDIA's DCGM exporter publishes ``DCGM_FI_DEV_FB_USED`` and
``DCGM_FI_DEV_FB_FREE`` in MiB per GPU (label ``gpu``); the community
``nvidia_gpu_exporter`` publishes ``nvidia_smi_memory_used_bytes`` and
``nvidia_smi_memory_total_bytes`` (label ``uuid``).
"""

from __future__ import annotations

from dataclasses import dataclass

from oomguard.textenum import TextEnum
from oomguard.model.engine import NEWEST, parse_version

V1_DEFAULT_IN = (0, 8, 0)  # the V1 engine (and its prefix-cache counters) became the default
RENAMED_IN = (0, 9, 2)  # first release with vllm:kv_cache_usage_perc
OLD_HIDDEN_IN = (0, 11, 0)  # the old names are hidden from here (removed in 0.12.0)


class GpuExporter(TextEnum):
    DCGM = "dcgm"
    NVIDIA_SMI = "nvidia-smi"


@dataclass(frozen=True)
class GpuMemorySeries:
    """PromQL for GPU memory used as a fraction of the card, and used bytes."""

    exporter: GpuExporter
    fraction: str
    used_bytes: str
    label: str  # the per-GPU label
    note: str


def gpu_memory_series(exporter: GpuExporter) -> GpuMemorySeries:
    if exporter is GpuExporter.DCGM:
        return GpuMemorySeries(
            exporter,
            fraction="DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
            used_bytes="DCGM_FI_DEV_FB_USED * 1048576",
            label="gpu",
            note="NVIDIA DCGM exporter: DCGM_FI_DEV_FB_USED / DCGM_FI_DEV_FB_FREE (MiB)",
        )
    return GpuMemorySeries(
        exporter,
        fraction="nvidia_smi_memory_used_bytes / nvidia_smi_memory_total_bytes",
        used_bytes="nvidia_smi_memory_used_bytes",
        label="uuid",
        note="nvidia_gpu_exporter: nvidia_smi_memory_used_bytes / nvidia_smi_memory_total_bytes",
    )


@dataclass(frozen=True)
class VllmSeries:
    """The metric names one vLLM version exposes, newest spelling first."""

    version: str
    kv_usage: tuple[str, ...]
    prefix_hits: tuple[str, ...]
    prefix_queries: tuple[str, ...]
    running: str = "vllm:num_requests_running"
    waiting: str = "vllm:num_requests_waiting"
    preemptions: str = "vllm:num_preemptions_total"
    prefix_hit_rate_gauge: str | None = None  # V0 engines (before 0.8) had a gauge, no counters
    note: str = ""

    def any_of(self, names: tuple[str, ...], agg: str = "max", by: str = "instance, model_name") -> str:
        """``agg by (...) (a) or agg by (...) (b)``: whichever name the server exposes."""
        return " or ".join(f"{agg} by ({by}) ({n})" for n in names)


def vllm_series(version: str | None) -> VllmSeries:
    """Metric names for ``version`` (None: the newest release oomguard knows)."""
    text = version or NEWEST
    v = parse_version(text)
    new_kv, old_kv = "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"
    new_hits, old_hits = "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"
    new_q, old_q = "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"
    if v < V1_DEFAULT_IN:
        return VllmSeries(
            text,
            (old_kv,),
            (),
            (),
            prefix_hit_rate_gauge="vllm:gpu_prefix_cache_hit_rate",
            note=f"vLLM {text} (V0 engine): {old_kv}; prefix cache as the gauge vllm:gpu_prefix_cache_hit_rate",
        )
    if v < RENAMED_IN:
        return VllmSeries(
            text, (old_kv,), (old_hits,), (old_q,), note=f"vLLM {text}: before the rename in 0.9.2, {old_kv} only"
        )
    if v < OLD_HIDDEN_IN:
        return VllmSeries(
            text,
            (new_kv, old_kv),
            (new_hits, old_hits),
            (new_q, old_q),
            note=f"vLLM {text} exposes both {new_kv} and the deprecated {old_kv}; rules match either",
        )
    note = f"vLLM {text}: {new_kv} only"
    if v < (0, 12, 0):
        note += f" ({old_kv} is hidden unless --show-hidden-metrics-for-version=0.10)"
    return VllmSeries(text, (new_kv,), (new_hits,), (new_q,), note=note)


def promql_string(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal.

    PromQL strings take Go's escapes (backslash, quote, newline, 4-digit unicode), of which
    JSON's are a subset; pasted raw, ``--job 'x"} or vector(1) or up{job="'`` made an
    always-true rule.
    """
    import json

    return json.dumps(value, ensure_ascii=False)
