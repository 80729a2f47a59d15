"""``oomguard watch``: monitor a live vLLM server, alert on held thresholds, summarise on exit.

    oomguard watch --base-url http://127.0.0.1:8000 [--interval 1] [--duration 1h]
                   [--alert-kv 0.9 --for 60s] [--alert-gpu-mem 0.95] [--format text|json]
                   [--launch start_api.sh | vLLM flags] [--gpu A100-80GB]

Exit codes: 0 ended (duration or Ctrl-C) with no alert fired; 1 an alert fired or the
kernel OOM killer struck; 2 bad input; 3 the server went away during the watch;
4 the server could not be reached at the start.
"""

from __future__ import annotations

import argparse
import sys

ACCEPTS_VLLM_FLAGS = True  # plan flags for the drift comparison may follow our options
# The shared codes: an unreachable server and one that went away are both "could not complete".
from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS as EXIT_ALERTS, EXIT_INCOMPLETE as EXIT_SERVER_GONE, EXIT_OK  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_OK: "no alert", EXIT_ALERTS: "alerts fired", EXIT_SERVER_GONE: "the server is unreachable or went away"}
EXIT_UNREACHABLE = EXIT_SERVER_GONE

_PARSER: argparse.ArgumentParser | None = None


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    from oomguard.cli.common import add_target_options

    global _PARSER
    p = subparsers.add_parser(
        name,
        help=help_text,
        description="Watch a live vLLM server: GPU memory (NVML / nvidia-smi), /metrics (KV cache usage, "
        "running/waiting, preemptions), the server's RSS and kernel OOM-killer lines. Alerts when a "
        "threshold holds for --for; prints peaks and the step pattern of memory on exit. With --launch "
        "(or vLLM flags) it compares live usage with the plan.",
        epilog="examples:\n  oomguard watch --base-url http://127.0.0.1:8000 --duration 10m\n"
        "  oomguard watch --base-url http://gpu-box:8000 --alert-kv 0.9 --for 5m --format json > watch.json\n"
        "  oomguard watch --base-url http://127.0.0.1:8000 --launch start_api.sh --gpu A100-80GB",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument(
        "--base-url", required=True, metavar="URL", help="the server (http://host:port, with or without /v1)"
    )
    p.add_argument("--interval", default="1", metavar="S", help="seconds between samples (default 1)")
    p.add_argument("--duration", metavar="S", help="stop after this long (30, 90s, 5m, 1h); default: until Ctrl-C")
    p.add_argument(
        "--alert-kv", default="0.9", metavar="F", help="KV cache usage alert level, 0..1 or 'off' (default 0.9)"
    )
    p.add_argument(
        "--alert-gpu-mem",
        default="0.95",
        metavar="F",
        help="GPU memory used/total alert level, or 'off' (default 0.95)",
    )
    p.add_argument(
        "--for", dest="hold", default="60s", metavar="DUR", help="how long a threshold must hold (default 60s)"
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    p.add_argument("--launch", metavar="FILE", help="start_api.sh or --config YAML: compare live usage with its plan")
    p.add_argument(
        "--api-key-env", metavar="NAME", help="environment variable holding the API key (if /metrics needs it)"
    )
    p.add_argument(
        "--server-pid", type=int, metavar="PID", help="the API server's pid (default: whoever listens on the port)"
    )
    p.add_argument("--remote", action="store_true", help="the server is on another host: /metrics only")
    p.add_argument(
        "--gone-after",
        default="10s",
        metavar="DUR",
        help="a remote server is gone after /metrics fails this long (default 10s)",
    )
    add_target_options(p, positional=False)
    _PARSER = p


def _level(text: str, option: str) -> float | None:
    from oomguard.errors import InputError

    if str(text).lower() in ("off", "none", "no"):
        return None
    try:
        from oomguard.numbers import parse_float

        v = parse_float(str(text).rstrip("%")) / (100 if str(text).endswith("%") else 1)
    except ValueError:
        raise InputError(f"{option} {text!r} is not a number (0..1, e.g. 0.9) or 'off'") from None
    if not 0 < v <= 1:
        raise InputError(f"{option} {text!r}: give a fraction in (0, 1], e.g. 0.9")
    return v


def _config(args: argparse.Namespace):
    import os

    from oomguard.errors import InputError
    from oomguard.probe.client import normalize_base_url
    from oomguard.watch.config import WatchConfig, parse_duration

    interval = parse_duration(args.interval, option="interval")
    if interval < 0.05:
        raise InputError("--interval must be at least 0.05 s")
    duration = parse_duration(args.duration, option="duration") if args.duration else None
    if duration is not None and duration <= 0:
        raise InputError("--duration must be positive")
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if api_key is None:
            raise InputError(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    return WatchConfig(
        url=normalize_base_url(args.base_url),
        interval_s=interval,
        duration_s=duration,
        alert_kv=_level(args.alert_kv, "--alert-kv"),
        alert_gpu_mem=_level(args.alert_gpu_mem, "--alert-gpu-mem"),
        hold_s=parse_duration(args.hold, option="for"),
        api_key=api_key,
        server_pid=args.server_pid,
        local=False if args.remote else None,
        gone_after_s=parse_duration(args.gone_after, option="gone-after"),
    )


def _plan_reference(args: argparse.Namespace, gpu_names: list[str]):
    """The plan of --launch / vLLM flags, or (None, why not)."""
    from oomguard.cli.common import build_context
    from oomguard.errors import OomguardError
    from oomguard.watch.drift import PlanReference

    vllm_args = list(getattr(args, "unknown", None) or [])
    if not (args.launch or vllm_args or getattr(args, "launch_tail", None)):
        return None, None
    args.launch_file = args.launch
    ctx = build_context(args, vllm_args, need_gpu=False)  # a bad launch file is bad input: exit 2
    try:
        if ctx.gpu is None:
            if not gpu_names:
                return None, "plan comparison needs --gpu (no GPU visible here)"
            from oomguard.inputs.hardware import lookup_gpu

            ctx.gpu = lookup_gpu(gpu_names[0])
        plan = ctx.plan()
    except OomguardError as exc:
        return None, f"plan comparison unavailable: {exc}"
    ref = PlanReference.from_plan(plan)
    ref.notes += ctx.launch.report_notes()
    if not plan.starts:
        ref.notes.append(f"the plan predicts this launch does not start ({plan.error or plan.failure})")
    return ref, None


async def _run(config, args) -> object:
    import asyncio
    import signal

    from oomguard.watch.drift import DriftCheck
    from oomguard.watch.monitor import Monitor
    from oomguard.watch.sources import open_sources
    from oomguard.watch.view import EventsOnlyView, LineView, LiveView

    sources = open_sources(config)
    try:
        ref, why = _plan_reference(args, sources.gpu_names)
    except BaseException:
        for s in sources.samplers:
            await s.close()
        raise
    if why:
        print(f"note: {why}", file=sys.stderr)
    if args.format == "json":
        view = EventsOnlyView()
    elif sys.stdout.isatty() and not args.plain:
        view = LiveView()
    else:
        view = LineView()
    monitor = Monitor(config, sources, view, DriftCheck(ref) if ref else None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread / not Unix
            pass
    try:
        return await monitor.run(stop)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from oomguard.cli.common import check_model_option
    from oomguard.watch.monitor import EndReason
    from oomguard.watch.summary import summary_json, summary_text

    check_model_option(getattr(args, "og_model", None))

    config = _config(args)
    result = asyncio.run(_run(config, args))
    if args.format == "json":
        json.dump(summary_json(result), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n" + summary_text(result))
    sys.stdout.flush()
    if result.ended_by is EndReason.UNREACHABLE:
        return EXIT_UNREACHABLE
    if result.ended_by is EndReason.SERVER_GONE:
        return EXIT_SERVER_GONE
    if result.alerts_fired or result.state.oom_lines:
        return EXIT_ALERTS
    return EXIT_OK
