"""``oomguard export``: alert rules and dashboards, and the launch frozen into a service definition.

    oomguard export alerts [--vllm-version V] [--format prometheus|grafana] [--gpu-exporter dcgm|nvidia-smi]
    oomguard export launch start_api.sh --to systemd|docker|compose|kubernetes|env|yaml [--fix]
    oomguard export launch --to docker -- vllm serve MODEL --max-model-len 8192

The output goes to stdout (or ``-o FILE``); notes (moved secrets, container
caveats) go to stderr. Every exported launch is read back with oomguard's own
launch readers before it is printed; a mismatch is reported, never printed.

Secrets never appear in what is printed or exported: they move to the env file /
Kubernetes Secret the export references, and their values are written only with
``--secrets-file FILE`` (or ``--to env -o FILE``), mode 0600.

Exit codes: 0 written, 2 bad input, 3 the export did not read back to the same flags.
"""

from __future__ import annotations

import argparse
import sys

from oomguard.cli import common

from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_INCOMPLETE as EXIT_NOT_VERIFIED, EXIT_OK  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_OK: "written", EXIT_NOT_VERIFIED: "written but not verified (promtool missing or refused it)"}


def _duration(text: str) -> str:
    import re

    if not re.fullmatch(r"(\d+(ms|s|m|h|d|w|y))+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Prometheus duration (e.g. 90s, 5m, 1h)")
    return text


def _fraction(text: str) -> float:
    try:
        from oomguard.numbers import parse_float

        v = parse_float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
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
        "--vllm-version", type=common.vllm_version, metavar="V",
        help="vLLM release the server runs (metric names changed in 0.9.2/0.11)",
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
        "--kv-threshold", type=_fraction, default=None, metavar="F",
        help="KV cache usage alert level (default 0.9; with --launch: from the plan)",
    )
    a.add_argument("--kv-for", type=_duration, default="5m", metavar="DUR", help="how long it must hold (default 5m)")
    a.add_argument(
        "--gpu-mem-threshold", type=_fraction, default=None, metavar="F",
        help="GPU memory alert level (default 0.95; with --launch: what the launch is expected to hold, plus half the rest)",
    )
    a.add_argument("--gpu-mem-for", type=_duration, default="5m", metavar="DUR")
    a.add_argument("--no-host-oom", action="store_true", help="leave out the node_exporter OOM-kill rule")
    a.add_argument("--no-kube-oom", action="store_true", help="leave out the kube-state-metrics OOMKilled rule")
    a.add_argument("--container", default="vllm", help="container name for the OOMKilled rule (export launch --name)")
    a.add_argument("--launch", metavar="FILE", dest="launch_file",
                   help="size the thresholds from this launch's plan (start_api.sh, --config YAML, manifest, unit)")
    a.add_argument("--model", dest="og_model", metavar="PATH|HF_ID", help="model config for the plan")
    a.add_argument("--gpu", metavar="NAME", help="GPU for the plan, e.g. A100-80GB")
    a.add_argument("--num-gpus", type=common.GPU_COUNT, metavar="N", help="GPUs for the plan")
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
    lp.add_argument("--shm-size", type=common.k8s_quantity, default=None,
                    help="Kubernetes /dev/shm size (default: the CPU KV tier's file + 1 GiB from the plan, at least 16Gi)")
    lp.add_argument("--user", default="vllm", help="systemd User= the server runs as (default vllm)")
    lp.add_argument("--secrets-file", metavar="FILE",
                    help="write the launch's secrets (API key, tokens, passwords, URLs with credentials) here, mode 0600; "
                    "the export references them and never holds the values")
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
    common.check_model_option(getattr(args, "og_model", None))
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

    given = {k: v for k, v in (("kv_threshold", args.kv_threshold), ("gpu_mem_threshold", args.gpu_mem_threshold))
             if v is not None}
    version = args.vllm_version
    plan = None
    tail = getattr(args, "launch_tail", None) or []
    if args.launch_file or tail:
        plan, version, source = _alert_plan(args, tail)
    settings = AlertSettings(
        vllm_version=version,
        job=args.job,
        gpu_exporter=GpuExporter(args.gpu_exporter),
        kv_for=args.kv_for,
        gpu_mem_for=args.gpu_mem_for,
        host_oom=not args.no_host_oom,
        kube_oom=not args.no_kube_oom,
        container=args.container,
        **given,
    )
    if plan is not None:
        from oomguard.export.alert_plan import settings_from_plan

        settings = settings_from_plan(plan, settings, source=source, explicit=frozenset(given))
    if args.format == "grafana":
        from oomguard.export.grafana import render_grafana

        text = render_grafana(settings)
    else:
        text = render_prometheus(settings)
    _write(text, args.output)
    return EXIT_OK


def _weights_bytes(args: argparse.Namespace, launch) -> int | None:
    """The checkpoint's bytes from the plan (for the start timeout), when --gpu makes a plan possible."""
    from oomguard.errors import OomguardError
    from oomguard.units import GiB

    ns = argparse.Namespace(og_model=args.og_model, gpu=args.gpu, gpu_memory_gib=None, other_gpu_use_gib=0.0,
                            vllm_version=args.vllm_version, num_gpus=args.num_gpus, usage="serve", engine_python=None)
    try:
        plan = common.context_for(ns, launch).plan().to_dict()
    except OomguardError as exc:
        print(f"note: no plan for the start timeout ({exc})", file=sys.stderr)
        return None
    stages = plan.get("per_stage") or []
    tp = int(plan.get("tensor_parallel_size") or 1)
    total = sum(float(st.get("weights_gib") or 0) for st in stages) * tp
    return int(total * GiB) or None


def _alert_plan(args: argparse.Namespace, tail: list[str]):
    """(plan dict, vLLM version, what it is the plan of) for ``export alerts --launch``."""
    from oomguard.errors import InputError
    from oomguard.inputs.files import display
    from oomguard.inputs.reader import read_command, read_launch

    if not args.gpu:
        raise InputError("--launch: the plan needs --gpu (the card the launch runs on)")
    launch = (read_launch(args.launch_file, version=args.vllm_version) if args.launch_file
              else read_command(tail, version=args.vllm_version))
    ns = argparse.Namespace(og_model=args.og_model, gpu=args.gpu, gpu_memory_gib=None, other_gpu_use_gib=0.0,
                            vllm_version=args.vllm_version, num_gpus=args.num_gpus, usage="serve", engine_python=None)
    ctx = common.context_for(ns, launch)
    plan = ctx.plan().to_dict()
    if plan.get("starts") is False:
        print(f"note: the plan says this launch does not start ({plan.get('failure')}): the thresholds assume it does",
              file=sys.stderr)
    where = display(args.launch_file) if args.launch_file else "the command after --"
    gpu = plan.get("gpu") or {}
    gpus = f"{gpu.get('count') or ''}x {gpu.get('name') or args.gpu}".lstrip("x ")
    return plan, ctx.version or plan.get("vllm_version"), f"the plan of {where} on {gpus}"


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
    """Run `oomguard check --format json` in-process and take its corrected launch.

    Returns ``(launch, errors_left)``: the corrected launch and how many error findings check
    could not fix (the header says so).
    """
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
        return launch, len(errors)
    # The JSON report is redacted: a secret in the launch reads "***" in fixed_command. Take the
    # corrected flags from it and the secret values from the launch as read.
    if launch.kind in ("command", "flags") or not launch.path:
        fixed_launch = read_command([fixed], version=args.vllm_version or launch.version)
    else:
        # the corrected launch is in the input's own format (a script, a --config YAML, a manifest)
        from oomguard.inputs.reader import launches_from_text

        again = launches_from_text(fixed, path=launch.path, version=args.vllm_version)
        fixed_launch = next((x for x in again if x.name == launch.name), again[0])
    for k, v in launch.env.items():
        fixed_launch.env.setdefault(k, v)
    for k, v in launch.secret_env.items():
        fixed_launch.secret_env.setdefault(k, v)
    from oomguard.redact import MASK

    for mapping, original in ((fixed_launch.flags, launch.flags), (fixed_launch.env, launch.env)):
        for k, v in list(mapping.items()):
            if k in original:
                mapping[k] = _unmask(v, original[k], MASK)
    changed = sorted(
        k for k in set(launch.flags) | set(fixed_launch.flags) if launch.flags.get(k) != fixed_launch.flags.get(k)
    )
    print(f"note: --fix applied check's corrected launch (changed: {', '.join(changed) or 'nothing'})", file=sys.stderr)
    errors_left = len([f for f in errors if not f.get("fix")])
    return fixed_launch, errors_left


def _unmask(fixed, original, mask: str):
    """``fixed`` (from check's redacted report) with each masked part taken from ``original``."""
    if isinstance(fixed, str) and mask in fixed:
        return original
    if isinstance(fixed, dict) and isinstance(original, dict):
        return {k: _unmask(v, original[k], mask) if k in original else v for k, v in fixed.items()}
    if isinstance(fixed, list) and isinstance(original, list) and len(fixed) == len(original):
        return [_unmask(a, b, mask) for a, b in zip(fixed, original)]
    return fixed


def _verify(rendered, target, launch, version: str | None) -> list[str]:
    """Read the export back with the target's grammar and oomguard's readers; what differs."""
    from oomguard.export.readback import verify

    return verify(rendered, target, launch, version)


def _refuse_invalid_values(launch, version: str | None) -> None:
    """The values vLLM rejects (the table `check` uses): an export of them would never start."""
    from oomguard.check.context import invalid_values
    from oomguard.errors import InputError
    from oomguard.model.engine import parse_version
    from oomguard.versions import get_release

    bad = invalid_values(dict(launch.flags), parse_version(get_release(version).version))
    if bad:
        dest, value, why = bad[0]
        site = launch.sites.get(dest)
        opt = site.option if site else "--" + dest.replace("_", "-")
        raise InputError(f"{opt} {value}: {why} (vLLM rejects it)", file=site.file if site else launch.path,
                         line=site.line if site else None)


def _write_secrets(path: str, rendered) -> None:
    from oomguard.export.launch import env_file_lines
    from oomguard.inputs.writes import write_text

    lines, _ = env_file_lines({}, rendered.secrets, with_values=True)
    body = ["# secrets of the exported vLLM launch: keep this file mode 0600, out of version control", *lines]
    write_text(path, "\n".join(body) + "\n", mode=0o600, what="the secrets file")


def _launch(args: argparse.Namespace) -> int:
    from oomguard.errors import InputError
    from oomguard.export.launch import ExportOptions, Target, check_name, render_env, render_launch

    launch = _read_target(args)
    errors_left = 0
    if args.fix:
        launch, errors_left = _apply_fix(args, launch)
    if not launch.model:
        raise InputError("the launch names no model (vllm serve MODEL)", file=launch.path)
    version = args.vllm_version or launch.version
    _refuse_invalid_values(launch, version)
    target = Target(args.to)
    check_name(args.name, target)
    if args.secrets_file and args.output and args.secrets_file == args.output:
        raise InputError("--secrets-file and -o name the same file")
    opts = ExportOptions(
        vllm_version=version,
        name=args.name,
        image=args.image,
        vllm_bin=args.vllm_bin,
        shm_size=args.shm_size,
        source=args.launch_file,
        checked=bool(args.fix),
        secrets_file=args.secrets_file or (args.output if target is Target.ENV else None),
        user=args.user,
    )
    weights = _weights_bytes(args, launch) if args.gpu else None
    if weights:
        from dataclasses import replace

        from oomguard.export.resources import resources_for

        opts = replace(opts, resources=resources_for(launch, version, weights_bytes=weights))
    with_values = target is Target.ENV and bool(args.output)
    if target is Target.ENV:
        rendered = render_env(launch, opts, with_values=with_values)
    else:
        rendered = render_launch(launch, target, opts)
    if args.fix and errors_left:
        rendered.notes.append(f"check found {errors_left} error(s) it could not fix: see `oomguard check`")
    for note in launch.report_notes():
        print(f"note: {note}", file=sys.stderr)
    problems = _verify(rendered, target, launch, version)
    if problems:
        print(
            "oomguard export: error: the exported launch does not read back to what was meant "
            "(please report this):\n  " + "\n  ".join(problems),
            file=sys.stderr,
        )
        return EXIT_NOT_VERIFIED
    # Notes are oomguard's own sentences (names, never values); a launch's secret that reappears in
    # one anyway (a file name, an echoed value) is masked literally, without the prose patterns.
    known = sorted((v for v in rendered.secrets.values() if v and len(v) >= 4), key=len, reverse=True)
    for note in rendered.notes:
        for value in known:
            note = note.replace(value, "***")
        print(f"note: {note}", file=sys.stderr)
    if with_values:
        from oomguard.inputs.writes import write_text

        mode = 0o600 if rendered.secrets else None
        write_text(args.output, rendered.text, mode=mode)
        print(f"wrote {args.output}" + (" (mode 0600: it holds the secrets)" if mode else ""), file=sys.stderr)
        return EXIT_OK
    if args.secrets_file and rendered.secrets:
        _write_secrets(args.secrets_file, rendered)
        print(f"wrote {args.secrets_file} (mode 0600)", file=sys.stderr)
    elif args.secrets_file:
        print(f"note: the launch has no secrets: {args.secrets_file} not written", file=sys.stderr)
    _write(rendered.text, args.output)
    return EXIT_OK
