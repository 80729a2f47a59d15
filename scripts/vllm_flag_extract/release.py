"""Extract one release's table: the ``vllm serve`` parser's flags, engine defaults, env vars.

Entry points, newest first (the first that exists is used):
1. ``vllm/entrypoints/cli/serve.py``: ``ServeSubcommand.subparser_init`` (0.7.x+);
2. ``vllm/scripts.py``: ``main()`` builds the ``serve`` sub-parser (0.6.x);
3. ``AsyncEngineArgs.add_cli_args`` alone.
Each is *interpreted*, so frontend options (``--port``, ``--api-key`` ...) are in
the table too: they matter for "unknown flag" and abbreviation checks.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from .argspec import ParserToken, Session, SubparsersToken, flag_records, to_json
from .envvars import extract_env
from .kwargs import compute_kwargs, size_fields_of
from .evaluator import BudgetExceeded, Evaluator
from .source import MISSING, ClassRef, FieldSpec, FuncRef, Instance, SourceTree, Unknown

FORMAT_VERSION = 1


def _parser_module(tree: SourceTree) -> str:
    for name in ("vllm.utils.argparse_utils", "vllm.utils", "vllm.utils.__init__"):
        text = tree.read_text(name)
        if "class FlexibleArgumentParser" in text:
            return name
    return ""


def parser_behaviour(tree: SourceTree) -> dict[str, Any]:
    """How vLLM's FlexibleArgumentParser rewrites arguments before argparse sees them."""
    name = _parser_module(tree)
    text = tree.read_text(name) if name else ""
    start = text.find("class FlexibleArgumentParser")
    body = text[start:] if start >= 0 else ""
    if r"[^\.]*" in body:
        underscores = "before_dot"   # only the key up to the first "." (JSON sub-keys keep "_")
    elif "replace('_', '-')" in body or 'replace("_", "-")' in body:
        underscores = "all"
    else:
        underscores = "none"
    short_o = None
    if re.search(r"""["']--optimization-level["']""", body) and "-O" in body:
        short_o = "--optimization-level"
    elif re.search(r"""startswith\(\s*["']-O["']""", body):
        short_o = "-O"
    enable_disable = bool(re.search(
        r"""register\(\s*["']action["']\s*,\s*(?:argparse\.)?BooleanOptionalAction\s*,\s*EnableDisableAction""",
        text))
    return {
        "underscores": underscores,
        "dotted_json": "create_nested_dict" in body or '"." in processed_arg' in body,
        "config_file": "_pull_args_from_config" in body,
        "short_O": short_o,
        "enable_disable": enable_disable,
        "abbrev": "allow_abbrev=False" not in body,
    }


def read_commit(tree: SourceTree) -> str | None:
    mod = tree.module("vllm._version")
    if mod is None:
        return None
    for stmt in mod.tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str):
            names = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
            if names & {"__commit_id__", "commit_id"}:
                commit = stmt.value.value
                return commit[1:] if commit.startswith("g") and len(commit) > 7 else commit
    return None


def read_version(tree: SourceTree) -> str | None:
    mod = tree.module("vllm._version")
    if mod is None:
        return None
    for stmt in mod.tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
            names = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
            if "__version__" in names:
                return str(stmt.value.value)
    return None


def _make_hooks(session: Session, size_fields: dict[str, bool]) -> dict:
    def get_kwargs(ev: Evaluator, args: list, kwargs: dict) -> Any:
        return compute_kwargs(ev, args[0] if args else kwargs.get("cls"), size_fields)

    def get_field(ev: Evaluator, args: list, kwargs: dict) -> Any:
        if len(args) < 2 or not isinstance(args[0], ClassRef):
            return Unknown("get_field")
        for f in ev.dataclass_fields(args[0]):
            if f.name == args[1]:
                if isinstance(f.default, FieldSpec):
                    return FieldSpec(f.default.default, f.default.default_factory, f.default.metadata)
                return FieldSpec(default=f.default)
        return Unknown(f"get_field({args[1]})")

    def passthrough(ev: Evaluator, args: list, kwargs: dict) -> Any:
        return args[0] if args else Unknown("passthrough")

    def new_parser(ev: Evaluator, args: list, kwargs: dict) -> Any:
        return ParserToken(session, session.new("root"))

    return {
        "get_kwargs": get_kwargs,
        "_compute_kwargs": get_kwargs,
        "get_field": get_field,
        "optional_type": passthrough,
        "parse_type": passthrough,
        "get_attr_docs": lambda ev, a, k: {},
        "class:FlexibleArgumentParser": new_parser,
        "argparse.ArgumentParser": new_parser,
    }


def _run_entry(ev: Evaluator, tree: SourceTree, session: Session) -> tuple[str, Any]:
    serve = tree.module("vllm.entrypoints.cli.serve")
    if serve is not None and serve.find_class("ServeSubcommand") is not None:
        cls = ClassRef(serve, serve.find_class("ServeSubcommand"))
        method = ev.class_attr(cls, "subparser_init", bind=Instance(cls))
        if isinstance(method, FuncRef):
            ev.call(method, [SubparsersToken(session)], {})
            reg = session.find("serve")
            if reg is not None and reg.actions:
                return "vllm/entrypoints/cli/serve.py", reg
    scripts = tree.module("vllm.scripts")
    if scripts is not None and "main" in scripts.defs:
        main = ev.global_value(scripts, "main")
        if isinstance(main, FuncRef):
            ev.call(main, [], {})
            reg = session.find("serve")
            if reg is not None and reg.actions:
                return "vllm/scripts.py", reg
    arg_utils = tree.module("vllm.engine.arg_utils")
    reg = session.new("serve-fallback")
    if arg_utils is not None:
        cls = ev.global_value(arg_utils, "AsyncEngineArgs")
        if isinstance(cls, ClassRef):
            ev.call(ev.class_attr(cls, "add_cli_args"), [ParserToken(session, reg)], {})
    return "vllm/engine/arg_utils.py", reg


def engine_defaults(ev: Evaluator, tree: SourceTree) -> dict[str, tuple[Any, str | None]]:
    """EngineArgs dataclass defaults (what ``LLM(...)`` / ``EngineArgs(...)`` start from)."""
    mod = tree.module("vllm.engine.arg_utils")
    if mod is None:
        return {}
    cls = ev.global_value(mod, "EngineArgs")
    if not isinstance(cls, ClassRef):
        return {}
    out = {}
    for f in ev.dataclass_fields(cls):
        value = ev.field_default(f)
        if value is MISSING:
            continue
        out[f.name] = to_json(value)
    return out


def extract_release(src_root: Path, version: str | None = None) -> dict[str, Any]:
    tree = SourceTree(Path(src_root))
    session = Session()
    size_fields = size_fields_of(Evaluator(tree), "vllm.engine.arg_utils")
    ev = Evaluator(tree, _make_hooks(session, size_fields))
    behaviour = parser_behaviour(tree)
    try:
        entry, registry = _run_entry(ev, tree, session)
    except BudgetExceeded:
        raise RuntimeError("interpreter budget exceeded while building the serve parser")
    flags = flag_records(ev, registry, behaviour["enable_disable"])
    if not flags:
        raise RuntimeError("no flags found: the serve parser could not be reconstructed")

    ev.budget = ev.steps + 3_000_000
    engine = engine_defaults(ev, tree)
    for rec in flags:
        if rec["dest"] in engine:
            value, rep = engine[rec["dest"]]
            if (value, rep) != (rec["default"], rec.get("default_repr")):
                rec["engine_default"] = value
                if rep is not None:
                    rec["engine_default_repr"] = rep
    ev.budget = ev.steps + 3_000_000
    env = extract_env(ev)
    return {
        "format": FORMAT_VERSION,
        "version": version or read_version(tree),
        "commit": read_commit(tree),
        "entry": entry,
        "parser": behaviour,
        "flags": flags,
        "env": env,
        "_diagnostics": {"interpreter_errors": len(ev.errors), "steps": ev.steps},
    }
