"""``oomguard check``: lint a vLLM launch before it runs, and print the corrected launch.

Exit codes (for CI, the same as every command's): 0 clean (warnings and info
allowed), 1 errors (or warnings with ``--strict``), 2 bad input (unreadable
file, binary file, YAML that is not a mapping, a script with no vLLM command,
an unknown GPU or model named explicitly), 3 could not complete: memory rules
that could not run (OG001: never a silent "no findings").
"""

from __future__ import annotations

import argparse
import json
import sys

from oomguard.cli import common

ACCEPTS_VLLM_FLAGS = True
from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_OK as EXIT_CLEAN  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_CLEAN: "clean", EXIT_FINDINGS: "errors (or warnings with --strict)", EXIT_INCOMPLETE: "rules that could not run (OG001) and no error"}

_PARSER: argparse.ArgumentParser | None = None

_EPILOG = """examples:
  oomguard check start_api.sh --gpu A100-80GB
  oomguard check config.yaml --gpu H100 --num-gpus 2 --format json
  oomguard check --gpu RTX-4090 --num-gpus 4 --host-ram-gib 256 --avg-input-len 32768 -- vllm serve MODEL --tensor-parallel-size 4
  oomguard check start_api.sh --gpu A100-80GB --fix          # writes start_api.fixed.sh
  oomguard check --explain OG101"""


def register(sub, name: str, help_text: str) -> None:
    global _PARSER
    p = sub.add_parser(
        name,
        help=help_text,
        description="Lint a vLLM launch (a start_api.sh, a --config YAML, or a command after --) against the memory plan "
        "and the chosen vLLM release's flags; print findings and the corrected launch.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("launch_file", nargs="?", metavar="TARGET", help="start_api.sh or a vLLM --config YAML (or give the command after --)")
    p.add_argument("--model", dest="og_model", metavar="PATH|HF_ID", help="model config when the launch's model path is not on this machine")
    p.add_argument("--gpu", metavar="NAME", help="GPU name, e.g. A100-80GB, H100, RTX-4090")
    p.add_argument("--gpu-memory-gib", type=common.GPU_GIB, metavar="X", help="total GPU memory in GiB as your log prints it")
    p.add_argument("--num-gpus", type=common.GPU_COUNT, metavar="N", help="GPUs visible to the launch (default: CUDA_VISIBLE_DEVICES, nvidia-smi, else TP × PP)")
    p.add_argument("--vllm-version", type=common.vllm_version, metavar="V", help="vLLM release to check against (default: newest supported)")
    p.add_argument("--other-gpu-use-gib", type=common.GIB_OR_ZERO, default=None, metavar="X", help="GPU memory already held by other processes")
    p.add_argument("--usage", choices=["serve", "llm"], default="serve", help="vllm serve (default) or the LLM class")
    p.add_argument("--host-ram-gib", type=common.host_gib_or_auto, metavar="X|auto", help="host RAM available to the server, or 'auto' to read /proc/meminfo")
    p.add_argument("--avg-input-len", type=common.TOKENS, metavar="N", help="average prompt length of the traffic (tokens)")
    p.add_argument("--avg-output-len", type=common.TOKENS, metavar="N", help="average output length of the traffic (tokens)")
    p.add_argument("--concurrency", type=common.COUNT, metavar="C", help="concurrent requests the deployment must hold")
    p.add_argument("--nvidia-smi", metavar="FILE", help="`nvidia-smi` output taken before the server starts (GPU, memory used by others)")
    p.add_argument("--topo", metavar="FILE", help="`nvidia-smi topo -m` output")
    common.add_calibration_option(p)
    from oomguard.cli.same_gpu import add_same_gpu_option

    add_same_gpu_option(p)
    p.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text", help="output format (default text)")
    p.add_argument("--strict", action="store_true", help="exit 1 when there are warnings (and no errors)")
    p.add_argument("--ignore", action="append", default=[], metavar="ID[,ID]", help="silence rules by id or name (repeatable)")
    p.add_argument("--fix", action="store_true", help="write the corrected launch next to the input (NAME.fixed.EXT)")
    p.add_argument("--in-place", action="store_true", help="with --fix: overwrite the input instead")
    p.add_argument("--no-diff", action="store_true", help="text format: print the corrected launch instead of a diff")
    p.add_argument("--explain", nargs="?", const="", metavar="RULE", help="print a rule's documentation (all rules without an id)")
    p.add_argument("--verbose", action="store_true", help="list every skipped rule")
    p.add_argument("--hook", action="store_true",
                   help="pre-commit mode: check each FILE that holds a vLLM launch (sniffed by content) with the "
                   "settings of its path in .oomguard.yaml (see .pre-commit-hooks.yaml)")
    _PARSER = p


def _options(args):
    from oomguard.check.context import CheckOptions

    return CheckOptions(
        version=args.vllm_version,
        model=args.og_model,
        gpu=args.gpu,
        gpu_memory_gib=args.gpu_memory_gib,
        num_gpus=args.num_gpus,
        other_gpu_use_gib=args.other_gpu_use_gib,
        usage=args.usage,
        host_ram_gib=args.host_ram_gib,
        avg_input_len=args.avg_input_len,
        avg_output_len=args.avg_output_len,
        concurrency=args.concurrency,
        nvidia_smi=args.nvidia_smi,
        topo=args.topo,
        calibration=common.calibration_of(args),
    )


def _explain(rule_id: str) -> int:
    from oomguard.check.registry import all_rules, get_rule
    from oomguard.check.text import render_rule, render_rule_list
    from oomguard.errors import InputError

    if not rule_id:
        sys.stdout.write(render_rule_list(all_rules()))
        return EXIT_CLEAN
    r = get_rule(rule_id)
    if r is None:
        raise InputError(f"no rule {rule_id!r}; `oomguard check --explain` lists them")
    sys.stdout.write(render_rule(r))
    return EXIT_CLEAN


def _write_fix(run, in_place: bool) -> str | None:
    """Write the corrected launch in the input's own format: NAME.fixed.EXT beside it, or the input
    itself with --in-place (a script stays a script, a manifest stays that manifest)."""
    from pathlib import Path

    from oomguard.check.report import fixed_path_for
    from oomguard.inputs.writes import write_text

    text = run.fixed_text
    launch = run.reports[0].ctx.launch
    path = launch.path
    if text is None:
        print("oomguard check: nothing to fix", file=sys.stderr)
        return None
    fixed = fixed_path_for(launch)
    if not path or fixed is None:
        where = "a pipe" if path else "the command line"
        print(f"oomguard check: the launch came from {where}; the corrected launch is printed above", file=sys.stderr)
        return None
    target = Path(path) if in_place else Path(fixed)
    # Temp file + rename: a symlink planted at NAME.fixed.EXT is replaced, not written through or chmodded.
    write_text(target, text, mode_from=path, what="the corrected launch")
    print(f"oomguard check: wrote {target}", file=sys.stderr)
    return str(target)


def _write_split_files(texts: dict[str, str]) -> None:
    """The --same-gpu files the shared split changed: NAME.fixed.EXT beside each (never the file itself)."""
    from pathlib import Path

    from oomguard.inputs.writes import write_text

    for path, text in texts.items():
        p = Path(path)
        target = p.with_name(f"{p.stem}.fixed{p.suffix}")
        write_text(target, text, mode_from=path, what="the corrected launch")
        print(f"oomguard check: wrote {target}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from oomguard.check.report import check_run
    from oomguard.errors import InputError

    if args.explain is not None:
        return _explain(args.explain)
    if args.in_place and not args.fix:
        raise InputError("--in-place goes with --fix")
    ignore = [x for item in args.ignore for x in item.split(",") if x.strip()]
    tail = list(getattr(args, "launch_tail", []) or [])
    flags = list(args.unknown or [])
    if args.launch_file is None and flags and not flags[0].startswith("-"):
        # the dispatcher leaves a TARGET that does not exist among vLLM's words
        raise InputError("no such file", file=flags[0])
    options = _options(args)
    run_ = check_run(
        options,
        path=args.launch_file,
        command=tail or None,
        flags=flags or None,
        ignore=ignore,
    )
    from oomguard.cli.same_gpu import fix_split, shared_for_check

    if args.same_gpu:
        if args.fix and args.in_place:
            raise InputError("--fix --in-place corrects one launch file: with --same-gpu, --fix writes NAME.fixed.EXT beside each")
        for path in args.same_gpu:
            run_.reports += check_run(options, path=path, ignore=ignore).reports
    # launches on one GPU set (--same-gpu, or one file pinning several to the same devices): planned together
    shared = shared_for_check(run_.reports, explicit=bool(args.same_gpu))
    split_files, split_notes = fix_split(run_, shared, options, ignore) if shared else ({}, [])
    report = run_.single
    fmt = args.format
    # Secrets in the launch (--api-key, HF_TOKEN=..., keys nested in JSON-valued flags) stay in
    # the file --fix writes but never reach stdout: redacted here, at the render edge, as a
    # structure for json/sarif and as text for the line-oriented formats.
    from oomguard.redact import Redactor, launch_secrets

    secrets: list = []
    for rep in run_.reports:
        secrets += launch_secrets(rep.ctx.launch)
    redact = Redactor(secrets)
    if fmt == "json":
        doc = run_.to_dict()
        if shared:
            doc["shared_gpu"] = [sp.to_dict() for _g, sp in shared]
        json.dump(redact.data(json.loads(json.dumps(doc, default=str))), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif fmt == "sarif":
        from oomguard.check.sarif import to_sarif

        json.dump(redact.data(json.loads(json.dumps(to_sarif(run_), default=str))), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif fmt == "github":
        from oomguard.check.github import to_github

        sys.stdout.write(redact.text(to_github(run_)))
    else:
        from oomguard.check.text import render_report, render_run

        if report is not None:
            sys.stdout.write(redact.text(render_report(report, show_diff=not args.no_diff, verbose=args.verbose)))
        else:
            sys.stdout.write(redact.text(render_run(run_, show_diff=not args.no_diff, verbose=args.verbose)))
        if shared:
            from oomguard.cli.same_gpu import render_text

            sys.stdout.write("\n" + redact.text(render_text(shared)))
    for note in split_notes:
        print(f"note: {redact.text(note)}", file=sys.stderr)
    if args.fix:
        _write_fix(run_, args.in_place)
        _write_split_files(split_files)
    code = int(run_.exit_code(args.strict))
    if shared and not all(sp.ok for _g, sp in shared) and code == EXIT_CLEAN:
        code = EXIT_FINDINGS  # one of the servers fails next to the others: a finding like any other
    return code
