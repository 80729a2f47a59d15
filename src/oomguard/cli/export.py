"""``oomguard export``: alert rules and dashboards, and the launch frozen into a service definition.

    oomguard export alerts [--vllm-version V] [--format prometheus|grafana] [--gpu-exporter dcgm|nvidia-smi]
    oomguard export launch start_api.sh --to systemd|docker|compose|kubernetes|env|yaml [--fix]
    oomguard export launch --to docker -- vllm serve MODEL --max-model-len 8192

The output goes to stdout (or ``-o FILE``); notes (moved secrets, container
caveats) go to stderr. Every exported launch is read back with oomguard's own
launch readers before it is printed; a mismatch is reported, never printed.

Exit codes: 0 written, 2 bad input, 3 the export did not read back to the same flags.
"""

from __future__ import annotations

import argparse
import sys

from oomguard.cli import common

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NOT_VERIFIED = 3


def _duration(text: str) -> str:
    import re

    if not re.fullmatch(r"(\d+(ms|s|m|h|d|w|y))+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Prometheus duration (e.g. 90s, 5m, 1h)")
    return text


def _fraction(text: str) -> float:
    try:
        v = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a fraction in (0, 1], e.g. 0.9 or 90%")
    return v


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    p = subparsers.add_parser(
        name,
        help=help_text,
        description="Export Prometheus alert rules and a Grafana dashboard for a vLLM version, "
        "or a checked launch as a systemd unit, docker run line, compose service, Kubernetes "
        "Deployment, env file or vLLM --config YAML.",
    )
    sub = p.add_subparsers(dest="what", metavar="WHAT")
    sub.required = True

    a = sub.add_parser("alerts", help="Prometheus alerting rules or a Grafana dashboard")
    a.add_argument(
        "--vllm-version", metavar="V", help="vLLM release the server runs (metric names changed in 0.9.2/0.11)"
    )
    a.add_argument("--format", choices=("prometheus", "grafana"), default="prometheus")
    a.add_argument(
        "--gpu-exporter",
        choices=("dcgm", "nvidia-smi"),
        default="dcgm",
        help="where GPU memory comes from: NVIDIA DCGM exporter (DCGM_FI_DEV_FB_USED/FREE, default) "
        "or nvidia_gpu_exporter (nvidia_smi_memory_used_bytes/total_bytes)",
    )
    a.add_argument("--job", default="vllm", help="Prometheus job name of the vLLM scrape (for the server-down rule)")
    a.add_argument(
        "--kv-threshold", type=_fraction, default=0.9, metavar="F", help="KV cache usage alert level (default 0.9)"
    )
    a.add_argument("--kv-for", type=_duration, default="5m", metavar="DUR", help="how long it must hold (default 5m)")
    a.add_argument(
        "--gpu-mem-threshold", type=_fraction, default=0.95, metavar="F", help="GPU memory alert level (default 0.95)"
    )
    a.add_argument("--gpu-mem-for", type=_duration, default="5m", metavar="DUR")
    a.add_argument("--no-host-oom", action="store_true", help="leave out the node_exporter OOM-kill rule")
    a.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    lp = sub.add_parser("launch", help="the launch as a service definition")
    lp.add_argument(
        "launch_file", nargs="?", metavar="TARGET", help="start_api.sh or a vLLM --config YAML (or a command after --)"
    )
    lp.add_argument("--to", required=True, choices=("systemd", "docker", "compose", "kubernetes", "env", "yaml"))
    lp.add_argument("--fix", action="store_true", help="apply `oomguard check`'s fixes before exporting")
    lp.add_argument("--vllm-version", type=common.vllm_version, metavar="V", help="vLLM release (flag spellings, image tag)")
    lp.add_argument("--name", default="vllm", help="service / container / Deployment name")
    lp.add_argument("--image", help="container image (default vllm/vllm-openai:v<version>)")
    lp.add_argument("--vllm-bin", default="/usr/local/bin/vllm", help="vllm executable for systemd's ExecStart")
    lp.add_argument("--shm-size", type=common.k8s_quantity, default="16Gi", help="Kubernetes /dev/shm size (default 16Gi)")
    lp.add_argument(
        "--model",
        dest="og_model",
        metavar="PATH|HF_ID",
        help="model config for --fix (when the launch's path is not here)",
    )
    lp.add_argument("--gpu", metavar="NAME", help="GPU for --fix")
    lp.add_argument("--num-gpus", type=common.GPU_COUNT, metavar="N", help="GPUs for --fix")
    lp.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    if args.what == "alerts":
        return _alerts(args)
    return _launch(args)


def _write(text: str, output: str | None) -> None:
    from oomguard.inputs.writes import write_text

    if not output:
        sys.stdout.write(text)
        return
    write_text(output, text)
    print(f"wrote {output}", file=sys.stderr)


def _alerts(args: argparse.Namespace) -> int:
    from oomguard.export.alerts import AlertSettings, render_prometheus
    from oomguard.export.names import GpuExporter

    if args.vllm_version:
        _check_version(args.vllm_version)
    settings = AlertSettings(
        vllm_version=args.vllm_version,
        job=args.job,
        gpu_exporter=GpuExporter(args.gpu_exporter),
        kv_threshold=args.kv_threshold,
        kv_for=args.kv_for,
        gpu_mem_threshold=args.gpu_mem_threshold,
        gpu_mem_for=args.gpu_mem_for,
        host_oom=not args.no_host_oom,
    )
    if args.format == "grafana":
        from oomguard.export.grafana import render_grafana

        text = render_grafana(settings)
    else:
        text = render_prometheus(settings)
    _write(text, args.output)
    return EXIT_OK


def _check_version(version: str) -> None:
    from oomguard.errors import InputError
    from oomguard.model.engine import parse_version

    if parse_version(version) == (0, 0, 0):
        raise InputError(f"--vllm-version {version!r} is not a version (e.g. 0.10.2)")


def _read_target(args: argparse.Namespace):
    from oomguard.errors import InputError
    from oomguard.inputs.reader import read_command, read_launch

    tail = getattr(args, "launch_tail", None) or []
    # with --fix, check reads the launch and respells what this release no longer accepts
    lenient = bool(getattr(args, "fix", False))
    if args.launch_file:
        return read_launch(args.launch_file, version=args.vllm_version, lenient=lenient)
    if tail:
        return read_command(tail, version=args.vllm_version, lenient=lenient)
    raise InputError("export launch: give a launch file (start_api.sh, --config YAML) or a command after --")


def _apply_fix(args: argparse.Namespace, launch):
    """Run `oomguard check --format json` in-process and take its corrected launch."""
    import contextlib
    import importlib
    import io
    import json

    from oomguard.errors import InputError
    from oomguard.inputs.reader import read_command

    try:
        importlib.import_module("oomguard.cli.check")
    except ModuleNotFoundError:
        raise InputError("--fix needs `oomguard check`, which this build does not include") from None
    from oomguard.cli.main import main

    argv = ["check", "--format", "json"]
    if args.launch_file:
        argv.insert(1, args.launch_file)
    for opt, value in (
        ("--model", args.og_model),
        ("--gpu", args.gpu),
        ("--num-gpus", args.num_gpus),
        ("--vllm-version", args.vllm_version),
    ):
        if value is not None:
            argv += [opt, str(value)]
    tail = getattr(args, "launch_tail", None) or []
    if tail:
        argv += ["--", *tail]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(argv)
    try:
        report = json.loads(out.getvalue())
    except ValueError:
        msg = err.getvalue().strip().splitlines()
        raise InputError("--fix: oomguard check failed: " + (msg[-1] if msg else "no JSON output")) from None
    if report.get("complete") is False:
        # exporting "as given" here would freeze a launch nobody checked into a unit file
        cov = next((f for f in report.get("findings", []) if f.get("rule") == "OG001"), {})
        nums = cov.get("numbers") or {}
        what = " and ".join(nums.get("pass") or []) or "what the check needs"
        raise InputError(
            f"--fix: check could not run its memory rules ({'; '.join(nums.get('reasons') or [])}); "
            f"pass {what}, or export without --fix"
        )
    fixed = report.get("fixed_command")
    errors = [f for f in report.get("findings", []) if f.get("severity") == "error"]
    if not fixed:
        if errors:
            print(f"note: check found {len(errors)} error(s) but no automatic fix; exporting as given", file=sys.stderr)
        return launch
    if launch.kind in ("command", "flags") or not launch.path:
        fixed_launch = read_command([fixed], version=args.vllm_version or launch.version)
    else:
        # the corrected launch is in the input's own format (a script, a --config YAML, a manifest)
        from oomguard.inputs.reader import launches_from_text

        again = launches_from_text(fixed, path=launch.path, version=args.vllm_version)
        fixed_launch = next((x for x in again if x.name == launch.name), again[0])
    for k, v in launch.env.items():
        fixed_launch.env.setdefault(k, v)
    changed = sorted(
        k for k in set(launch.flags) | set(fixed_launch.flags) if launch.flags.get(k) != fixed_launch.flags.get(k)
    )
    print(f"note: --fix applied check's corrected launch (changed: {', '.join(changed) or 'nothing'})", file=sys.stderr)
    return fixed_launch


def _verify(text: str, target, launch, version: str | None) -> list[str]:
    """Read the export back with oomguard's own readers; what differs from the launch."""
    from oomguard.errors import OomguardError
    from oomguard.export.launch import Target
    from oomguard.export.launch import moved_secret_flags, placeholder_text
    from oomguard.export.readback import differences, expected_flags, read_back

    # Flags whose JSON held a credential are references to the environment now: read back
    # with a placeholder in their place, and compared without them.
    moved = moved_secret_flags(launch.flags)
    try:
        model, flags, _env = read_back(placeholder_text(text, target, moved), target, version=version)
    except (OomguardError, ValueError) as exc:
        return [f"reading it back failed: {exc}"]
    except Exception as exc:  # noqa: BLE001 - a reader's own error (e.g. YAML) is a failed read-back, not a crash
        return [f"reading it back failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"]
    if target is Target.ENV:
        return []
    for dest, name in moved.items():
        flags.pop(dest, None)
        if name not in text:
            return [f"--{dest.replace('_', '-')}: the reference to {name} is missing from the export"]
    expected = {k: v for k, v in launch.flags.items() if k not in moved}
    problems = differences(expected_flags(expected, version=version), flags)
    if model != launch.model:
        problems.append(f"model: exported {launch.model!r}, read back {model!r}")
    return problems


def _launch(args: argparse.Namespace) -> int:
    from oomguard.export.launch import ExportOptions, Target, render_launch

    launch = _read_target(args)
    if args.fix:
        launch = _apply_fix(args, launch)
    if not launch.model:
        from oomguard.errors import InputError

        raise InputError("the launch names no model (vllm serve MODEL)", file=launch.path)
    version = args.vllm_version or launch.version
    target = Target(args.to)
    from oomguard.export.launch import check_name

    check_name(args.name, target)
    opts = ExportOptions(
        vllm_version=version,
        name=args.name,
        image=args.image,
        vllm_bin=args.vllm_bin,
        shm_size=args.shm_size,
        source=args.launch_file,
    )
    rendered = render_launch(launch, target, opts)
    for note in launch.report_notes():
        print(f"note: {note}", file=sys.stderr)
    problems = _verify(rendered.text, target, launch, version)
    if problems:
        print(
            "oomguard export: error: the exported launch does not read back to the same flags "
            "(please report this):\n  " + "\n  ".join(problems),
            file=sys.stderr,
        )
        return EXIT_NOT_VERIFIED
    for note in rendered.notes:
        print(f"note: {note}", file=sys.stderr)
    _write(rendered.text, args.output)
    return EXIT_OK
