"""Regenerate mxfp4_oracle_vllm-<version>.json from vLLM's own MXFP4 padding rule.

    .venv-vllm/bin/python tests/unit/model/gen_mxfp4_oracle.py

Calls ``fused_moe/oracle/mxfp4.py::mxfp4_round_up_hidden_size_and_intermediate_size`` for
each kernel family on CUDA (the CPU build imports it; the rule itself is arithmetic).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import vllm
from vllm.model_executor.layers.fused_moe.oracle import mxfp4 as ox

OURS = {"marlin": "MARLIN", "flashinfer_trtllm": "FLASHINFER_TRTLLM_MXFP4_BF16",
        "flashinfer_cutlass": "FLASHINFER_CUTLASS_MXFP4_BF16", "triton": "TRITON", "emulation": "EMULATION"}


def main() -> None:
    ox.current_platform.is_rocm = lambda: False
    ox.current_platform.is_xpu = lambda: False
    cases = []
    for ours, theirs in OURS.items():
        for hidden, inter in ((2880, 2880), (2880, 1440), (2880, 720), (2880, 360), (4096, 1536), (7168, 2048), (2048, 768)):
            h, i = ox.mxfp4_round_up_hidden_size_and_intermediate_size(getattr(ox.Mxfp4MoeBackend, theirs), hidden, inter)
            cases.append({"backend": ours, "hidden": hidden, "inter": inter, "hidden_padded": h, "inter_padded": i})
    out = Path(__file__).parent / "data" / f"mxfp4_oracle_vllm-{vllm.__version__.split('+')[0]}.json"
    out.write_text(json.dumps({"vllm": vllm.__version__, "cases": cases}, indent=1) + "\n")
    print(f"{len(cases)} cases -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
