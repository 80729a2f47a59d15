"""The ``oomguard`` command: a thin dispatcher over one module per subcommand.

Each subcommand module exposes ``register(subparsers)`` (cheap: argparse only)
and ``run(args) -> int``. Library work is imported inside ``run`` so that
``oomguard --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Exit codes shared by every command: 0 ok, 1 findings / does not fit / failed, 2 bad input,
# 3 could not complete (an unmodelled architecture, a server gone, a log that stops early).
EXIT_INCOMPLETE = 3

# name -> (module, one-line help). Order is the order shown in --help.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("oomguard.cli.plan", "predict vLLM's start-up memory ledger per GPU"),
    "check": ("oomguard.cli.check", "lint a vLLM launch and print the corrected command"),
    "diagnose": ("oomguard.cli.diagnose", "classify a failure from logs, dmesg and nvidia-smi"),
    "bundle": ("oomguard.cli.bundle", "write a redacted, size-bounded failure report"),
    "probe": ("oomguard.cli.probe", "verify a live OpenAI-compatible server under load"),
    "fit": ("oomguard.cli.fit", "search for the best launch that fits a goal"),
    "host": ("oomguard.cli.host", "check host RAM, kernel settings and topology"),
    "watch": ("oomguard.cli.watch", "monitor a live server with alerts"),
    "export": ("oomguard.cli.export", "export alert rules, dashboards and launch units"),
    "models": ("oomguard.cli.models", "list the bundled model catalog (works offline)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse's usage errors echo argument values ("unrecognized arguments: --api-key X"):
    they go through the redactor like every other error. Subparsers inherit the class."""

    def error(self, message: str):  # type: ignore[override]
        from oomguard.redact import redact_text, safe_terminal_text

        super().error(safe_terminal_text(redact_text(message)))


def build_parser() -> argparse.ArgumentParser:
    from oomguard import __version__

    parser = _Parser(
        prog="oomguard",
        description="Keep vLLM deployments from running out of memory.",
    )
    parser.add_argument("--version", action="version", version=f"oomguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a subcommand not built yet
            if exc.name != module_name:
                raise
            continue
        module.register(sub, name, help_text)
    return parser


def main(argv: list[str] | None = None) -> int:
    from oomguard.errors import OomguardError, UnsupportedModelError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Everything after a bare "--" is a launch command, not ours to parse.
    tail: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, tail = argv[:i], argv[i + 1 :]
    command = next((a for a in argv if not a.startswith("-")), None)
    module = importlib.import_module(SUBCOMMANDS[command][0]) if command in SUBCOMMANDS else None
    if module is not None and getattr(module, "ACCEPTS_VLLM_FLAGS", False):
        # Our options and vLLM's share the command line: split them ourselves.
        from oomguard.cli.common import split_argv

        rest = argv[argv.index(command) + 1 :]
        sub_parser = module._PARSER  # noqa: SLF001
        if any(a in ("-h", "--help") for a in rest):
            sub_parser.print_help()
            return 0
        ours, theirs = split_argv(sub_parser, rest)
        args = sub_parser.parse_args(ours)
        args.command = command
        unknown = theirs
    else:
        args, unknown = parser.parse_known_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    args.launch_tail = tail
    args.unknown = unknown
    module = importlib.import_module(SUBCOMMANDS[args.command][0])
    if unknown and not getattr(module, "ACCEPTS_VLLM_FLAGS", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(module.run(args) or 0)
    except UnsupportedModelError as exc:
        # Not bad input: the config is fine, the planner cannot model it yet ("could not complete").
        print(f"oomguard {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except OomguardError as exc:
        from oomguard.redact import redact_text, safe_terminal_text

        print(f"oomguard {args.command}: error: {safe_terminal_text(redact_text(str(exc)))}", file=sys.stderr)
        return getattr(module, "EXIT_BAD_INPUT", 2)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
