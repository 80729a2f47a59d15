"""The text model (build-time only, scripts/diagnose_text_model.py) and the fitted paraphrase cap (issue 16).

The text model is not shipped (fifth pass: it did not improve the fresh batches): its tokens are still what the
trainer's ``--text-lambdas`` evaluates, and nothing of it is left in the package (no module, no data file, no
consult in the classifier). The paraphrase tier's cap is the one fitted on leave-one-batch-out verdicts (read from
the weights file), not a constant.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from oomguard.diagnose import scoring
from oomguard.diagnose.diagnosis import diagnose
from oomguard.records import replace

ROOT = Path(__file__).resolve().parents[3]


def _script():  # noqa: ANN202 - the module
    spec = importlib.util.spec_from_file_location("diagnose_text_model", ROOT / "scripts" / "diagnose_text_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("diagnose_text_model", module)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "report.txt"
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_tokens_are_words_bucketed_numbers_and_cjk_bigrams_without_paths_or_hex():
    text_model = _script()
    toks = text_model.tokens(["OOM after 12.5 GiB at /usr/lib/python3/dist-packages/vllm/x.py 0x7f3a9c 显存不足",
                              "see https://github.com/vllm-project/vllm/issues/1 Tried 80%"])
    assert {"oom", "after", "at", "see", "tried"} <= toks
    assert "#gib:1" in toks and "#pct:1" in toks  # 12.5 GiB: tens of GiB; 80 %: tens of percent
    assert {"显存", "存不", "不足"} <= toks
    assert not any("usr" in t or "github" in t or "7f3a9c" in t or "python3" in t for t in toks)


def test_tokens_are_bounded():
    text_model = _script()
    toks = text_model.tokens(["word%d x" % i for i in range(10_000)])
    assert len(toks) <= text_model.MAX_LINES + 1


def test_the_text_model_is_not_in_the_package():
    package = ROOT / "src" / "oomguard"
    assert not (package / "diagnose" / "text_model.py").exists()
    assert not (package / "data" / "diagnose_text.json").exists()
    for module in ("classifier.py", "scoring.py", "diagnosis.py"):
        assert "text_model" not in (package / "diagnose" / module).read_text(encoding="utf-8").replace(
            "scripts/diagnose_text_model.py", "")


def test_the_paraphrase_cap_is_the_fitted_one(tmp_path):
    shipped = json.loads(scoring.WEIGHTS_FILE.read_text(encoding="utf-8"))
    assert 0.5 <= shipped["paraphrase_cap"] <= 0.9 and "paraphrase_cap_fitted_on" in shipped["meta"]
    path = _write(tmp_path, "显存不足，推理时崩溃\n")
    for cap in (0.5, 0.8):
        v = diagnose([path], weights=replace(scoring.load(), paraphrase_cap=cap)).verdicts[0]
        assert v.tier == "paraphrase" and v.confidence <= cap
    assert diagnose([path]).verdicts[0].confidence <= scoring.load().paraphrase_cap
