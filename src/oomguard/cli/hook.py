"""``oomguard check --hook FILE...``: the pre-commit hook (``.pre-commit-hooks.yaml``).

pre-commit passes the hook's ``args:`` then every staged file that matches the hook's (wide) file
types. Each file is sniffed for a vLLM launch (``inputs.sniff``: content, not names); those that
hold none pass silently (``--verbose`` says why). Each launch is checked with the settings of
its path (``.oomguard.yaml``, ``inputs.hook_config``) by ``oomguard check`` itself, in process.

Exit codes: the worst file's (1 errors, 3 could not complete, 2 bad input in a file or the config),
else 0.
"""

from __future__ import annotations

import argparse
import sys

from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_OK

_RANK = {EXIT_OK: 0, EXIT_INCOMPLETE: 1, EXIT_FINDINGS: 2, EXIT_BAD_INPUT: 3}
# check options a hook passes through (the rest, --fix, --explain, a command after --, are check's own)
_PASSED = ("og_model", "gpu", "gpu_memory_gib", "num_gpus", "vllm_version", "other_gpu_use_gib", "usage", "host_ram_gib",
           "avg_input_len", "avg_output_len", "concurrency", "nvidia_smi", "topo", "format", "strict", "ignore", "verbose")


def build_parser() -> argparse.ArgumentParser:
    """check's own options (one definition, one validation), plus the hook's: files, --config."""
    from oomguard.cli import check
    from oomguard.cli.common import OneLineParser

    if check._PARSER is None:  # noqa: SLF001  (called before the dispatcher built check's parser)
        check.register(OneLineParser(prog="oomguard").add_subparsers(), "check", "lint a vLLM launch")
    from oomguard.cli.common import exit_epilog

    p = OneLineParser(prog="oomguard check --hook", allow_abbrev=False,
                      description="check every staged vLLM launch (pre-commit): each FILE that holds one, with the settings "
                      "of its path in .oomguard.yaml; the others pass (--verbose says why)",
                      epilog=exit_epilog({0: "every launch is clean", 1: "a launch has errors (or warnings with --strict)",
                                          3: "a launch's rules could not run (OG001)"}))
    for action in check._PARSER._actions:  # noqa: SLF001
        if action.dest in _PASSED and action.option_strings:
            kwargs = {"dest": action.dest, "help": action.help, "default": argparse.SUPPRESS}
            if action.nargs == 0:
                kwargs["action"] = "store_true" if action.const is True else "store_const"
                if kwargs["action"] == "store_const":
                    kwargs["const"] = action.const
            else:
                kwargs.update(type=action.type, choices=action.choices, metavar=action.metavar)
                if action.__class__.__name__ == "_AppendAction":
                    kwargs["action"] = "append"
            p.add_argument(*action.option_strings, **kwargs)
    p.add_argument("--config", default=None, metavar="FILE", help="per-path settings (default: .oomguard.yaml in the current directory)")
    p.add_argument("files", nargs="*", metavar="FILE")
    return p


def _argv(settings: dict) -> list[str]:
    """check's command line for one file's settings (check's parser validates every value)."""
    from oomguard.cli import check

    opts = {a.dest: a for a in check._PARSER._actions if a.option_strings}  # noqa: SLF001
    out: list[str] = []
    for dest, value in settings.items():
        a = opts.get(dest)
        if a is None or value is None or dest == "skip":
            continue
        flag = a.option_strings[-1] if a.option_strings[-1].startswith("--") else a.option_strings[0]
        if a.nargs == 0:
            if value:
                out.append(flag)
        elif isinstance(value, list):
            for v in value:
                out += [flag, str(v)]
        else:
            out += [flag, str(value)]
    return out


def run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from oomguard.cli import check
    from oomguard.errors import InputError, OomguardError
    from oomguard.inputs import files
    from oomguard.inputs.hook_config import CONFIG_NAME, read_hook_config
    from oomguard.inputs.sniff import kind_of

    given = {k: v for k, v in vars(args).items() if k in _PASSED}
    verbose = bool(given.get("verbose"))
    cfg_path = args.config or (CONFIG_NAME if files.is_file(CONFIG_NAME) else None)
    if args.config and not files.is_file(args.config):
        raise InputError("no such file (the hook's --config)", file=args.config)
    cfg = read_hook_config(cfg_path)
    worst = EXIT_OK
    checked = 0
    for name in args.files:
        rel = os.path.relpath(name).replace(os.sep, "/")
        try:
            text = files.read_text(name, limit=files.LAUNCH_BYTES, what="staged file")
        except OomguardError as exc:
            print(f"oomguard check --hook: {exc}", file=sys.stderr)
            worst = max(worst, EXIT_BAD_INPUT, key=_RANK.get)
            continue
        kind, why = kind_of(name, text)
        if kind is None:
            if verbose:
                print(f"{rel}: skipped: {why}")
            continue
        settings = cfg.for_path(rel, given)
        if settings.get("skip"):
            if verbose:
                print(f"{rel}: skipped by {cfg.path}")
            continue
        argv = [name, *_argv(settings)]
        try:
            cargs = check._PARSER.parse_args(argv)  # noqa: SLF001
        except SystemExit:
            raise InputError(f"a setting for {rel} is not valid for oomguard check ({' '.join(argv[1:])})",
                             file=cfg.path or "the hook's args") from None
        cargs.command, cargs.launch_tail, cargs.unknown = "check", [], []
        cargs.fix = cargs.in_place = False
        cargs.explain = None
        checked += 1
        if getattr(cargs, "format", "text") == "text":
            print(f"== {rel} ==")
        try:
            code = int(check.run(cargs) or 0)
        except OomguardError as exc:
            print(f"oomguard check: error: {exc}", file=sys.stderr)
            code = EXIT_INCOMPLETE if exc.__class__.__name__ == "UnsupportedModelError" else EXIT_BAD_INPUT
        sys.stdout.flush()
        worst = max(worst, code, key=lambda c: _RANK.get(c, 3))
    if verbose:
        print(f"oomguard check --hook: {checked} launch(es) checked of {len(args.files)} file(s)"
              + (f", settings from {cfg.path}" if cfg.path else ""))
    return worst


def parse(argv: list[str]) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.command = "check --hook"
    return args
