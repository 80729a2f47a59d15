"""Regenerate dtype_oracle_vllm-<version>.json from vLLM's own dtype resolution.

Run with the python of an installed vLLM (the CPU build is enough):

    .venv-vllm/bin/python tests/unit/model/gen_dtype_oracle.py

It calls ``vllm.config.model._resolve_auto_dtype`` and ``_check_valid_dtype`` with the CUDA
platform's ``supported_dtypes`` for each compute capability (platforms/cuda.py), so the
oracle is vLLM's code, not a copy of it.
"""

from __future__ import annotations

import itertools
import json
import sys
import types
from pathlib import Path

import torch
import vllm
import vllm.config.model as vm

NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
CCS = {(9, 0): [torch.bfloat16, torch.float16, torch.float32], (8, 0): [torch.bfloat16, torch.float16, torch.float32],
       (7, 5): [torch.float16, torch.float32], (7, 0): [torch.float16, torch.float32]}


def main() -> None:
    cases = []
    for (cc, dtypes), model_type, cfg, flag in itertools.product(
        CCS.items(), ("llama", "qwen3", "gemma2", "gemma3", "glm4"), ("bfloat16", "float16", "float32"),
        ("auto", "half", "bfloat16", "float", "float32"),
    ):
        vm.current_platform = types.SimpleNamespace(
            supported_dtypes=dtypes, get_device_name=lambda: "GPU",
            get_device_capability=lambda: None, is_cpu=lambda: False,
        )
        cfg_dtype = getattr(torch, cfg)
        if flag == "auto":
            got = vm._resolve_auto_dtype(model_type, cfg_dtype, is_pooling_model=False)
        else:
            got = vm._STR_DTYPE_TO_TORCH_DTYPE[flag]
        try:
            vm._check_valid_dtype(model_type, got)
            error = None
        except ValueError as exc:
            error = str(exc)
        cases.append({"cc": list(cc), "model_type": model_type, "config_dtype": cfg, "flag": flag,
                      "dtype": NAMES[got], "refused": error})
    out = Path(__file__).parent / "data" / f"dtype_oracle_vllm-{vllm.__version__.split('+')[0]}.json"
    out.write_text(json.dumps({"vllm": vllm.__version__, "cases": cases}, indent=1) + "\n")
    print(f"{len(cases)} cases -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
