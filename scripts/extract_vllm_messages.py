#!/usr/bin/env python3
"""Derive the catalog of error messages vLLM can print from vLLM's own source (``ast``), for diagnose.

    python scripts/extract_vllm_messages.py [--vllm DIR[=RELEASE]]... [--out FILE] [--check]

Reads every ``.py`` file of one or more vLLM source trees (default: the installed 0.32 of
``.venv-vllm``; older releases unpacked from their wheels with ``pip download vllm==X --no-deps``
and ``unzip 'vllm/*.py'``) and collects the messages of

- ``raise XxxError(<message>)`` (and ``raise XxxError(msg)`` where ``msg`` was assigned a message
  in the same function),
- ``logger.error / error_once / exception / critical / fatal / warning / warning_once`` (debug and
  info are not failures and are dropped),
- argparse's ``parser.error(<message>)``,
- ``assert cond, <message>``.

Messages become templates: literal text with ``{}`` for a formatted value (``{n}`` when the format
says it is a number: ``%d``, ``:.2f``, ``%.1f``...); f-strings, ``%``-formatting, ``str.format`` and
concatenated literals are all read. Messages of fewer than ``MIN_WORDS`` literal words say too little
to recognise and are dropped.

Each template gets a failure class from where it is raised (``CLASS_RULES``: module, function,
exception type; a few words for the rules that need them), not per message; the rules leave some
unclassed (``"c": null``): they stay in the catalog, so a line that matches one of them better
is not taken for another class's message. Messages from outside vLLM that vLLM logs show (torch's
CUDA / HIP errors, NCCL's, Python's import errors, pydantic's wrapper) come from ``EXTERNAL``,
written from those projects' documented messages.

The output (``src/oomguard/data/vllm_messages.json``) holds only the derived templates and where they
come from (module, function, exception or log level, releases), never vLLM's code. With several
``--vllm`` trees a template seen in more than one release is stored once with all its releases.
``tests/unit/diagnose/test_message_catalog.py`` checks that the committed catalog's 0.32 entries are
exactly what this script derives from the installed 0.32 (skipped when it is absent).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VLLM = ROOT / ".venv-vllm" / "lib" / "python3.11" / "site-packages" / "vllm"
OUT = ROOT / "src" / "oomguard" / "data" / "vllm_messages.json"
MIN_WORDS = 4
FORMAT = 1

LOG_LEVELS = {"error": "error", "error_once": "error", "exception": "error", "critical": "critical",
              "fatal": "critical", "warning": "warning", "warning_once": "warning", "warn": "warning"}
_LOGGER_NAMES = re.compile(r"^_?(?:logger|log|LOGGER|_LOGGER)$")
_PARSER_NAMES = re.compile(r"parser$")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*")
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?([sdifgeExXrc%])")
_BRACE = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


# --- templates from expressions ----------------------------------------------------------------

class Unreadable(Exception):
    pass


def _spec_is_number(spec: ast.expr | None) -> bool:
    if spec is None:
        return False
    text = "".join(v.value for v in getattr(spec, "values", ()) if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return bool(text) and text[-1:] in "dfgeEn%xXbo"


def _percent(fmt: str) -> str:
    def repl(m: re.Match[str]) -> str:
        kind = m.group(1)
        if kind == "%":
            return "%"
        return "{n}" if kind in "difgeExX" else "{}"
    return _PERCENT.sub(repl, fmt.replace("{", "{{").replace("}", "}}"))


def _brace_format(fmt: str) -> str:
    def repl(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok in ("{{", "}}"):
            return tok
        return "{n}" if ":" in tok and tok[-2:-1] in tuple("dfgeEn%") else "{}"
    return _BRACE.sub(repl, fmt)


def template(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> str:
    """The message an expression builds, literal braces doubled, formatted values as ``{}`` / ``{n}``."""
    if depth > 6:
        raise Unreadable
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value).replace("{", "{{").replace("}", "}}"))
            elif isinstance(v, ast.FormattedValue):
                out.append("{n}" if _spec_is_number(v.format_spec) else "{}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template(node.left, names, depth + 1) + template(node.right, names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
            and isinstance(node.left.value, str):
        return _percent(node.left.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        return _brace_format(node.func.value.value)
    if isinstance(node, ast.Name) and node.id in names:
        return template(names[node.id], names, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
        return template(node.args[0], names, depth + 1)
    raise Unreadable


def literal_words(tpl: str) -> list[str]:
    return _WORD.findall(re.sub(r"\{n?\}", " ", tpl))


# --- walking a source tree ---------------------------------------------------------------------

class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.func: list[str] = []
        self.validator: list[bool] = []
        self.names: list[dict[str, ast.expr]] = [{}]
        self.found: list[dict] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        decorators = " ".join(ast.unparse(d) for d in node.decorator_list)
        self.func.append(node.name)
        self.validator.append("validator" in decorators)
        names: dict[str, ast.expr] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                names.setdefault(sub.targets[0].id, sub.value)
        self.names.append(names)
        self.generic_visit(node)
        self.names.pop()
        self.validator.pop()
        self.func.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def _add(self, node: ast.expr | None, kind: str) -> None:
        if node is None:
            return
        try:
            tpl = template(node, self.names[-1])
        except Unreadable:
            return
        tpl = " ".join(tpl.split())
        if len(literal_words(tpl)) < MIN_WORDS:
            return
        self.found.append({"t": tpl, "m": self.module, "f": ".".join(self.func) or "<module>", "x": kind,
                           "v": bool(self.validator and self.validator[-1])})

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            func = exc.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name:
                self._add(exc.args[0], name)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        self._add(node.msg, "AssertionError")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and node.args:
            owner = func.value
            owner_name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if func.attr in LOG_LEVELS and _LOGGER_NAMES.match(owner_name):
                self._add(node.args[0], LOG_LEVELS[func.attr])
            elif func.attr == "error" and _PARSER_NAMES.search(owner_name):
                self._add(node.args[0], "argparse")
        self.generic_visit(node)


def extract_tree(root: Path) -> list[dict]:
    """Every message of one vLLM source tree, in file order (``m`` is the module path under vllm/)."""
    found: list[dict] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("").as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        visitor = _Visitor(rel)
        visitor.visit(tree)
        found += visitor.found
    return found


def release_of(root: Path) -> str:
    for name in ("_version.py", "version.py"):
        path = root / name
        if path.exists():
            m = re.search(r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([0-9][^'"+]*)""", path.read_text())
            if m:
                return m.group(1)
    raise SystemExit(f"{root}: no release found (give it as DIR=RELEASE)")


# --- where a message is raised -> failure class -------------------------------------------------
# (name, test on (module, function, exception/level, lower-case text), class). First match wins; reviewed by
# hand, one rule per place in vLLM, never per message. Text tests only where the place alone cannot say
# (an import guard anywhere; the max_model_len checks among the config checks).

def _has(*words: str):
    return lambda t: any(w in t for w in words)


_IMPORT_WORDS = _has("please install", "pip install", "is not installed", "not installed.", "failed to import",
                     "could not import", "cannot import", "requires the", "is required for", "install it with")
_MAXLEN = _has("max_model_len", "max model len", "max_position_embeddings", "maximum model length",
               "max seq len", "model's max", "context length")
_MEMORY = _has("memory", "gib", "blocks")

CLASS_RULES: tuple[tuple[str, object, str], ...] = (
    ("import errors and import guards",
     lambda m, f, x, t: x in ("ImportError", "ModuleNotFoundError") or (x != "warning" and _IMPORT_WORDS(t)),
     "missing-dependency"),
    ("the KV pool cannot be sized (kv_cache_utils, the KV memory checks)",
     lambda m, f, x, t: m.endswith("core/kv_cache_utils") and "available memory for the cache" in t, "no-kv-memory"),
    ("the auto-fit of max_model_len finds no room", lambda m, f, x, t: m.endswith("core/kv_cache_utils")
     and "auto_fit" in f, "no-kv-memory"),
    ("the KV pool cannot hold one request (kv_cache_utils' memory checks)",
     lambda m, f, x, t: m.endswith("core/kv_cache_utils") and ("enough_kv_cache" in f or "check_" in f) and _MEMORY(t),
     "kv-too-small"),
    ("V0's block check after the profile (max seq len vs KV tokens)",
     lambda m, f, x, t: ("engine/llm_engine" in m or "worker" in m or "cache_engine" in m) and "max seq len" in t
     and "kv cache" in t, "kv-too-small"),
    ("no memory left for cache blocks (workers, executors)",
     lambda m, f, x, t: ("worker" in m or "executor" in m or "engine" in m) and "available memory for the cache" in t,
     "no-kv-memory"),
    ("Mamba / linear-attention state blocks",
     lambda m, f, x, t: "mamba" in t and ("blocks" in t or "max_num_seqs" in t), "mamba-state-limit"),
    ("the workers' free-memory check at start-up (worker/, mem_utils)",
     lambda m, f, x, t: ("worker" in m or "mem_utils" in m or "platforms" in m)
     and ("free memory" in t or "memory profiling" in t or "available memory on node" in t
          or "desired gpu memory utilization" in t), "startup-free-memory"),
    ("an OOM in the sampler / pooler warm-up or the profile run (the model runners' dummy runs)",
     lambda m, f, x, t: "worker" in m and ("out of memory" in t or "oom" in t.split())
     and ("dummy" in f or "profile" in f or "warm" in f or "sampler" in t), "profile-oom"),
    ("the weights do not fit (model loaders, load_model)",
     lambda m, f, x, t: ("model_loader" in m or "load" in f) and ("not enough" in t or "out of memory" in t)
     and "memory" in t, "weights-oom"),
    ("collective communication (distributed/device_communicators, NCCL wrappers)",
     lambda m, f, x, t: "device_communicators" in m or "pynccl" in m or "nccl" in f.lower(), "nccl-error"),
    ("chat templates (entrypoints/chat_utils, jinja, tokenizers' chat template)",
     lambda m, f, x, t: "chat_utils" in m or "jinja" in m or "chat_template" in f or "chat template" in t,
     "chat-template-error"),
    ("Ray placement groups (executor/ray_*)",
     lambda m, f, x, t: "ray" in m and ("placement" in t or "placement" in f or "gpu available" in t
                                        or "available gpus" in t), "ray-placement-timeout"),
    ("max_model_len above the model's (config/, *_verify_*, the model's context checks)",
     lambda m, f, x, t: (m.startswith("config") or "verify" in f or "arg_utils" in m) and _MAXLEN(t)
     and ("derived" in t or "greater than" in t or "exceeds" in t or "larger than" in t or "longer than" in t),
     "max-len-exceeds-model"),
    ("a request's parameters refused (sampling / pooling params, the OpenAI server's request checks, structured "
     "output): the server answers 400 and keeps running, no class",
     lambda m, f, x, t: x == "VLLMValidationError" or m.startswith(("sampling_params", "pooling_params",
                                                                   "v1/structured_output", "entrypoints/openai",
                                                                   "entrypoints/pooling", "entrypoints/serve"))
     and "cli_args" not in m and "chat_utils" not in m, None),
    ("illegal memory access / device asserts", lambda m, f, x, t: "illegal memory access" in t, "illegal-memory-access"),
    ("argparse and the CLI (engine/arg_utils, entrypoints/*cli_args, utils/argparse_utils, parser.error)",
     lambda m, f, x, t: x == "argparse" or "arg_utils" in m or "cli_args" in m or "argparse" in m
     or m.startswith("entrypoints/cli"), "bad-argument"),
    ("configuration checks (config/, *_verify_*, pydantic validators of the configs, platform checks)",
     lambda m, f, x, t: m.startswith("config") or m == "config" or "verify" in f or "validate" in f
     or m.startswith("platforms") or m.startswith("engine/") or f.endswith("__post_init__"), "config-error"),
    ("a feature not supported (NotImplementedError raised at start-up)",
     lambda m, f, x, t: x == "NotImplementedError" and ("support" in t or "implemented" in t), "config-error"),
)


def classify(entry: dict) -> str | None:
    m, f, x, t = entry["m"], entry["f"], entry["x"], entry["t"].lower()
    for _name, test, cls in CLASS_RULES:
        if test(m, f, x, t):  # type: ignore[operator]
            return cls
    return None


# --- messages from outside vLLM that its logs show -----------------------------------------------
# (template, where it comes from, exception / level, class); written from the projects' documented messages.
EXTERNAL: tuple[tuple[str, str, str, str | None], ...] = (
    # torch (c10/cuda/CUDAException.h, the CUDA runtime's cudaGetErrorString texts; HIP's are the same words)
    ("CUDA error: an illegal memory access was encountered", "torch/cuda", "RuntimeError", "illegal-memory-access"),
    ("HIP error: an illegal memory access was encountered", "torch/hip", "RuntimeError", "illegal-memory-access"),
    ("CUDA error: device-side assert triggered", "torch/cuda", "RuntimeError", "illegal-memory-access"),
    ("CUDA error: misaligned address", "torch/cuda", "RuntimeError", "illegal-memory-access"),
    ("CUDA error: an illegal instruction was encountered", "torch/cuda", "RuntimeError", "illegal-memory-access"),
    ("CUDA error: unspecified launch failure", "torch/cuda", "RuntimeError", "illegal-memory-access"),
    ("CUDA kernel errors might be asynchronously reported at some other API call", "torch/cuda", "RuntimeError", None),
    # a driver older than the CUDA the torch / vLLM wheel was built for: the install's fault (the corpus labels
    # these missing-dependency: C03-24..26)
    ("The NVIDIA driver on your system is too old (found version {n})", "torch/cuda", "RuntimeError",
     "missing-dependency"),
    ("CUDA driver version is insufficient for CUDA runtime version", "torch/cuda", "RuntimeError",
     "missing-dependency"),
    ("Found no NVIDIA driver on your system", "torch/cuda", "RuntimeError", "config-error"),
    ("no kernel image is available for execution on the device", "torch/cuda", "RuntimeError", "config-error"),
    ("Torch not compiled with CUDA enabled", "torch/cuda", "AssertionError", "missing-dependency"),
    ("Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False", "torch/serialization",
     "RuntimeError", "config-error"),
    # NCCL (nccl.h ncclGetErrorString, torch's ProcessGroupNCCL)
    ("NCCL error in: {}, unhandled system error", "nccl", "DistBackendError", "nccl-error"),
    ("NCCL error in: {}, unhandled cuda error", "nccl", "DistBackendError", "nccl-error"),
    ("NCCL error in: {}, internal error", "nccl", "DistBackendError", "nccl-error"),
    ("NCCL error in: {}, remote process exited or there was a network error", "nccl", "DistBackendError", "nccl-error"),
    ("NCCL error in: {}, invalid usage", "nccl", "DistBackendError", "nccl-error"),
    ("ncclUnhandledCudaError: Call to CUDA function failed", "nccl", "DistBackendError", "nccl-error"),
    ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error",
     "nccl", "DistBackendError", "nccl-error"),
    ("ncclInternalError: Internal check failed", "nccl", "DistBackendError", "nccl-error"),
    ("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely",
     "nccl", "DistBackendError", "nccl-error"),
    ("Watchdog caught collective operation timeout: WorkNCCL({}) ran for {n} milliseconds before timing out",
     "torch/distributed", "DistBackendError", "nccl-error"),
    ("Error while creating shared memory segment {} (size {n})", "nccl", "error", "nccl-error"),
    # Python's import machinery, the dynamic loader
    ("No module named {}", "python/import", "ModuleNotFoundError", "missing-dependency"),
    ("cannot import name {} from {}", "python/import", "ImportError", "missing-dependency"),
    ("{}: cannot open shared object file: No such file or directory", "python/dlopen", "ImportError",
     "missing-dependency"),
    ("{}: undefined symbol: {}", "python/dlopen", "ImportError", "missing-dependency"),
    # pydantic's ValidationError wrapper: it says nothing of the class (the inner "Value error, ..." is vLLM's own
    # message, matched by its own template), so it stays unclassed
    ("{n} validation error for {}", "pydantic", "ValidationError", None),
    ("{n} validation errors for {}", "pydantic", "ValidationError", None),
    ("Input should be a valid {}", "pydantic", "ValidationError", "bad-argument"),
    ("Extra inputs are not permitted", "pydantic", "ValidationError", "bad-argument"),
    # argparse's own
    ("{}: error: unrecognized arguments: {}", "argparse", "argparse", "bad-argument"),
    ("{}: error: argument {}: invalid choice: {}", "argparse", "argparse", "bad-argument"),
    ("{}: error: argument {}: expected one argument", "argparse", "argparse", "bad-argument"),
    ("{}: error: the following arguments are required: {}", "argparse", "argparse", "bad-argument"),
    # transformers (the chat template of a tokenizer without one)
    ("Cannot use chat template functions because tokenizer.chat_template is not set and no template argument was "
     "passed", "transformers", "ValueError", "chat-template-error"),
)


# --- the catalog ------------------------------------------------------------------------------

def _extract_cached(root: Path, release: str, cache: Path | None) -> list[dict]:
    """``extract_tree``, kept in ``cache`` (a scratch folder, never committed) so that reviewing the class rules
    does not re-read five source trees each time."""
    if cache is None:
        return extract_tree(root)
    path = cache / f"{release}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    found = extract_tree(root)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found), encoding="utf-8")
    return found


def build(trees: list[tuple[Path, str]], cache: Path | None = None) -> dict:
    by_text: dict[str, dict] = {}
    # newest first: a template several releases share is stored with where the newest one raises it
    for root, release in sorted(trees, key=lambda tr: _release_key(tr[1]), reverse=True):
        for entry in _extract_cached(root, release, cache):
            key = entry["t"]
            known = by_text.get(key)
            if known is None:
                entry["r"] = [release]
                by_text[key] = entry
            elif release not in known["r"]:
                known["r"].append(release)
    entries = []
    for entry in by_text.values():
        out = {"t": entry["t"], "m": entry["m"], "f": entry["f"], "x": entry["x"], "c": classify(entry),
               "r": sorted(entry["r"], key=_release_key)}
        if entry.get("v"):
            out["v"] = 1
        entries.append(out)
    for tpl, where, exc, cls in EXTERNAL:
        entries.append({"t": tpl, "m": where, "f": "", "x": exc, "c": cls, "r": []})
    entries.sort(key=lambda e: (e["m"], e["f"], e["t"]))
    with_anchors(entries)
    return {"format": FORMAT, "releases": sorted({r for _, r in trees}, key=_release_key),
            "source": "derived by scripts/extract_vllm_messages.py from vLLM's source (ast); no vLLM code",
            "rules": [name for name, _test, _cls in CLASS_RULES], "messages": entries}


def with_anchors(entries: list[dict]) -> list[dict]:
    """Each entry's anchor words (``a``), chosen by the matcher's own rule (diagnose/parsers/messages.py)."""
    sys.path.insert(0, str(ROOT / "src"))
    from oomguard.diagnose.parsers.messages import choose_anchors

    for m, anchors in zip(entries, choose_anchors([m["t"] for m in entries])):
        m["a"] = anchors
    return entries


def _release_key(r: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", r)[:3])


def dump(catalog: dict) -> str:
    # one message a line: a diff of the catalog reads as the messages that changed
    head = {k: v for k, v in catalog.items() if k != "messages"}
    lines = [json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in catalog["messages"]]
    return json.dumps(head, ensure_ascii=False)[:-1] + ', "messages": [\n' + ",\n".join(lines) + "\n]}\n"


def merge_with(existing: dict, fresh: dict, releases: set[str]) -> dict:
    """The catalog with ``releases`` re-derived and every other release's entries kept as they were."""
    keep = [dict(m, r=[r for r in m["r"] if r not in releases]) for m in existing["messages"] if m["r"]]
    by_text = {m["t"]: m for m in keep if m["r"]}
    for m in fresh["messages"]:
        if not m["r"]:
            continue
        old = by_text.get(m["t"])
        if old is None:
            by_text[m["t"]] = m
        else:
            old["r"] = sorted(set(old["r"]) | set(m["r"]), key=_release_key)
    entries = list(by_text.values())
    for m in fresh["messages"]:
        if not m["r"]:
            entries.append(m)
    for m in entries:
        m["c"] = classify(m)
    entries.sort(key=lambda e: (e["m"], e["f"], e["t"]))
    with_anchors(entries)
    return dict(fresh, releases=sorted(set(existing.get("releases", ())) | releases, key=_release_key),
                messages=entries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm", action="append", metavar="DIR[=RELEASE]",
                        help=f"a vLLM source tree (the vllm/ package folder); default {DEFAULT_VLLM}")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--update", action="store_true",
                        help="re-derive the given releases and keep the other releases' entries of --out")
    parser.add_argument("--raw-cache", type=Path, help="keep each release's raw extract here (scratch)")
    parser.add_argument("--unclassed", action="store_true", help="list the templates no rule classes")
    args = parser.parse_args(argv)
    trees = []
    for spec in args.vllm or [str(DEFAULT_VLLM)]:
        path, _, release = spec.partition("=")
        root = Path(path)
        if not (root / "__init__.py").exists() and not (args.raw_cache and release
                                                         and (args.raw_cache / f"{release}.json").exists()):
            print(f"{root}: not a vllm package folder", file=sys.stderr)
            return 2
        trees.append((root, release or release_of(root)))
    catalog = build(trees, args.raw_cache)
    if args.update and args.out.exists():
        catalog = merge_with(json.loads(args.out.read_text(encoding="utf-8")), catalog, {r for _, r in trees})
    if args.unclassed:
        for m in catalog["messages"]:
            if m["c"] is None and m["x"] not in ("warning",):
                print(f"{m['m']}:{m['f']} [{m['x']}] {m['t']}")
        return 0
    args.out.write_text(dump(catalog), encoding="utf-8")
    counts: dict[str, int] = {}
    for m in catalog["messages"]:
        counts[m["c"] or "(unclassed)"] = counts.get(m["c"] or "(unclassed)", 0) + 1
    print(f"{args.out}: {len(catalog['messages'])} templates from {', '.join(catalog['releases'])}; "
          + ", ".join(f"{c} {n}" for c, n in sorted(counts.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
