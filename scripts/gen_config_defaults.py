"""Write src/oomguard/data/config_defaults.json: the config-class defaults oomguard fills in.

Run it with a Python that has transformers (and vLLM, for vLLM's own config classes) installed,
e.g. the vLLM CPU venv:

    .venv-vllm/bin/python scripts/gen_config_defaults.py            # add/replace this release
    .venv-vllm/bin/python scripts/gen_config_defaults.py --check    # exit 1 when the file differs

One entry per model_type that the vLLM model registry can reach (its architectures through
transformers' auto-model tables, vLLM's own config classes in transformers_utils/configs), every
model_type of the bundled catalog, and the nested configs those build, recursively. Each entry is
``oomguard.inputs.config_defaults.class_entry`` of the class: declared defaults of the fields the
plan reads (PLAN_FIELDS), name aliases, nested config types. Releases already in the file are kept:
run it once per transformers release to add that release.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "scripts"))

from oomguard.inputs.config_defaults import DATA_FILE as _DATA_FILE, class_entry  # noqa: E402

DATA_FILE = Path(_DATA_FILE)


def reachable_model_types() -> tuple[dict, dict]:
    """{model_type: config class}, {model_type: origin} for the registry, catalog and nesting."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    import vllm_registry_sweep as sweep

    want: set[str] = set()
    tf_types = sweep._transformers_model_types()
    for row in sweep.registry_rows():
        want.update(mt for mt in tf_types.get(row["architecture"], []) if mt in CONFIG_MAPPING)
    for cfgs in sweep._catalog_configs().values():
        for _, cfg in cfgs:
            for holder in (cfg, *(cfg.get(k) for k in ("text_config", "vision_config", "audio_config"))):
                if isinstance(holder, dict) and holder.get("model_type"):
                    want.add(str(holder["model_type"]))
    classes: dict = {}
    origin: dict = {}
    vllm_keys = list(_CONFIG_REGISTRY.keys())
    for mt in vllm_keys:
        want.add(mt)
    todo = sorted(want)
    while todo:
        mt = todo.pop()
        if mt in classes:
            continue
        cls = None
        if mt in vllm_keys:
            try:
                cls = _CONFIG_REGISTRY[mt]
                origin[mt] = f"vLLM {_vllm_version().split('+')[0]} {cls.__name__}"
            except Exception:  # noqa: BLE001 - a lazily imported class that fails to import
                cls = None
        if cls is None and mt in CONFIG_MAPPING:
            cls = CONFIG_MAPPING[mt]
            origin.pop(mt, None)
        if cls is None:
            continue
        classes[mt] = cls
        for sub_mt in (class_entry(cls).get("sub_configs") or {}).values():
            if sub_mt not in classes:
                todo.append(sub_mt)
    return classes, origin


def _vllm_version() -> str:
    import importlib.metadata as md

    return md.version("vllm")


def build() -> dict:
    import transformers

    classes, origin = reachable_model_types()
    entries = {}
    for mt in sorted(classes):
        try:
            entries[mt] = class_entry(classes[mt])
        except Exception as exc:  # noqa: BLE001 - reported, the rest still written
            print(f"skipped {mt}: {type(exc).__name__}: {exc}", file=sys.stderr)
    doc = json.loads(DATA_FILE.read_text()) if DATA_FILE.is_file() else {}
    releases = doc.get("releases") or {}
    releases[transformers.__version__] = {"model_types": entries, "origin": dict(sorted(origin.items()))}
    return {
        "generated_by": "scripts/gen_config_defaults.py",
        "note": "declared defaults of the fields oomguard's plan reads, per transformers release; "
                "origin names the model_types whose class is vLLM's own (transformers_utils/configs)",
        "releases": dict(sorted(releases.items())),
    }


def dump(doc: dict) -> str:
    lines = ["{", f' "generated_by": {json.dumps(doc["generated_by"])},', f' "note": {json.dumps(doc["note"])},', ' "releases": {']
    rels = []
    for rel, body in doc["releases"].items():
        mts = ",\n".join(f"   {json.dumps(mt)}: {json.dumps(e, sort_keys=True)}" for mt, e in body["model_types"].items())
        rels.append(f'  {json.dumps(rel)}: {{\n  "origin": {json.dumps(body.get("origin", {}), sort_keys=True)},\n  "model_types": {{\n{mts}\n  }}}}')
    lines.append(",\n".join(rels))
    lines.append(" }\n}\n")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = dump(build())
    if args.check:
        return 0 if DATA_FILE.is_file() and DATA_FILE.read_text() == text else 1
    DATA_FILE.write_text(text)
    n = sum(len(r["model_types"]) for r in json.loads(text)["releases"].values())
    print(f"wrote {DATA_FILE.relative_to(REPO)} ({len(text):,} bytes, {n} model_types)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
