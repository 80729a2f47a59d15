"""``oomguard host``: check the machine around the GPUs (RAM, kernel settings, topology).

Exit codes: 0 no error findings, 1 error findings, 2 bad input. Nothing on the
host is changed; every fix is printed for the operator.
"""

from __future__ import annotations

import argparse
import sys

from oomguard.cli import common

from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_OK  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_OK: "no error finding", EXIT_FINDINGS: "error findings"}


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    p = subparsers.add_parser(
        name,
        help=help_text,
        description="Check host RAM, cgroup limits, kernel settings, /dev/shm, open files, NUMA and GPU "
        "topology, and GPU processes on the machine that will run vLLM. With --launch, compare the host RAM "
        "the launch needs against what the machine and its cgroup allow. Changes nothing.",
    )
    p.add_argument("--root", default="/", metavar="DIR", help="read /proc, /sys and /dev under DIR (default /)")
    p.add_argument("--launch", metavar="FILE", help="a launch script or --config YAML (or give the command after --)")
    p.add_argument("--topo", metavar="FILE", help="output of `nvidia-smi topo -m` (default: run it when present)")
    p.add_argument(
        "--nvidia-smi",
        dest="nvidia_smi",
        metavar="FILE",
        help="CSV of `nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used --format=csv` "
        "followed by `--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv`",
    )
    p.add_argument("--vllm-version", type=common.vllm_version, metavar="V", help="vLLM version of the launch (defaults follow it)")
    p.add_argument("--host-ram-gib", type=common.host_gib_or_auto, metavar="X|auto",
                   help="host RAM of the machine the launch is for, in GiB, as check and fit take it "
                   "(default, or auto: this machine's MemAvailable, capped by its cgroup limit)")
    p.add_argument("--format", choices=("text", "json"), default="text")


def _read_launch(args: argparse.Namespace):
    """The parsed launch, or None; InputError when the reader rejects it."""
    tail = getattr(args, "launch_tail", None) or []
    if not args.launch and not tail:
        return None
    from oomguard.inputs.reader import read_command, read_launch

    # Lenient: a flag unknown to the assumed version is `check`'s business, not a reason to
    # skip the host checks.
    if args.launch:
        return read_launch(args.launch, version=args.vllm_version, lenient=True)
    return read_command(tail, version=args.vllm_version, lenient=True)


def _host_flags(launch) -> tuple[dict, list[str]]:
    """The launch's flags, plus --swap-space when the reader set it aside as removed (>= 0.18).

    A script that still passes --swap-space runs on a vLLM that accepts it
    (<= 0.17), where it pins that much host RAM per GPU, so it is counted.
    """
    flags = dict(launch.flags)
    notes = []
    for entry in getattr(launch, "unknown", None) or []:
        option, value = entry[0], entry[1]
        if option == "--swap-space" and value is not None:
            try:
                from oomguard.numbers import parse_float

                flags["swap_space"] = parse_float(value, lo=0, hi=1 << 20)  # GiB
            except ValueError:
                continue
            notes.append("--swap-space counted: a launch that passes it runs vLLM <= 0.17 (removed in 0.18)")
    return flags, notes


def _kv_layout(launch, flags: dict, version: str | None):
    """The model's KV tensors per worker, which the pinned CPU tier of vLLM < 0.27 depends on; None otherwise."""
    from oomguard.errors import OomguardError
    from oomguard.host.ram_model import SHARED_REGION_FROM, kv_offload_bytes, kv_tier_layout_for, version_tuple, world_size_of

    v = version_tuple(version)
    if v is None or v >= SHARED_REGION_FROM or not kv_offload_bytes(flags)[0] or not launch.model:
        return None
    try:
        from oomguard.inputs.model_config import load_model

        model = load_model(launch.model, allow_hub=False)
    except (ImportError, OomguardError):
        return None
    tp, pp, _ = world_size_of(flags)
    return kv_tier_layout_for(model, tp, pp)


def _model_weights_bytes(launch) -> tuple[int | None, str | None]:
    """Whole-model weight bytes from the model's config (the memory model), when not on this disk.

    Returns (bytes, None) or (None, a note saying why the weights are not counted).
    """
    from oomguard.errors import OomguardError

    try:
        from oomguard.inputs.model_config import load_model
        from oomguard.model.quantization import WeightCosts, override_quantization, weight_costs
        from oomguard.model.weights import weight_split
    except ImportError as exc:
        return None, f"the memory model is not available ({exc}): weights page cache not counted"
    try:
        model = load_model(launch.model, allow_hub=False)
    except OomguardError as exc:
        return None, f"weights page cache not counted: {exc}"
    if model.checkpoint_bytes:
        return int(model.checkpoint_bytes), None
    # The same cost choice as the planner, at TP1/PP1: the whole checkpoint.
    quant = override_quantization(model.quantization, launch.flags.get("quantization"))
    if quant is model.quantization and model.category_bytes:
        costs = WeightCosts(dict(model.category_bytes))
    else:
        costs = weight_costs(quant, model.dtype_bytes, {}, None)
    return int(weight_split(model, costs).total_bytes), None


def run(args: argparse.Namespace) -> int:
    from oomguard.host.checks import run_checks
    from oomguard.host.facts import read_host_facts
    from oomguard.host.findings import Severity
    from oomguard.host.launchview import checkpoint_on_disk, launch_view
    from oomguard.host.render import render_text, to_json
    from oomguard.host.root import Root

    root = Root(args.root)
    facts = read_host_facts(root, topo_file=args.topo, nvidia_smi_file=args.nvidia_smi)
    if args.host_ram_gib not in (None, "auto"):
        from dataclasses import replace as _replace

        from oomguard.units import GiB

        facts = _replace(facts, host_ram_override_bytes=int(args.host_ram_gib * GiB))
    launch = _read_launch(args)
    view = None
    if launch is not None:
        weights = None
        flags, notes = _host_flags(launch)
        notes = [*getattr(launch, "notes", []), *notes]
        if checkpoint_on_disk(root, launch.model, launch.env) is None:
            weights, note = _model_weights_bytes(launch)
            if note:
                notes.append(note)
        view = launch_view(
            source=launch.path or "command",
            flags=flags,
            env=launch.env,
            model=launch.model,
            version=launch.version or args.vllm_version,
            text=launch.text or " ".join(getattr(args, "launch_tail", None) or []),
            root=root,
            weights_bytes=weights,
            deployment=getattr(launch, "deployment", None),
            kv_layout=_kv_layout(launch, flags, launch.version or args.vllm_version),
        )
        if notes:
            from dataclasses import replace

            view = replace(view, notes=view.notes + tuple(notes))
    findings = run_checks(facts, view)
    if args.format == "json":
        sys.stdout.write(to_json(facts, findings, view) + "\n")
    else:
        render_text(facts, findings, view, sys.stdout)
    return EXIT_FINDINGS if any(f.severity is Severity.ERROR for f in findings) else EXIT_OK
