"""Regression guard on the calibration targets (benchmarks/calibration.py, issue #2).

Targets on tests/data/calibration/startup.jsonl: weights median <= 2 %; KV pool median
<= 5 % with none worse than 15 %; tokens from a logged KV GiB exact to rounding on the
records our KV layout covers.
"""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("calibration", ROOT / "benchmarks" / "calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_calibration_targets():
    s = _bench().evaluate()["summary"]
    assert s["weights"]["median_pct"] <= 2.0
    assert s["kv_gib"]["median_pct"] <= 5.0
    assert s["kv_gib"]["worst_pct"] <= 15.0
    assert s["kv_gib"]["n"] >= 8
    assert s["tokens_from_logged_kv"]["exact_to_rounding"] >= s["tokens_from_logged_kv"]["n"] - 1
