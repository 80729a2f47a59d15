#!/usr/bin/env python3
"""Generate oomguard's per-release vLLM flag tables from the real vLLM wheels.

    python scripts/gen_flag_tables.py 0.34.0            # add one release
    python scripts/gen_flag_tables.py 0.33.0 0.32.0 ... # several
    python scripts/gen_flag_tables.py --all             # regenerate every committed table
    python scripts/gen_flag_tables.py --index           # only rebuild data/flags/option-index.json

For each version: ``pip download vllm==X --no-deps`` into a cache (default
``/tmp/oomguard-vllm``), stream the ``vllm/**/*.py`` members out of the wheel,
delete the wheel, then read the sources with ``ast`` — vLLM is never imported
or executed — and write ``src/oomguard/data/flags/vllm-<version>.json``. After
writing tables it rebuilds ``option-index.json`` (which releases accept each
option: oomguard.versions.option_index) from every committed table.
See docs/versions.md for what the table holds and how it is derived.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from vllm_flag_extract.fetch import fetch  # noqa: E402
from vllm_flag_extract.release import extract_release  # noqa: E402

OUT_DIR = REPO / "src" / "oomguard" / "data" / "flags"

# Run inside an environment that has vLLM installed: dumps the real `vllm serve` parser.
_DUMP_PARSER = r"""
import enum, json, sys
def plain(v):
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        if isinstance(v, enum.Enum):
            return plain(v.value)
        if isinstance(v, (set, frozenset, tuple)):
            return [plain(x) for x in v]
        return {"repr": repr(v)[:80]}
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.entrypoints.cli.serve import ServeSubcommand
import vllm
sub = FlexibleArgumentParser().add_subparsers()
serve = ServeSubcommand().subparser_init(sub)
out = {"version": vllm.__version__, "actions": []}
for a in serve._actions:
    if a.option_strings and type(a).__name__ != "_HelpAction":
        out["actions"].append({"dest": a.dest, "options": list(a.option_strings), "default": plain(a.default),
                               "choices": plain(list(a.choices)) if a.choices is not None else None,
                               "nargs": a.nargs, "cls": type(a).__name__})
json.dump(out, sys.stdout)
"""
_NO_VALUE = {"_StoreTrueAction", "_StoreFalseAction", "BooleanOptionalAction", "EnableDisableAction",
             "_StoreConstAction", "_CountAction"}


def check_against(python: str, table: dict) -> list[str]:
    """Differences between a generated table and the real parser of an installed vLLM."""
    import subprocess

    result = subprocess.run([python, "-c", _DUMP_PARSER], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        return [f"could not run vLLM's parser with {python}: {result.stderr.strip().splitlines()[-1:]}"]
    real = json.loads(result.stdout)
    ours = {f["dest"]: f for f in table["flags"]}
    problems = []
    if real["version"] != table["version"]:
        problems.append(f"installed vLLM is {real['version']}, table is {table['version']}")
    for a in real["actions"]:
        f = ours.pop(a["dest"], None)
        if f is None:
            problems.append(f"{a['options'][0]}: missing from the table")
            continue
        if set(a["options"]) != set(f.get("options", []) + f.get("neg", [])):
            problems.append(f"{a['dest']}: options {sorted(a['options'])} vs {sorted(f.get('options', []) + f.get('neg', []))}")
        default = a["default"]
        suppressed = default == "==SUPPRESS==" and f.get("default_repr") == "argparse.SUPPRESS"
        if not (isinstance(default, dict) and "repr" in default) and not suppressed and default != f.get("default"):
            problems.append(f"{a['dest']}: default {default!r} vs {f.get('default')!r}")
        choices = f.get("choices")
        if (a["choices"] is None) != (choices is None) or (
                choices is not None and sorted(map(str, a["choices"])) != sorted(map(str, choices))):
            problems.append(f"{a['dest']}: choices {a['choices']} vs {choices}")
        if (a["cls"] not in _NO_VALUE) != f["takes_value"]:
            problems.append(f"{a['dest']}: takes a value in vLLM: {a['cls'] not in _NO_VALUE}")
    problems.extend(f"{d}: in the table but not in vLLM's parser" for d in ours)
    return problems

# keys left out of a flag entry when they hold these values (the loader restores them)
_FLAG_DEFAULTS = {"neg": [], "deprecated": False, "group": "engine"}


def _compact_flag(flag: dict) -> dict:
    return {k: v for k, v in flag.items() if _FLAG_DEFAULTS.get(k, object()) != v}


def render(table: dict) -> str:
    """JSON with one flag / env var per line: small, and diffs between releases stay readable."""
    head = {k: table[k] for k in ("format", "version", "commit", "entry", "parser")}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))},")
    lines.append('  "flags": [')
    flags = [json.dumps(_compact_flag(f), separators=(",", ":")) for f in table["flags"]]
    lines.append(",\n".join("    " + f for f in flags))
    lines.append("  ],")
    lines.append('  "env": {')
    env = [f"    {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in table["env"].items()]
    lines.append(",\n".join(env))
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def committed_versions() -> list[str]:
    return sorted(p.name[len("vllm-"):-len(".json")] for p in OUT_DIR.glob("vllm-*.json"))


def write_index() -> Path:
    """Rebuild the package's option index from its committed tables (read with oomguard's own loader)."""
    from oomguard.versions import option_index, releases
    from oomguard.versions.table import _options_of

    releases.supported.cache_clear()  # tables written by this run
    index = option_index.build(releases.supported(), _options_of)
    path = Path(releases.DATA_DIR) / option_index.INDEX_NAME
    path.write_text(option_index.render(index), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help="vLLM releases as on PyPI, e.g. 0.33.0 0.8.5.post1")
    parser.add_argument("--all", action="store_true", help="regenerate every table already committed")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/oomguard-vllm"),
                        help="download/extract cache (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output directory (default: the package data)")
    parser.add_argument("--keep-wheels", action="store_true", help="keep the downloaded wheels in the cache")
    parser.add_argument("--check-against", metavar="PYTHON",
                        help="also compare each table with the parser of the vLLM installed for PYTHON "
                             "(that installation must be the same version)")
    parser.add_argument("--src", type=Path, help="use an already unpacked source tree (directory holding vllm/); "
                                                 "exactly one version")
    parser.add_argument("--index", action="store_true",
                        help="only rebuild the package's option-index.json from its committed tables")
    args = parser.parse_args(argv)
    if args.index:
        print(f"wrote {write_index().relative_to(REPO)}")
        return 0
    versions = list(args.versions) + (committed_versions() if args.all else [])
    if not versions:
        parser.error("give at least one version (or --all)")
    if args.src and len(versions) != 1:
        parser.error("--src takes exactly one version")
    args.out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for version in dict.fromkeys(versions):
        try:
            if args.src:
                root, fetched_note = args.src, "local source"
            else:
                fetched = fetch(version, args.cache, keep_wheel=args.keep_wheels)
                root = fetched.root
                fetched_note = ("wheel/sources cached" if fetched.download_s is None else
                                f"downloaded {fetched.wheel_bytes / 2**20:.0f} MiB in {fetched.download_s:.1f}s")
            start = time.monotonic()
            table = extract_release(root, version)
            diag = table.pop("_diagnostics")
            if table["version"] != version:
                raise RuntimeError(f"wheel reports version {table['version']!r}")
            path = args.out / f"vllm-{version}.json"
            path.write_text(render(table), encoding="utf-8")
            print(f"{version}: {len(table['flags'])} flags, {len(table['env'])} env vars, "
                  f"commit {table['commit'] or '-'}; {fetched_note}; parsed in {time.monotonic() - start:.2f}s "
                  f"({diag['interpreter_errors']} skipped statements) -> {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
            if args.check_against:
                problems = check_against(args.check_against, table)
                print(f"  compared with {args.check_against}: {len(problems)} difference(s)")
                for p in problems:
                    print(f"    {p}")
        except Exception as exc:  # keep going: one bad release should not stop the batch
            failures += 1
            print(f"{version}: FAILED: {exc}", file=sys.stderr)
    if args.out == OUT_DIR:  # the package's own tables changed: the index follows them
        print(f"rebuilt {write_index().relative_to(REPO)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
