"""``oomguard plan``: predict vLLM's start-up memory ledger per GPU."""

from __future__ import annotations

import argparse
import json
import sys

ACCEPTS_VLLM_FLAGS = True
from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS as EXIT_FAILS, EXIT_INCOMPLETE, EXIT_OK as EXIT_STARTS  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_STARTS: "every launch is predicted to start", EXIT_FAILS: "a launch will not start", EXIT_INCOMPLETE: "the architecture is not modelled"}

_PARSER: argparse.ArgumentParser | None = None


def register(sub, name: str, help_text: str) -> None:
    from oomguard.cli.common import add_target_options

    global _PARSER
    p = sub.add_parser(
        name,
        help=help_text,
        description="Predict, per GPU, what vLLM will allocate at start-up and whether it starts. "
        "vLLM's own flags may be given directly, as a launch file, or as a command after --.",
        epilog="examples:\n  oomguard plan --model Qwen/Qwen3-8B --gpu A100-80GB --max-model-len 32768\n"
        "  oomguard plan start_api.sh --gpu H100 --num-gpus 4\n  oomguard plan --gpu 4090 -- vllm serve Qwen/Qwen3-8B --max-model-len 8192",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    add_target_options(p)
    from oomguard.cli.same_gpu import add_same_gpu_option

    add_same_gpu_option(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="text ledger or JSON (docs/json.md)")
    p.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    p.add_argument("--verbose", action="store_true", help="show every term's formula and source")
    # Before 0.2 this was --explain; `check --explain RULE` now owns that name.
    p.add_argument("--explain", dest="verbose", action="store_true", help=argparse.SUPPRESS)
    _PARSER = p


def run(args: argparse.Namespace) -> int:
    from oomguard.cli.common import build_contexts

    from oomguard.cli.same_gpu import plan_contexts, shared_for_plan

    contexts = plan_contexts(args, build_contexts(args, list(args.unknown or [])))
    shared = shared_for_plan(args, contexts)  # launches on one GPU set: planned in start order, together
    if shared:
        return _run_shared(args, contexts, shared)
    plans = [ctx.plan() for ctx in contexts]
    if args.format == "json":
        docs = []
        for ctx, plan in zip(contexts, plans):
            d = plan.to_dict()
            d["launch_notes"] = ctx.launch.report_notes()
            d["launch"] = ctx.launch.to_dict()
            docs.append(d)
        # one launch: the plan object itself; several (Helm modelSpecs, vLLM containers): one per launch
        json.dump(docs[0] if len(docs) == 1 else {"launches": docs}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        from oomguard.plan.render import render_plan

        for ctx, plan in zip(contexts, plans):
            if len(contexts) > 1:
                print(f"== {ctx.launch.name} ==")
            render_plan(plan, explain=args.verbose, notes=ctx.launch.report_notes())
    return EXIT_STARTS if all(p.starts for p in plans) else EXIT_FAILS


def _run_shared(args: argparse.Namespace, contexts: list, shared: list) -> int:
    from oomguard.cli.same_gpu import render_text

    grouped = {id(c) for g, _sp in shared for c in g}
    alone = [c for c in contexts if id(c) not in grouped]
    plans = [c.plan() for c in alone]
    if args.format == "json":
        doc = {"shared_gpu": [sp.to_dict() for _g, sp in shared]}
        if alone:
            doc["launches"] = [dict(p.to_dict(), launch=c.launch.to_dict()) for c, p in zip(alone, plans)]
        json.dump(doc, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(shared))
        if args.verbose or alone:
            from oomguard.plan.render import render_plan

            for c, p in zip(alone, plans):
                print(f"== {c.launch.name or c.launch.path} ==")
                render_plan(p, explain=args.verbose, notes=c.launch.report_notes())
    ok = all(sp.ok for _g, sp in shared) and all(p.starts for p in plans)
    return EXIT_STARTS if ok else EXIT_FAILS
