"""Several launches on one GPU set, for ``plan``, ``check`` and ``fit``: which launches share, and the shared plan.

Launches share a GPU set when the user says so (``--same-gpu LAUNCH``, repeatable: started after
the ones before it) or when a file holding several launches pins them to the same devices: compose
services reserving the same ``device_ids``, Kubernetes pods on the same node (``nodeName`` or a
``kubernetes.io/hostname`` selector) naming the same ``NVIDIA_VISIBLE_DEVICES`` /
``CUDA_VISIBLE_DEVICES``. Start order is the order of the file (compose: ``depends_on`` first),
then the order of ``--same-gpu``. The launches come from the one reader (``oomguard.inputs.reader``).
"""

from __future__ import annotations

import argparse
import os

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any


def add_same_gpu_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--same-gpu", action="append", default=[], metavar="LAUNCH",
                   help="another launch on the same GPU set, started after the ones before it (repeatable); "
                        "plans them in start order with each release's accounting")


def device_key(launch) -> tuple | None:
    """What names a launch's devices: (node, devices); None when the launch does not pin any."""
    dep = getattr(launch, "deployment", None) or {}
    env = getattr(launch, "env", None) or {}
    ids = dep.get("device_ids")
    devices = tuple(sorted(str(x).strip() for x in ids)) if ids else None
    if devices is None:
        for var in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
            v = env.get(var)
            if v and str(v).strip().lower() not in ("all", "none", "void", ""):
                devices = tuple(sorted(x.strip() for x in str(v).split(",") if x.strip()))
                break
    if not devices:
        return None
    return (dep.get("node") or "", devices)


def start_order(launches: list) -> list:
    """compose ``depends_on`` first (kept as written otherwise)."""
    names = {(getattr(x, "deployment", None) or {}).get("name"): x for x in launches}
    out: list = []

    def visit(x, depth=0):
        if x in out or depth > len(launches):
            return
        for dep in (getattr(x, "deployment", None) or {}).get("depends_on") or []:
            if dep in names:
                visit(names[dep], depth + 1)
        out.append(x)

    for x in launches:
        visit(x)
    return out


def groups(items: list, launch_of, explicit: bool) -> list[list]:
    """Groups of two or more items (contexts) on one GPU set, in start order."""
    if explicit:
        return [items] if len(items) > 1 else []
    by_key: dict = {}
    for it in items:
        k = device_key(launch_of(it))
        if k is not None:
            by_key.setdefault(k, []).append(it)
    out = []
    for members in by_key.values():
        if len(members) > 1:
            order = start_order([launch_of(m) for m in members])
            out.append(sorted(members, key=lambda m: order.index(launch_of(m))))
    return out


def server_of(name: str, model, launch, version, calibration=None):
    from oomguard.plan.shared_gpu import Server

    flags = {k: v for k, v in launch.flags.items()}
    return Server(name or launch.model or "launch", model, flags, dict(launch.env), version, launch.model, calibration)


def shared_plan(servers: list, gpu, num_gpus: int | None):
    from oomguard.plan.shared_gpu import plan_shared

    world = max(int(s.flags.get("tensor_parallel_size") or 1) * int(s.flags.get("pipeline_parallel_size") or 1) for s in servers)
    return plan_shared(servers, gpu, max(num_gpus or 1, world))


def _file_name(path: str | None) -> str:
    """A launch file's own name (the table's server column has no room for its directory)."""
    return os.path.basename(path) if path else ""


def _unique(names: list[str]) -> list[str]:
    """The same launch given twice (two servers from one script) gets ``#2``, ``#3``."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


def _short(name: str | None) -> str:
    return (name or "launch").replace("compose service ", "").replace("Deployment ", "")


# ---------------------------------------------------------------- plan


def plan_contexts(args: argparse.Namespace, contexts: list) -> list:
    """The plan contexts of the ``--same-gpu`` launches (after the target's own)."""
    from oomguard.cli.common import context_for
    from oomguard.inputs.reader import read_launches

    extra = []
    for path in getattr(args, "same_gpu", []) or []:
        for launch in read_launches(path, version=getattr(args, "vllm_version", None), lenient=bool(getattr(args, "lenient", False))):
            extra.append(context_for(args, launch))
    return contexts + extra


def shared_for_plan(args: argparse.Namespace, contexts: list) -> list[tuple[list, Any]]:
    """(contexts, SharedPlan) for every group of plan contexts on one GPU set."""
    out = []
    for g in groups(contexts, lambda c: c.launch, explicit=bool(getattr(args, "same_gpu", None))):
        names = _unique([_short(c.launch.name) if c.launch.name else _file_name(c.launch.path) or c.launch.model or f"launch {i + 1}"
                         for i, c in enumerate(g)])
        servers = [server_of(n, c.model, c.launch, c.version, c.calibration) for n, c in zip(names, g)]
        out.append((g, shared_plan(servers, g[0].gpu, args.num_gpus)))
    return out


# ---------------------------------------------------------------- check


def shared_for_check(reports: list, explicit: bool) -> list[tuple[list, Any]]:
    out = []
    for g in groups(reports, lambda r: r.ctx.launch, explicit=explicit):
        if any(r.ctx.model is None or r.ctx.gpu is None for r in g):
            continue
        names = _unique([_short(r.ctx.launch.name) if r.ctx.launch.name else _file_name(r.ctx.launch.path) or f"launch {i + 1}"
                         for i, r in enumerate(g)])
        servers = [server_of(n, r.ctx.model, r.ctx.launch, r.ctx.version_label, r.ctx.options.calibration) for n, r in zip(names, g)]
        out.append((g, shared_plan(servers, g[0].ctx.gpu, g[0].ctx.num_gpus)))
    return out


# the splits --fix may write into the launches: flags only (a MIG split needs the card re-partitioned first)
WRITABLE_SPLITS = ("pinned", "utilization")


def fix_split(run, shared: list, options, ignore=()) -> tuple[dict[str, str], list[str]]:
    """``check --fix`` for servers that share a GPU set and do not all start: the first ok split the shared
    planner chose (pinned pools, else utilizations) is written into each server's launch in its file's own
    format, on top of the other fixes, once the servers, re-read from the written text and re-planned
    together, all start. The target file's text becomes ``run.fixed``; the other files' (``--same-gpu``)
    come back as {path: text}, for NAME.fixed.EXT beside each. Notes say what was written or why nothing was."""
    from oomguard.check.fixer import apply_edits
    from oomguard.check.report import check_read, fixed_path_for, reread

    notes: list[str] = []
    others: dict[str, str] = {}
    target = run.reports[0].ctx.launch.path if run.reports else None
    for group, sp in shared:
        if sp.ok:
            continue
        names = ", ".join(o.server.name for o in sp.outcomes)
        if any(fixed_path_for(r.ctx.launch) is None for r in group):
            notes.append(f"shared GPU ({names}): a server comes from a pipe or the command line; apply the split by hand")
            continue
        option = next((o for o in sp.options if o.ok and o.kind in WRITABLE_SPLITS), None)
        if option is None:
            notes.append(f"shared GPU ({names}): no split of flags lets every server start; nothing written for it")
            continue
        # each file's text so far: the target's with check's other fixes; a --same-gpu file's with its own
        texts: dict[str, str] = {}
        for r in group:
            path = r.ctx.launch.path
            if path not in texts:
                base = run.fixed_text if path == target and run.fixed_text is not None else None
                texts[path] = base or others.get(path) or (r.fixed_text if path != target else None) or r.ctx.launch.text or ""
        for rep, edits in zip(group, option.edits):
            path = rep.ctx.launch.path
            launch = reread(rep.ctx.launch, texts[path], options.version) if texts[path] != rep.ctx.launch.text else rep.ctx.launch
            texts[path], why = apply_edits(launch, rep.ctx.release, [rep.ctx.edit(d, v) for d, v in edits.items()])
            notes += why
        # the files as written, read again and planned together: the split must hold there too
        again = [check_read(reread(r.ctx.launch, texts[r.ctx.launch.path], options.version), options, ignore=ignore, fix=False)
                 for r in group]
        verified = shared_for_check(again, explicit=True)
        if not verified or not all(v.ok for _g, v in verified):
            notes.append(f"shared GPU ({names}): the {option.kind} split did not hold once written; nothing written for it")
            continue
        for path, text in texts.items():
            if path == target:
                run.fixed = text
            else:
                others[path] = text
        notes.append(f"shared GPU ({names}): --fix writes split {option.kind} (the first that lets every server start)")
    return others, notes


def render_text(shared: list) -> str:
    import io
    import sys

    from rich.console import Console

    from oomguard.plan.shared_render import render_shared

    buf = io.StringIO()
    console = Console(file=buf, highlight=False, force_terminal=sys.stdout.isatty(), width=160 if not sys.stdout.isatty() else None)
    for _g, sp in shared:
        render_shared(sp, console)
    return buf.getvalue()


# ---------------------------------------------------------------- fit: split one GPU set between several models


def _model_entry(text: str):
    """``MODEL[@LEN]``: a model id (or config path) and its max-model-len."""
    from oomguard.errors import InputError
    from oomguard.units import parse_size

    model, _, length = text.partition("@")
    if not model:
        raise InputError(f"--same-gpu {text!r}: expected a launch file or MODEL[@LEN]")
    flags = {}
    if length:
        try:
            n = int(length) if length.isdigit() else parse_size(length)
        except ValueError:
            raise InputError(f"--same-gpu {text!r}: {length!r} is not a token count (e.g. 8192, 32K)") from None
        if n <= 0:
            raise InputError(f"--same-gpu {text!r}: the length must be positive")
        flags["max_model_len"] = int(n)
    return model, flags


def fit_split(args: argparse.Namespace) -> int:
    """``fit --same-gpu``: the split of one GPU set between the servers that gives each the same multiple of its need."""
    import json
    import os
    import sys

    from oomguard.cli.common import calibration_of, context_for, read_target
    from oomguard.errors import InputError
    from oomguard.inputs.hardware import lookup_gpu
    from oomguard.inputs.launch import Launch
    from oomguard.inputs.model_config import load_model
    from oomguard.inputs.reader import read_launches

    if not args.gpu and not args.gpu_memory_gib:
        raise InputError("fit --same-gpu splits one GPU set: name it with --gpu (a MIG-capable card also gets a MIG split)")
    gpu = lookup_gpu(args.gpu, args.gpu_memory_gib)
    cal = calibration_of(args)
    version = args.vllm_version
    servers = []
    if args.launch_file:
        ctx = context_for(args, read_target(args, []))
        servers.append(server_of(_short(ctx.launch.name) or os.path.basename(args.launch_file), ctx.model, ctx.launch, ctx.version, cal))
    elif args.og_model:
        flags = {}
        if args.context:
            from oomguard.cli.common import token_count

            flags["max_model_len"] = token_count(args.context, "--context")
        launch = Launch("flags", None, args.og_model, flags=flags)
        servers.append(server_of(args.og_model, load_model(args.og_model), launch, version, cal))
    else:
        raise InputError("fit --same-gpu: give the first server with --from LAUNCH or --model MODEL")
    for entry in args.same_gpu:
        if os.path.exists(entry.split("#", 1)[0]) or entry.endswith((".sh", ".yaml", ".yml", ".json")):
            for launch in read_launches(entry, version=version):
                from oomguard.errors import OomguardError

                try:
                    model = load_model(launch.model or "")
                except OomguardError as exc:
                    raise InputError(f"--same-gpu {entry}: {exc}") from None
                servers.append(server_of(_short(launch.name) or os.path.basename(entry), model, launch, version or launch.version, cal))
        else:
            model_id, flags = _model_entry(entry)
            launch = Launch("flags", None, model_id, flags=flags)
            servers.append(server_of(model_id, load_model(model_id), launch, version, cal))
    sp = shared_plan(servers, gpu, args.num_gpus)
    if args.format == "json":
        json.dump({"shared_gpu": sp.to_dict(), "found": any(o.ok for o in sp.options) or sp.ok}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text([(None, sp)]))
        print("the split gives every server its non-KV memory and one max-length request, then shares the rest in proportion "
              "to those requests (each holds the same multiple of its own)")
    from oomguard.cli.common import EXIT_FINDINGS, EXIT_OK

    return EXIT_OK if sp.ok or any(o.ok for o in sp.options) else EXIT_FINDINGS
