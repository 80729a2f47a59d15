"""``oomguard probe``: verify a live OpenAI-compatible server, then load it while watching memory.

Exit codes (cli/common.py): 0 pass, 1 fail (the class and evidence are printed), 2 bad input, 3 the server is unreachable.
The API key is read from the environment variable named by ``--api-key-env``
and never printed: every output (text, JSON, HTML) passes through one redactor.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS as EXIT_FAIL, EXIT_INCOMPLETE, EXIT_OK as EXIT_PASS  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_PASS: "passed", EXIT_FAIL: "failed (a memory or client failure)", EXIT_INCOMPLETE: "the server is unreachable (nothing could be probed)"}
# The longest any one bound may be: a day. A probe is a test run, and an unbounded one
# (``inf``) would never end; ``nan`` compares false with everything and would disable a bound.
MAX_SECONDS = 86400.0


def register(sub: Any, name: str, help_text: str) -> None:
    p = sub.add_parser(
        name,
        help=help_text,
        description="Stage 1 walks the client chain (URL, proxy, health, auth, model id, completion, chat, "
        "stream, error bodies). Stage 2 sends one prompt at max-model-len and concurrency steps up to the "
        "claimed concurrency, sampling GPU memory, /metrics, server RSS and kernel OOM lines, then gives a "
        "pass/fail verdict with the failure class.",
        epilog="examples:\n"
        "  oomguard probe --base-url http://127.0.0.1:8000 --max-model-len 8192 --concurrency 8\n"
        "  VLLM_KEY=... oomguard probe --base-url http://gpu01:8000/v1 --api-key-env VLLM_KEY --report probe.html\n"
        "  oomguard probe --base-url http://127.0.0.1:8000 --launch start_api.sh --gpu RTX-3090 --format json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    g = p.add_argument_group("server")
    g.add_argument("--base-url", required=True, metavar="URL", help="server root or its /v1 base")
    g.add_argument("--api-key-env", metavar="NAME", help="environment variable holding the API key")
    # vLLM's own name for the id the server answers to; --model means a model config in every command
    g.add_argument("--served-model-name", dest="served_model", metavar="ID",
                   help="the model id the server answers to (default: the first one /v1/models lists)")
    g.add_argument("--server-pid", type=int, metavar="PID", help="API server pid (default: found by port)")
    g.add_argument(
        "--local",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the server runs on this host: sample GPU, RSS and kernel log (default: judged from the URL)",
    )
    c = p.add_argument_group("claims and plan")
    c.add_argument("--launch", metavar="FILE", help="start_api.sh or --config YAML: claims and memory plan")
    c.add_argument("--max-model-len", type=int, metavar="N", help="claimed context (default: served max_model_len)")
    c.add_argument("--concurrency", type=int, metavar="C", help="claimed concurrency (default: --max-num-seqs of --launch, else 8)")
    c.add_argument("--gpu", metavar="NAME", help="GPU for the plan comparison, with --launch")
    c.add_argument("--gpu-memory-gib", type=float, metavar="X", help="GPU total for the plan comparison")
    c.add_argument("--model", dest="plan_model", metavar="PATH|HF_ID",
                   help="model config for the plan, as in plan/check/fit (default: the launch's model)")
    c.add_argument("--plan-model", dest="plan_model", help=argparse.SUPPRESS)  # the name before 0.2
    c.add_argument("--kv-cache-tokens", type=int, metavar="N", help="predicted KV pool in tokens (instead of a plan)")
    c.add_argument("--block-size", type=int, default=16, metavar="N", help="KV block size for --kv-cache-tokens (default 16)")
    w = p.add_argument_group("workload and bounds")
    w.add_argument("--output-tokens", type=int, default=16, metavar="N", help="output budget per request (default 16)")
    w.add_argument("--prompt-tokens", type=int, metavar="N", help="prompt length in concurrency stages (default: max-model-len minus output)")
    w.add_argument("--waves", type=int, default=1, metavar="N", help="requests per concurrency step = C x N (default 1)")
    w.add_argument("--find-limit", action="store_true", help="keep raising concurrency past the claim until something fails")
    w.add_argument("--duration", type=float, default=600.0, metavar="S", help="hard bound on the whole run (default 600)")
    w.add_argument("--max-requests", type=int, default=200, metavar="N", help="hard bound on stage-2 requests (default 200)")
    w.add_argument("--request-timeout", type=float, metavar="S", help="bound per request (default: --duration)")
    w.add_argument("--stall-timeout", type=float, default=300.0, metavar="S", help="longest wait for the next stream bytes (default 300)")
    w.add_argument("--timeout", type=float, default=30.0, metavar="S", help="bound per stage-1 call (default 30)")
    w.add_argument("--connect-timeout", type=float, default=5.0, metavar="S", help="TCP/TLS connect bound (default 5)")
    w.add_argument(
        "--http-transport",
        choices=["auto", "httpx", "aiohttp"],
        default="auto",
        help="stage 2's HTTP stack: aiohttp (via httpx-aiohttp, httpx-aiohttp, installed with oomguard) costs about half the CPU "
        "per request; auto uses it when installed (default auto)",
    )
    w.add_argument("--sample-interval", type=float, default=1.0, metavar="S", help="memory sampling period (default 1)")
    v = p.add_argument_group("verdict")
    v.add_argument("--max-gpu-mem-gib", type=float, metavar="X", help="GPU memory limit per GPU (default: total minus margin)")
    v.add_argument("--gpu-margin-gib", type=float, default=1.0, metavar="X", help="margin below the card total (default 1)")
    v.add_argument("--max-preemptions", type=int, metavar="N", help="preemptions tolerated (default: max(2, 10%% of requests))")
    o = p.add_argument_group("output")
    c.add_argument(
        "--server-log",
        metavar="FILE",
        help="the server's log: after the load, oomguard diagnose reads it and its verdict goes into the report "
        "(the root error behind an engine crash)",
    )
    o.add_argument("--format", choices=["text", "json"], default="text", help="stdout format (default text)")
    o.add_argument("--report", metavar="FILE.html", help="also write a self-contained HTML report")
    o.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _positive(name: str, value: float | int | None, *, zero_ok: bool = False, most: float | None = None) -> None:
    import math

    from oomguard.errors import InputError

    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{name} must be a finite number, got {value}")
    if value < 0 or (value == 0 and not zero_ok):
        raise InputError(f"{name} must be {'non-negative' if zero_ok else 'positive'}, got {value}")
    if most is not None and value > most:
        raise InputError(f"{name} must be at most {most:g}, got {value:g}")


def _readable(path: str) -> None:
    """Fail before the load, not after it, when --server-log cannot be read."""
    import stat

    from oomguard.errors import InputError

    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"--server-log: cannot read: {exc.strerror}", file=path) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError("--server-log: not a regular file", file=path)
    if not os.access(path, os.R_OK):
        raise InputError("--server-log: permission denied", file=path)


def _api_key(name: str | None) -> str | None:
    from oomguard.errors import InputError

    if not name:
        return None
    value = os.environ.get(name)
    if value is None:
        raise InputError(f"--api-key-env {name}: that environment variable is not set")
    if value == "":
        raise InputError(f"--api-key-env {name}: that environment variable is empty")
    return value


def _launch_claims(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """Read --launch; return (launch, claims) where claims hold max_model_len, concurrency, model."""
    if not args.launch:
        return None, {}
    from oomguard.inputs.reader import read_launch

    launch = read_launch(args.launch)
    claims: dict[str, Any] = {}
    if launch.get("max_model_len"):
        claims["max_model_len"] = int(launch.get("max_model_len"))
    if launch.is_set("max_num_seqs"):
        claims["concurrency"] = int(launch.get("max_num_seqs"))
    served = launch.get("served_model_name")
    if isinstance(served, (list, tuple)) and served:
        served = served[0]
    if isinstance(served, str):
        claims["model"] = served
    return launch, claims


def _plan_numbers(args: argparse.Namespace, launch: Any, notes: list[str]) -> Any:
    from oomguard.probe.verdict import PlanNumbers

    if args.kv_cache_tokens:
        return PlanNumbers(args.kv_cache_tokens, None, args.block_size, "--kv-cache-tokens")
    if launch is None:
        if args.plan_model:
            notes.append("no plan comparison: --model is planned with the flags of --launch and --gpu")
        return None
    if not (args.gpu or args.gpu_memory_gib):
        notes.append("no plan comparison: give --gpu NAME (or --gpu-memory-gib) with --launch")
        return None
    from oomguard.inputs.hardware import lookup_gpu
    from oomguard.inputs.model_config import load_model
    from oomguard.model.planner import plan_launch

    spec = args.plan_model or launch.model
    if not spec:
        notes.append("no plan comparison: the launch names no model (use --model)")
        return None
    plan = plan_launch(load_model(spec), lookup_gpu(args.gpu, args.gpu_memory_gib), launch.flags, launch.env, version=launch.version)
    if not plan.starts:
        notes.append(f"the plan predicts this launch does not start ({plan.failure}): {plan.error}")
    return PlanNumbers(plan.kv_cache_tokens, plan.max_concurrency, plan.block_size, f"oomguard plan of {args.launch}", plan.num_gpu_blocks)


class _RichProgress:
    """A transient progress bar on stderr; only on a terminal."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=True,
        )
        self._task = None

    def __enter__(self) -> _RichProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def message(self, text: str) -> None:
        if self._task is None:
            self._task = self._bar.add_task(text, total=None)

    def stage(self, stage: Any, index: int, total: int) -> None:
        desc = f"stage {index + 1}/{total} {stage.name} ({stage.prompt_tokens:,} tok x {stage.concurrency})"
        if self._task is not None:
            self._bar.remove_task(self._task)
        self._task = self._bar.add_task(desc, total=stage.num_requests)

    def request_done(self, record: Any) -> None:
        if self._task is not None:
            self._bar.advance(self._task)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    from contextlib import nullcontext

    from oomguard.probe.client import Redactor, normalize_base_url
    from oomguard.probe.report_html import render_html
    from oomguard.probe.report_text import render_text
    from oomguard.probe.result import build_result
    from oomguard.probe.runner import ProbeConfig, probe
    from oomguard.probe.schedule import Bounds
    from oomguard.probe.verdict import Limits, decide
    from oomguard.redact import safe_terminal_text
    from oomguard.units import GiB

    for name in ("max_model_len", "concurrency", "output_tokens", "prompt_tokens", "waves", "max_requests", "kv_cache_tokens", "block_size"):
        _positive("--" + name.replace("_", "-"), getattr(args, name))
    for name in ("duration", "request_timeout", "stall_timeout", "timeout", "connect_timeout", "sample_interval"):
        _positive("--" + name.replace("_", "-"), getattr(args, name), most=MAX_SECONDS)
    for name in ("max_gpu_mem_gib", "gpu_memory_gib"):
        _positive("--" + name.replace("_", "-"), getattr(args, name), most=1e6)
    _positive("--gpu-margin-gib", args.gpu_margin_gib, zero_ok=True, most=1e6)
    _positive("--max-preemptions", args.max_preemptions, zero_ok=True)

    if args.http_transport == "aiohttp":
        import importlib.util

        if importlib.util.find_spec("httpx_aiohttp") is None:
            from oomguard.errors import InputError

            raise InputError("--http-transport aiohttp needs httpx-aiohttp: pip install httpx-aiohttp (an oomguard dependency)")
    url = normalize_base_url(args.base_url)
    from oomguard.cli.common import check_model_option

    check_model_option(args.plan_model, hint=(
        f"; if {args.plan_model!r} is the id the server answers to, that is --served-model-name "
        f"{args.plan_model} (--model is a model config, as in plan/check/fit)") if args.plan_model else "")
    api_key = _api_key(args.api_key_env)
    if args.server_log:
        _readable(args.server_log)
    launch, claims = _launch_claims(args)
    notes: list[str] = []
    plan = _plan_numbers(args, launch, notes)
    secrets = [api_key] if api_key else []
    if launch is not None:  # keys written in the launch script are secrets too
        keys = launch.get("api_key")
        secrets += [keys] if isinstance(keys, str) else [k for k in (keys or []) if isinstance(k, str)]
        if launch.env.get("VLLM_API_KEY"):
            secrets.append(launch.env["VLLM_API_KEY"])
    redact = Redactor(secrets)

    config = ProbeConfig(
        url=url,
        api_key=api_key,
        model=args.served_model or claims.get("model"),
        max_model_len=args.max_model_len or claims.get("max_model_len"),
        concurrency=args.concurrency or claims.get("concurrency") or 8,
        output_tokens=args.output_tokens,
        prompt_tokens=args.prompt_tokens,
        waves=args.waves,
        find_limit=args.find_limit,
        bounds=Bounds(
            duration_s=args.duration,
            max_requests=args.max_requests,
            request_timeout_s=args.request_timeout or args.duration,
            sample_interval_s=args.sample_interval,
        ),
        connect_timeout_s=args.connect_timeout,
        chain_timeout_s=args.timeout,
        stall_timeout_s=args.stall_timeout,
        local=args.local,
        server_pid=args.server_pid,
        http_transport=args.http_transport,
    )
    limits = Limits(
        max_gpu_mem_bytes=int(args.max_gpu_mem_gib * GiB) if args.max_gpu_mem_gib else None,
        gpu_margin_bytes=int(args.gpu_margin_gib * GiB),
        max_preemptions=args.max_preemptions,
    )
    show_progress = not args.no_progress and sys.stderr.isatty()
    progress = _RichProgress() if show_progress else None
    with progress if progress is not None else nullcontext():
        run_result = asyncio.run(probe(config, progress=progress))
    verdict = decide(run_result, limits)
    verdict.notes.extend(notes)
    server_log = None
    if args.server_log:
        from oomguard.probe.postmortem import diagnose_log, merge

        server_log = diagnose_log(args.server_log)
        verdict = merge(verdict, server_log)
    result = build_result(run_result, verdict, limits, plan, redact, server_log=server_log)
    if args.report:
        from oomguard.inputs.writes import write_text

        # the result is already redacted and stripped of control characters (build_result)
        write_text(args.report, render_html(result), what="the report")
    # The result is redacted and stripped of control characters as a structure (build_result);
    # nothing searches the serialized text, which an escaped quote would break.
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(result, color=sys.stdout.isatty()))
        if args.report:
            sys.stdout.write(f"report: {safe_terminal_text(redact(args.report))}\n")
    if verdict.cls is not None and verdict.cls.value == "unreachable":
        return EXIT_INCOMPLETE  # nothing could be probed: "could not complete", as watch says of it
    return EXIT_PASS if verdict.passed else EXIT_FAIL
