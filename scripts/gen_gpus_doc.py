"""Write docs/gpus.md from the GPU catalog (src/oomguard/data/gpus.json).

    python scripts/gen_gpus_doc.py          # rewrite docs/gpus.md
    python scripts/gen_gpus_doc.py --check  # exit 1 when docs/gpus.md is stale (the unit tests run this)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from oomguard.inputs.hardware import _archs, catalog_rows  # noqa: E402

DOC = ROOT / "docs" / "gpus.md"


def render() -> str:
    rows = catalog_rows()
    out = [
        "# GPUs",
        "",
        "Generated from `src/oomguard/data/gpus.json` by `scripts/gen_gpus_doc.py` (do not edit by hand).",
        "`--gpu` takes any name or alias below; case, spaces, dashes and the vendor's words are ignored.",
        "",
        "**total GiB** is the total memory torch reports (`torch.cuda.mem_get_info()[1] / 2^30`), the number",
        "vLLM multiplies by `--gpu-memory-utilization`. *log*: printed in a published log (the source names it);",
        "*derived*: from the vendor's size with the stated formula, within the stated range. When your log prints",
        "another total, pass it: `--gpu-memory-gib X`.",
        "",
        f"{len(rows)} cards, {len(_archs())} compute targets.",
        "",
        "| card | aliases | target | total GiB | how | dtypes | FP8 | FP4 | interconnect | P2P | source |",
        "|---|---|---|---:|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        target = f"sm {r['cc']}" if r["platform"] == "cuda" else f"{r['arch']} ({r['platform']})"
        dt = ", ".join(d.replace("bfloat16", "bf16").replace("float16", "fp16").replace("float32", "fp32") for d in r["dtypes"])
        out.append(
            f"| {r['name']} | {', '.join(r.get('aliases', []))} | {target} | {r['total_gib']:.2f} | {r['total_source']} | {dt} | "
            f"{r['fp8']} | {r['fp4']} | {r['interconnect']} | {'yes' if r.get('p2p', True) else 'no'} | {r['source']} |"
        )
    out += ["", "## Compute targets", "", "| target | platform | capability vLLM reports | what the memory model reads | source |", "|---|---|---|---|---|"]
    for name, a in _archs().items():
        facts = [f"dtypes {', '.join(a['dtypes'])}", f"fp8 {a['fp8']}", f"fp4 {a['fp4']}", f"fp8 KV {'yes' if a['fp8_kv'] else 'no'}"]
        if a.get("mla_fp8_block_size"):
            facts.append(f"MLA block {a['mla_fp8_block_size']} with an fp8 KV cache")
        if a.get("default_block_size"):
            facts.append(f"block size {a['default_block_size']}")
        if "custom_all_reduce" in a:
            facts.append(f"custom all-reduce {'on' if a['custom_all_reduce'] else 'off'}")
        if a.get("nvls"):
            facts.append("NVLS on NVSwitch boards")
        out.append(f"| {name} | {a['platform']} | {a['cc']} | {'; '.join(facts)} | {a['source']} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC.relative_to(ROOT)} is stale: run python scripts/gen_gpus_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
