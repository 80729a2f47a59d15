"""The message catalog (data/vllm_messages.json, derived from vLLM's source) and the normalised matcher.

The catalog test re-derives the messages of a fixed sample of the installed vLLM 0.32's modules (every
``SAMPLE_EVERY``-th file: the whole tree takes a minute of CPU, ``scripts/extract_vllm_messages.py --check``
does it all) and compares both ways with the committed catalog's 0.32 entries.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from oomguard.diagnose.lines import parse_line
from oomguard.diagnose.parsers import messages

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_EVERY = 9


def _extractor():
    spec = importlib.util.spec_from_file_location("extract_vllm_messages", ROOT / "scripts" / "extract_vllm_messages.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.vllm
def test_committed_catalog_is_what_the_extractor_derives_from_vllm_032():
    ex = _extractor()
    root = ex.DEFAULT_VLLM
    if not (root / "__init__.py").exists():
        pytest.skip(f"vLLM is not installed at {root}")
    release = ex.release_of(root)
    data = json.loads(messages.CATALOG_FILE.read_text(encoding="utf-8"))
    assert release in data["releases"]
    files = sorted(root.rglob("*.py"))[::SAMPLE_EVERY]
    sampled = {p.relative_to(root).with_suffix("").as_posix() for p in files}
    derived: dict[str, str | None] = {}
    for path in files:
        rel = path.relative_to(root).with_suffix("").as_posix()
        visitor = ex._Visitor(rel)
        import ast

        visitor.visit(ast.parse(path.read_text(encoding="utf-8", errors="replace")))
        for entry in visitor.found:
            derived.setdefault(entry["t"], ex.classify(entry))
    committed = {m["t"]: m for m in data["messages"] if release in m["r"]}
    missing = [t for t in derived if t not in committed]
    assert not missing, f"{len(missing)} messages of vLLM {release} are not in the catalog (rerun the extractor): " \
                        f"{missing[:3]}"
    extra = [t for t, m in committed.items() if m["m"] in sampled and t not in derived]
    assert not extra, f"catalog entries vLLM {release} does not raise: {extra[:3]}"
    # the class is the rules' (a rule edited without re-running the extractor shows here)
    wrong = [t for t, m in committed.items() if ex.classify(m) != m["c"]]
    assert not wrong, wrong[:3]


def test_catalog_holds_every_release_and_no_code():
    data = json.loads(messages.CATALOG_FILE.read_text(encoding="utf-8"))
    assert {"0.32.0"} <= set(data["releases"])
    for m in data["messages"]:
        assert set(m) <= {"t", "m", "f", "x", "c", "r", "a", "v"}, m
        assert "\n" not in m["t"] and len(m["t"]) < 2000
        assert m["c"] is None or m["c"] in {c.value for c in messages_classes()}


def messages_classes():
    from oomguard.model.failures import FailureClass

    return list(FailureClass)


@pytest.mark.parametrize(("line", "expected"), [
    # a stripped ANSI colour code in front of Ray's prefix, behind a backtick (C02)
    ("`[36m(main_task pid=3132) ValueError: max_num_batched_tokens (8192) is smaller than max_model_len (32768). "
     "This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer "
     "sequences. Please increase max_num_batched_tokens or decrease max_model_len.", "exact"),
    # rich's box-drawn traceback ending
    ("│ ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
     "initializing the engine. │", "exact"),
    # a markdown quote and a diff prefix
    ("> ERROR 03-13 09:07:24 [core.py:330] ValueError: Free memory on device cuda:0 (10.2/79.1 GiB) on startup is "
     "less than desired GPU memory utilization (0.9, 71.2 GiB). Decrease GPU memory utilization or reduce GPU "
     "memory used by other processes.", "exact"),
    ("+ValueError: Free memory on device cuda:0 (10.2/79.1 GiB) on startup is less than desired GPU memory "
     "utilization (0.9, 71.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
     "exact"),
])
def test_shapes_of_one_message_match_exactly(line, expected):
    m = messages.match_text(line)
    assert m is not None and m.how == expected, m


def test_the_class_comes_from_where_the_message_is_raised():
    m = messages.match_text("ValueError: Free memory on device cuda:0 (3.1/23.6 GiB) on startup is less than desired "
                            "GPU memory utilization (0.9, 21.2 GiB). Decrease GPU memory utilization or reduce GPU "
                            "memory used by other processes.")
    assert m.failure_class == "startup-free-memory" and "worker" in m.template.module
    m = messages.match_text("ValueError: No available memory for the cache blocks. Try increasing "
                            "`gpu_memory_utilization` when initializing the engine.")
    assert m.failure_class == "no-kv-memory"


def test_a_cut_message_is_a_truncation_and_a_lowercased_fragment_still_matches():
    cut = messages.match_text("ValueError: To serve at least one request with the model's max seq len (131072), "
                              "(16.0 GiB KV cache is needed, which is larger than")
    assert cut is not None and cut.failure_class == "kv-too-small" and cut.how in ("truncated", "fragment")
    assert 0.55 <= cut.quality < 1.0
    frag = messages.match_text("the kv cache is needed, which is larger than the available kv cache memory")
    assert frag is not None and frag.failure_class == "kv-too-small" and frag.quality < 1.0


def test_words_shared_with_no_message_match_nothing():
    assert messages.match_text("I started the server and it answered my requests fine") is None
    assert messages.match_text("ERROR: something bad happened") is None


def test_a_warning_template_says_no_class():
    # vLLM warns and carries on: the line is recognised as vLLM's, and gives no failure class
    data = json.loads(messages.CATALOG_FILE.read_text(encoding="utf-8"))
    warning = next(m for m in data["messages"] if m["x"] == "warning" and m["c"] and "{" not in m["t"]
                   and len(m["t"].split()) >= 8)
    m = messages.match_text(warning["t"])
    assert m is not None and m.failure_class is None


@pytest.mark.parametrize(("raw", "candidate"), [
    ("(EngineCore_DP0 pid=1) ERROR 06-23 14:21:48 [core.py:700] ValueError: bad", True),
    ("ValueError: something", True),
    ("the server dies when I start it with tensor parallel", True),  # prose
    ("(EngineCore_DP0 pid=1) INFO 06-23 14:21:48 [gpu_worker.py:232] Available KV cache memory: 1 GiB", False),
    ("WARNING 06-23 14:21:48 [config.py:1] This may cause OOM errors during the initial memory profiling", False),
    ('  File "/x/vllm/engine.py", line 3, in f', False),
])
def test_only_error_records_exception_lines_and_prose_are_candidates(raw, candidate):
    assert messages.is_candidate(parse_line("x", 1, raw)) is candidate


def test_the_buffer_is_bounded_and_says_what_it_skipped(monkeypatch):
    monkeypatch.setattr(messages, "MAX_LINES_HEAD", 3)
    monkeypatch.setattr(messages, "MAX_LINES_TAIL", 2)
    buf = messages.LineBuffer.new()
    buf.add(parse_line("f.log", 0, "ValueError: distinct message number 1 here"))
    buf.add(parse_line("f.log", 0, "ValueError: distinct message number 2 here"))  # only its number differs
    assert len(list(buf.lines())) == 1
    buf = messages.LineBuffer.new()
    for i in range(10):
        buf.add(parse_line("f.log", i, f"ValueError: distinct message number {'x' * i} here"))
    kept = [no for _f, no, _t, _p in buf.lines()]
    assert kept == [0, 1, 2, 8, 9]
    assert buf.skipped == {"f.log": 5}
    assert "5 distinct ones in between" in messages.notes(buf)[0]
    assert "first 3 and last 2" in messages.notes(buf)[0]


def test_a_log_without_error_lines_never_loads_the_catalog(tmp_path):
    import subprocess

    log = tmp_path / "healthy.log"
    log.write_text("(APIServer pid=1) INFO 05-01 19:00:01 [api_server.py:1951] vLLM API server version 0.20.0\n"
                   "(APIServer pid=1) INFO:     Application startup complete.\n")
    code = ("import sys; from oomguard.diagnose.diagnosis import diagnose; diagnose([sys.argv[1]]); "
            "from oomguard.diagnose.parsers import messages; print(messages.catalog.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def test_diagnose_names_the_class_of_an_ansi_wrapped_vllm_message(tmp_path, cli):
    report = tmp_path / "report.txt"
    report.write_text("The job fails right away:\n"
                      "`[36m(main_task pid=3132) ValueError: max_num_batched_tokens (8192) is smaller than "
                      "max_model_len (32768). This effectively limits the maximum sequence length to "
                      "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
                      "max_num_batched_tokens or decrease max_model_len.\n")
    out = cli("diagnose", str(report), "--format", "json")
    data = json.loads(out.stdout)
    assert data["verdicts"][0]["class"] == "config-error", out.stdout[:2000]
    cues = [c["feature"] for c in data["verdicts"][0]["cues"]]
    assert "msg:config-error" in cues
