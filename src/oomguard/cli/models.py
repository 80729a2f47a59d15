"""``oomguard models``: list the bundled model catalog (configs that need no download).

Each entry carries its coverage level, from the same data as docs/models.md (data/coverage.json,
the vLLM registry sweep): ``native-exact`` (an adapter, and the sweep found vLLM's numbers),
``native`` (an adapter, within the stated distance or not swept), ``generic`` (the generic path:
standard fields, marked, with ranges) or ``refused`` (with the reason).

Exit codes: 0 listed, 1 a filter matched nothing, 2 bad input. A catalog entry
the planner cannot describe (an architecture not modelled yet) is listed with
the reason instead of being hidden.
"""

from __future__ import annotations

import argparse
import sys

from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS as EXIT_NO_MATCH, EXIT_OK  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_OK: "listed", EXIT_NO_MATCH: "no bundled model matches"}


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    p = subparsers.add_parser(
        name,
        help=help_text,
        description="List the model configs bundled with oomguard. Any of these ids works offline with "
        "--model (plan, check, fit, diagnose) or as the model in a launch.",
    )
    p.add_argument("filter", nargs="?", default="", metavar="TEXT",
                   help="only ids containing TEXT (case-insensitive), e.g. qwen3 or 70b")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")


def _entry(model_id: str) -> dict:
    from oomguard.errors import OomguardError
    from oomguard.inputs.model_config import load_model
    from oomguard.model.weights import model_weight_bytes
    from oomguard.units import GiB

    try:
        m = load_model(model_id, allow_hub=False)
    except OomguardError as exc:
        return {"id": model_id, "supported": False, "coverage": "refused", "reason": str(exc)}
    quant = m.quantization.method if m.quantization.is_quantized else m.dtype
    detail = m.coverage_detail or {}
    return {
        "id": model_id,
        "supported": True,
        "coverage": detail.get("level") or m.coverage,
        "coverage_checked": detail.get("checked", ""),
        "architecture": m.architecture,
        "model_type": m.model_type,
        "family": m.family,
        "layers": m.num_layers,
        "weights_gib": round(model_weight_bytes(m) / GiB, 2),
        "weights_format": quant,
        "max_position_embeddings": m.max_position_embeddings,
        "multimodal": m.is_multimodal,
        "moe": m.moe is not None,
        "hybrid": m.is_hybrid,
        # an architecture vLLM serves only up to a release (Llama-3.2-Vision: 0.10.2): later ones refuse it
        "served_until": ".".join(map(str, m.served_until[0])) if m.served_until else None,
    }


def run(args: argparse.Namespace) -> int:
    import json

    from oomguard.inputs.model_config import catalog_ids

    needle = (args.filter or "").lower()
    ids = [i for i in catalog_ids() if needle in i.lower()]
    if not ids:
        from oomguard.inputs.suggest import close_matches

        close = close_matches(args.filter, catalog_ids(), n=5, cutoff=0.4)
        hint = f"; close: {', '.join(close)}" if close else ""
        print(f"oomguard models: no catalog id contains {args.filter!r}{hint}", file=sys.stderr)
        return EXIT_NO_MATCH
    rows = [_entry(i) for i in ids]
    registry = _registry_summary()
    if args.format == "json":
        print(json.dumps({"catalog": rows, "count": len(rows), "registry": registry}, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for col, justify in (("model id", "left"), ("type", "left"), ("coverage", "left"), ("weights", "right"),
                         ("format", "left"), ("context", "right"), ("notes", "left")):
        table.add_column(col, justify=justify, no_wrap=col in ("model id", "coverage"))
    for r in rows:
        if not r["supported"]:
            table.add_row(r["id"], "-", "refused", "-", "-", "-", f"not modelled: {r['reason']}")
            continue
        notes = ", ".join(n for n, on in (("MoE", r["moe"]), ("hybrid", r["hybrid"]), ("multimodal", r["multimodal"]),
                                          (f"vLLM <= {r['served_until']} only", r["served_until"])) if on)
        ctx = f"{r['max_position_embeddings']:,}" if r["max_position_embeddings"] else "-"
        table.add_row(r["id"], r["model_type"], r["coverage"], f"{r['weights_gib']:.1f} GiB", r["weights_format"], ctx, notes)
    Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200).print(table)
    print(f"{len(rows)} bundled config(s); weights: the whole model as vLLM loads it on one GPU "
          "(`oomguard plan` gives the per-GPU split).")
    if registry.get("architectures"):
        counts = ", ".join(f"{n} {lv}" for lv, n in registry["levels"].items())
        print(f"coverage levels: docs/models.md (vLLM {registry['vllm_version']} registry sweep, "
              f"{registry['architectures']} architectures: {counts}).")
    return EXIT_OK


def _registry_summary() -> dict:
    """Level counts over vLLM's registry, from the data docs/models.md is generated with."""
    from collections import Counter

    from oomguard.inputs.coverage_data import coverage_table

    table = coverage_table()
    levels = Counter(e.get("level", "?") for e in (table.get("architectures") or {}).values())
    order = ("native-exact", "native", "generic", "refused", "unchecked", "no-config", "not-run")
    return {"vllm_version": table.get("vllm_version"), "architectures": sum(levels.values()),
            "levels": {k: levels[k] for k in order if levels.get(k)}}
