"""The text model beside the cues (diagnose/text_model.py) and the fitted paraphrase cap (issue 16, fourth pass).

The tokens a report gives, that the model only ranks classes when a failure cue exists and the cues alone are
not sure (a vLLM message keeps its verdict; a healthy start-up stays healthy), that --explain / the JSON name its
words, and that the paraphrase tier's cap is the one fitted on leave-one-batch-out verdicts (read from the weights
file), not a constant.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from oomguard.diagnose import scoring, text_model
from oomguard.diagnose.diagnosis import diagnose

ROOT = Path(__file__).resolve().parents[3]


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "report.txt"
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_tokens_are_words_bucketed_numbers_and_cjk_bigrams_without_paths_or_hex():
    toks = text_model.tokens(["OOM after 12.5 GiB at /usr/lib/python3/dist-packages/vllm/x.py 0x7f3a9c 显存不足",
                              "see https://github.com/vllm-project/vllm/issues/1 Tried 80%"])
    assert {"oom", "after", "at", "see", "tried"} <= toks
    assert "#gib:1" in toks and "#pct:1" in toks  # 12.5 GiB: tens of GiB; 80 %: tens of percent
    assert {"显存", "存不", "不足"} <= toks
    assert not any("usr" in t or "github" in t or "7f3a9c" in t or "python3" in t for t in toks)


def test_tokens_are_bounded():
    toks = text_model.tokens(["word%d x" % i for i in range(10_000)])
    assert len(toks) <= text_model.MAX_LINES + 1


def _with_text(main: dict, phase: dict | None = None) -> scoring.Weights:
    shipped = scoring.load()
    return replace(shipped, text=text_model.TextModel(1.0, main, phase or {}))


def test_the_text_model_never_overrides_a_recognised_vllm_message(tmp_path):
    path = _write(tmp_path, "ERROR 06-23 14:21:48 [core.py:1] ValueError: To serve at least one request with the "
                            "models's max seq len (8192), (1.0 GiB KV cache is needed, which is larger than the available "
                            "KV cache memory (0.5 GiB). Based on the available memory, the estimated maximum model "
                            "length is 4096. Try increasing `gpu_memory_utilization` or decreasing `max_model_len`\n")
    # a text model that would push every word toward config-error with a huge weight
    loud = _with_text({w: {"config-error": 50.0} for w in ("cache", "memory", "error", "kv", "is", "the")})
    d = diagnose([path], weights=loud)
    assert d.verdicts[0].cls.value == "kv-too-small" and d.verdicts[0].confidence >= text_model.GATE
    assert not any(c["feature"] == "text:words" for c in d.verdicts[0].cues)


def test_the_text_model_ranks_an_uncertain_report_and_says_which_words(tmp_path):
    path = _write(tmp_path, "the server crashes with an error when I start it on the cluster\n")
    base = diagnose([path], weights=replace(scoring.load(), text=None))
    assert base.verdicts, "a failure in words is a verdict"
    target = "nccl-error" if base.verdicts[0].cls.value != "nccl-error" else "config-error"
    steer = _with_text({"cluster": {target: 8.0}})
    v = diagnose([path], weights=steer).verdicts[0]
    assert v.cls.value == target
    assert v.tier == "paraphrase"  # the text model's words decided it: the words tier
    words = [c for c in v.cues if c["feature"] == "text:words"]
    assert words and words[0]["words"] == ["cluster"] and "cluster" in words[0]["why"]
    assert "text:words" in json.dumps(diagnose([path], weights=steer).to_dict())


def test_no_failure_cue_no_verdict_whatever_the_text_model_says(tmp_path):
    healthy = (ROOT / "tests/fixtures/logs/healthy").iterdir().__next__()
    loud = _with_text({w: {"runtime-oom": 50.0} for w in ("info", "model", "loading", "gpu", "memory", "cuda")})
    assert diagnose([str(healthy)], weights=loud).verdicts == []
    assert diagnose([_write(tmp_path, "INFO: the model is loading on the gpu memory\n")], weights=loud).verdicts == []


def test_the_paraphrase_cap_is_the_fitted_one(tmp_path):
    shipped = json.loads(scoring.WEIGHTS_FILE.read_text(encoding="utf-8"))
    assert 0.5 <= shipped["paraphrase_cap"] <= 0.9 and "paraphrase_cap_fitted_on" in shipped["meta"]
    path = _write(tmp_path, "显存不足，推理时崩溃\n")
    for cap in (0.5, 0.8):
        v = diagnose([path], weights=replace(scoring.load(), paraphrase_cap=cap)).verdicts[0]
        assert v.tier == "paraphrase" and v.confidence <= cap
    assert diagnose([path]).verdicts[0].confidence <= scoring.load().paraphrase_cap
