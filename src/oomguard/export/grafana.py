"""A Grafana dashboard for the same signals as the alert rules.

Plain dashboard JSON (import it, or provision it from a file): a
``datasource`` variable for the Prometheus data source, one time-series
panel per signal with the alert threshold drawn as a red step, and a stat
panel for the server's ``up``. The queries use the same metric names as
``alerts.py`` for the chosen vLLM version.
"""

from __future__ import annotations

from typing import Any

from oomguard.export.alerts import AlertSettings
from oomguard.export.names import gpu_memory_series, promql_string, vllm_series

SCHEMA_VERSION = 39  # Grafana 10.4/11 dashboards
_DS = {"type": "prometheus", "uid": "${datasource}"}


def _thresholds(red_at: float | None) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    if red_at is not None:
        steps.append({"color": "red", "value": red_at})
    return {"mode": "absolute", "steps": steps}


def _timeseries(
    pid: int,
    title: str,
    targets: list[tuple[str, str]],
    grid: tuple[int, int, int, int],
    *,
    unit: str,
    red_at: float | None = None,
    max_value: float | None = None,
    description: str = "",
) -> dict[str, Any]:
    x, y, w, h = grid
    defaults: dict[str, Any] = {
        "unit": unit,
        "min": 0,
        "thresholds": _thresholds(red_at),
        "custom": {"thresholdsStyle": {"mode": "line" if red_at is not None else "off"}, "lineWidth": 1},
    }
    if max_value is not None:
        defaults["max"] = max_value
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": _DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": _DS, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def dashboard(settings: AlertSettings) -> dict[str, Any]:
    names = vllm_series(settings.vllm_version)
    gpu = gpu_memory_series(settings.gpu_exporter)
    by = "instance, model_name"
    kv = names.any_of(names.kv_usage, "max", by)
    if names.prefix_hit_rate_gauge:
        prefix = f"max by ({by}) ({names.prefix_hit_rate_gauge})"
    else:
        hits = " or ".join(f"sum by ({by}) (rate({n}[$__rate_interval]))" for n in names.prefix_hits)
        queries = " or ".join(f"sum by ({by}) (rate({n}[$__rate_interval]))" for n in names.prefix_queries)
        prefix = f"({hits}) / ({queries})"
    panels = [
        _timeseries(
            1,
            "KV cache usage",
            [(kv, "{{instance}} {{model_name}}")],
            (0, 0, 12, 8),
            unit="percentunit",
            red_at=settings.kv_threshold,
            max_value=1,
            description=f"{' / '.join(names.kv_usage)}; alert above {settings.kv_threshold:g} for {settings.kv_for}",
        ),
        _timeseries(
            2,
            "GPU memory used (fraction of card)",
            [(f"max by (instance, {gpu.label}) ({gpu.fraction})", "{{instance}} GPU {{" + gpu.label + "}}")],
            (12, 0, 12, 8),
            unit="percentunit",
            red_at=settings.gpu_mem_threshold,
            max_value=1,
            description=gpu.note + "; memory climbing in steps under traffic is the allocator growing past the profiled peak (unchunked long prefills)",
        ),
        _timeseries(
            3,
            "Requests running / waiting",
            [
                (f"sum by ({by}) ({names.running})", "running {{instance}}"),
                (f"sum by ({by}) ({names.waiting})", "waiting {{instance}}"),
            ],
            (0, 8, 12, 8),
            unit="short",
        ),
        _timeseries(
            4,
            "Preemptions per second",
            [(f"sum by ({by}) (rate({names.preemptions}[$__rate_interval]))", "{{instance}} {{model_name}}")],
            (12, 8, 12, 8),
            unit="ops",
            red_at=0.0001,
        ),
        _timeseries(
            5,
            "GPU memory used (bytes)",
            [(f"max by (instance, {gpu.label}) ({gpu.used_bytes})", "{{instance}} GPU {{" + gpu.label + "}}")],
            (0, 16, 12, 8),
            unit="bytes",
        ),
        _timeseries(
            6,
            "Prefix cache hit rate",
            [(prefix, "{{instance}} {{model_name}}")],
            (12, 16, 12, 8),
            unit="percentunit",
            max_value=1,
        ),
        _timeseries(
            7,
            "Host OOM kills (node_exporter)",
            [("increase(node_vmstat_oom_kill[$__rate_interval])", "{{instance}}")],
            (0, 24, 12, 6),
            unit="short",
            red_at=1,
        ),
        {
            "id": 8,
            "type": "stat",
            "title": "Server up",
            "datasource": _DS,
            "gridPos": {"x": 12, "y": 24, "w": 12, "h": 6},
            "fieldConfig": {
                "defaults": {
                    "thresholds": {
                        "mode": "absolute",
                        "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}],
                    },
                    "mappings": [{"type": "value", "options": {"0": {"text": "DOWN"}, "1": {"text": "UP"}}}],
                },
                "overrides": [],
            },
            "options": {
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "background",
            },
            "targets": [
                {"refId": "A", "datasource": _DS, "expr": f"up{{job={promql_string(settings.job)}}}", "legendFormat": "{{instance}}"}
            ],
        },
    ]
    return {
        "uid": "oomguard-vllm",
        "title": f"vLLM memory (oomguard, vLLM {names.version})",
        "description": names.note,
        "tags": ["vllm", "oomguard"],
        "timezone": "browser",
        "editable": True,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                    "refresh": 1,
                }
            ]
        },
        "panels": panels,
    }


def render_grafana(settings: AlertSettings) -> str:
    import json

    return json.dumps(dashboard(settings), indent=2) + "\n"
