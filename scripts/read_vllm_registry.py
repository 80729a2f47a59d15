"""Read a vLLM release's model registry from its source, without importing it.

    pip download vllm==0.33.0 --no-deps -d /tmp/v33          # the release's wheel (its sources)
    python scripts/read_vllm_registry.py /tmp/v33/vllm-0.33.0-*.whl \\
        --out tests/data/oracle/registry_vllm-0.33.0.json

The CUDA wheel cannot be imported here (no GPU, no CUDA torch), so ``registry.py`` is parsed with
``ast``: each ``_*_MODELS`` table's literal entries (architecture -> (module, class)); entries a
table builds by comprehension from another table are that table's entries again and are left out.
The output lists every architecture with its table, module and class, and the release and commit
from ``vllm/_version.py``. scripts/gen_models_doc.py marks the architectures this release adds over
the swept one as "not oracle-checked" in docs/models.md.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from pathlib import Path

REGISTRY = "vllm/model_executor/models/registry.py"
VERSION = "vllm/_version.py"
TABLES = {
    "_TEXT_GENERATION_MODELS": "text-generation",
    "_MULTIMODAL_MODELS": "multimodal",
    "_EMBEDDING_MODELS": "embedding",
    "_LATE_INTERACTION_MODELS": "late-interaction",
    "_REWARD_MODELS": "reward",
    "_TOKEN_CLASSIFICATION_MODELS": "token-classification",
    "_SEQUENCE_CLASSIFICATION_MODELS": "sequence-classification",
    "_TRANSFORMERS_SUPPORTED_MODELS": "transformers-backend-model",
    "_SPECULATIVE_DECODING_MODELS": "speculative-decoding",
    "_TRANSFORMERS_BACKEND_MODELS": "transformers-backend",
}


def _read(source: Path, member: str) -> str:
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as z:
            return z.read(member).decode()
    return (source / member).read_text()


def parse_registry(text: str) -> list[dict]:
    tree = ast.parse(text)
    rows, seen = [], set()
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
        else:
            continue
        if name in TABLES and isinstance(node.value, ast.Dict):
            found[name] = node.value
    for table, kind in TABLES.items():
        d = found.get(table)
        if d is None:
            continue
        for k, v in zip(d.keys, d.values):
            if k is None:  # **{...}: a comprehension over another table
                continue
            arch = ast.literal_eval(k)
            try:
                module, cls = ast.literal_eval(v)
            except ValueError:
                continue
            if arch in seen:
                continue
            seen.add(arch)
            rows.append({"architecture": arch, "table": kind, "module": str(module).replace("vllm.models.", ""), "class": cls})
    return rows


def _assignments(text: str) -> dict:
    """Literal assignments of a module (``__version__ = version = '0.33.0'``), never executed."""
    out: dict = {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name):
                    out[t.id] = value
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="a vLLM wheel, or an unpacked source tree holding vllm/")
    ap.add_argument("--out", default="-")
    args = ap.parse_args()
    rows = parse_registry(_read(args.source, REGISTRY))
    ns = _assignments(_read(args.source, VERSION))
    doc = {"vllm_version": ns.get("__version__"), "commit": str(ns.get("__commit_id__", "")).lstrip("g"),
           "generator": "scripts/read_vllm_registry.py", "registry": rows}
    text = "{\n" + "".join(f' {json.dumps(k)}: {json.dumps(v)},\n' for k, v in doc.items() if k != "registry")
    text += ' "registry": [\n' + ",\n".join("  " + json.dumps(r, sort_keys=True) for r in rows) + "\n ]\n}\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}: {len(rows)} architectures of vLLM {doc['vllm_version']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
