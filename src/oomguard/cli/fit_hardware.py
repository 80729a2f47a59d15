"""``oomguard fit`` without a GPU: which cards, how many, at what cost (fit/hardware.py does the search)."""

from __future__ import annotations

import argparse
import json
import sys


def _gpus(args: argparse.Namespace, prices) -> list:
    from oomguard.errors import InputError
    from oomguard.inputs.hardware import lookup_gpu

    if args.gpus:
        names = [x.strip() for x in args.gpus.split(",") if x.strip()]
        if not names:
            raise InputError("--gpus: expected a comma-separated list of GPU names, e.g. H100,L40S,RTX-4090")
        out = []
        for n in names:
            g = lookup_gpu(n, None)
            if g.name not in [x.name for x in out]:
                out.append(g)
        return out
    return [lookup_gpu(name) for name in prices.rows]


def run_hardware(args: argparse.Namespace) -> int:
    from oomguard.cli.common import calibration_of
    from oomguard.cli.common import token_count
    from oomguard.errors import InputError
    from oomguard.fit import prices as price_table
    from oomguard.fit.hardware import search
    from oomguard.fit.space import Goal, Objective
    from oomguard.inputs.model_config import load_model
    from oomguard.units import GiB

    if args.launch_file:
        raise InputError("fit --from edits a launch on its own GPU: name it with --gpu (without --gpu, fit chooses the hardware for --model)")
    if not args.og_model:
        raise InputError("fit without --gpu chooses the hardware for a model: pass --model (and --context, --concurrency)")
    if args.max_context:
        raise InputError("choosing the hardware needs a fixed --context (the length the users need), not --max-context")
    model = load_model(args.og_model)
    prices = price_table.load(args.prices)
    gpus = _gpus(args, prices)
    context = token_count(args.context, "--context") or model.derived_max_model_len
    goal = Goal(
        context=context,
        concurrency=args.concurrency,
        avg_input_len=token_count(args.avg_input_len, "--avg-input-len"),
        objective=Objective(args.objective) if args.objective else Objective.THROUGHPUT,
        explicit_objective=bool(args.objective),
        margin_bytes=int(args.margin_gib * GiB) if args.margin_gib is not None else 0,  # each card's floor applies
        host_ram_bytes=int(args.host_ram_gib * GiB) if isinstance(args.host_ram_gib, (int, float)) else None,
    )
    from oomguard.cli.common import rope_scaling_flags

    fixed = rope_scaling_flags(args.rope_scaling)
    res = search(model, goal, gpus=gpus, prices=prices, version=args.vllm_version, usage=args.usage, max_nodes=args.max_nodes,
                 interconnect_gbps=args.interconnect_gbps, calibration=calibration_of(args), model_name=args.og_model,
                 other_gpu_use_bytes=int((args.other_gpu_use_gib or 0) * GiB), fixed_flags=fixed)
    if args.format == "json":
        json.dump({"hardware": res.to_dict(), "found": res.found}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        from rich.console import Console

        from oomguard.fit.hardware_render import render_hardware

        render_hardware(res, Console(highlight=False, width=None if sys.stdout.isatty() else 160), top=args.top)
    from oomguard.cli.common import EXIT_FINDINGS, EXIT_OK

    return EXIT_OK if res.found else EXIT_FINDINGS
