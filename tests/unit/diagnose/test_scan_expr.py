"""diagnose's byte scan: the parsers' patterns, translated for Hyperscan (diagnose/scan_expr.py), select every
line a parser acts on (a superset), from the parsers' own tables (parsers/scanset.py), cached compiled on disk
(diagnose/scan_cache.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oomguard.diagnose import lines as lines_mod
from oomguard.diagnose import prefilter, scan_cache, scan_expr
from oomguard.diagnose.parsers import cues, errors
from oomguard.diagnose.parsers.scanset import module_patterns, scan_patterns

hyperscan = pytest.importorskip("hyperscan")

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"


def _hs_engine():
    prefilter.engine.cache_clear()
    eng = prefilter.engine("hyperscan")
    assert eng.name == "hyperscan"
    return eng


def _selected(eng, raw: bytes) -> frozenset[int]:
    found = eng.lines(raw, 0, len(raw))
    return found[0][3] if found else frozenset()


def _corpus_lines() -> list[str]:
    out = []
    for path in sorted((DATA / "calibration").glob("failures*.jsonl")) + sorted((DATA / "diagnose" / "failures").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                out += (json.loads(line).get("log_excerpt") or "").splitlines()
    for path in sorted((ROOT / "tests" / "fixtures" / "logs").rglob("*")):
        if path.is_file():
            out += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [x for x in out if x.strip()]


def test_every_pattern_selects_every_corpus_line_it_matches():
    """The superset property on real lines: wherever a parser's pattern matches a line's message, the scan
    selects the raw line (under that pattern's id)."""
    eng = _hs_engine()
    patterns = scan_patterns()
    compiled = [re.compile(p.pattern, p.flags) for p in patterns]
    missed = []
    for text in _corpus_lines():
        raw = text.encode("utf-8", "surrogatepass")
        msg = lines_mod.parse_line("x", 1, text).message
        ids = None
        for i, rx in enumerate(compiled):
            if rx.search(msg):
                ids = _selected(eng, raw + b"\n") if ids is None else ids
                if i not in ids:
                    missed.append(f"{patterns[i].name}: {text[:120]!r}")
    assert missed == []


@pytest.mark.parametrize("rule", cues.TABLE, ids=lambda r: r.feature)
def test_every_cue_example_is_selected_by_the_hyperscan_scan(rule):
    eng = _hs_engine()
    assert _selected(eng, rule.example.encode() + b"\n"), f"{rule.feature}: its example line would not reach the parsers"


def test_every_table_and_module_pattern_is_in_the_scan():
    """One place for each pattern: a cue added to TABLE, or a pattern added to a parser module, is scanned
    with no second edit (a module's NOT_SCANNED names the helpers left out)."""
    labels = {p.name for p in scan_patterns()}
    assert {r.feature for r in cues.TABLE} <= {n.split()[1] for n in labels if n.startswith("cue ")}
    sources = {(p.pattern, p.flags) for p in scan_patterns()}
    skipped = {id(x) for x in errors.NOT_SCANNED}
    for _, rx in module_patterns(errors).values():
        if id(rx) not in skipped:
            assert (rx.pattern, rx.flags & ~re.UNICODE) in sources, rx.pattern


def test_which_patterns_fall_back_to_keywords():
    """Patterns Hyperscan cannot take (scan_expr.Unsupported, or refused by Hyperscan) are searched for by
    their keywords. None today; a new one shows up here, with its reason."""
    assert _hs_engine().fallbacks == ()


def test_serving_lines_are_not_candidates():
    """The point of scanning patterns, not keywords: the lines every request prints select nothing."""
    eng = _hs_engine()
    routine = (b"(APIServer pid=1) INFO 05-01 19:04:00 [loggers.py:123] Engine 000: Avg prompt throughput: 1520.3 "
               b"tokens/s, Avg generation throughput: 834.0 tokens/s, Running: 39 reqs, Waiting: 0 reqs, GPU KV cache "
               b"usage: 22.8%, Prefix cache hit rate: 51.2%\n"
               b"(APIServer pid=1) INFO:     10.0.0.7:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n"
               b"(APIServer pid=1) INFO 05-01 19:04:00 [async_llm.py:328] Finished request chatcmpl-fce8bef9ed91c10d484b.\n")
    assert eng.lines(routine, 0, len(routine)) == []


@pytest.mark.parametrize(("pattern", "flags", "line", "matches"), [
    (r"\bOOMKilled\b", 0, b"Reason: OOMKilled\n", True),
    (r"\bOOMKilled\b", 0, b"\x1b[31mOOMKilled\x1b[0m\n", True),  # a colour code touches the word
    (r"\bRAM\b", 0, b"PARAMS\n", False),  # the boundary after a word is kept
    (r'File "([^"]+)", line (\d+)', 0, b'{"log":"  File \\"/x.py\\", line 3\\n"}\n', True),  # docker JSON
    (r"took (\d+) secs$", 0, b"Graph capturing took 8 secs   \n", True),  # $ after trailing spaces
    (r"took (\d+) secs$", 0, b"Graph capturing took 8 secs more\n", False),
    (r"logprobs\b(?!=None)", 0, b"SamplingParams(logprobs=None)\n", False),  # a lookahead written out
    (r"logprobs\b(?!=None)", 0, b"with logprobs=5\n", True),
    ("显存不足", 0, "显存不足\n".encode(), True),
    (r"out of memory", re.IGNORECASE, b"CUDA OUT OF MEMORY\n", True),
    (r"(\w+) is not installed", 0, "pydantic\u00e9 is not installed\n".encode(), True),
])
def test_translated_expressions(pattern, flags, line, matches):
    e = scan_expr.translate(pattern, flags)
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[e.text], ids=[0], flags=[hyperscan.HS_FLAG_MULTILINE
                                                     | (hyperscan.HS_FLAG_CASELESS if e.caseless else 0)])
    hits = []
    db.scan(line, match_event_handler=lambda *a: hits.append(a))
    assert bool(hits) == matches


def test_what_cannot_be_written_falls_back_to_literals():
    with pytest.raises(scan_expr.Unsupported):
        scan_expr.translate("\u00e9t\u00e9 perdu", re.IGNORECASE)  # Unicode case folding
    with pytest.raises(scan_expr.Unsupported):
        scan_expr.translate(r"\s*", 0)  # matches every line
    assert scan_expr.keywords(r"foo (bar|baz) qux|hello\d+world") == (b"foo ", b"hello")
    assert scan_expr.keywords(r"x", 0, (b"given",)) == (b"given",)
    with pytest.raises(scan_expr.Unsupported):
        scan_expr.keywords(r"\d+|ab")


# --- the cache ------------------------------------------------------------------------------------------
def _compile_counter(monkeypatch):
    calls = []
    real = prefilter._Hyperscan._build

    def counting(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(prefilter._Hyperscan, "_build", counting)
    return calls


def test_database_is_cached_and_a_corrupt_file_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv(scan_cache.CACHE_ENV, str(tmp_path / "cache"))
    calls = _compile_counter(monkeypatch)
    first = _hs_engine()
    assert len(calls) == 2 and len(list((tmp_path / "cache").glob("scan-*.db"))) == 2
    sample = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\nplain\n"
    want = first.lines(sample, 0, len(sample))
    calls.clear()
    second = _hs_engine()  # loaded, not compiled
    assert calls == [] and second.lines(sample, 0, len(sample)) == want
    for f in (tmp_path / "cache").glob("scan-*.db"):
        f.write_bytes(f.read_bytes()[:200] + b"garbage")  # the right header, a broken database
    third = _hs_engine()
    assert len(calls) == 2 and third.lines(sample, 0, len(sample)) == want
    name = scan_cache.database_key("lines", b"one source")
    assert name != scan_cache.database_key("lines", b"another source")  # a changed pattern set: another file


def test_an_unwritable_cache_dir_is_left_alone(tmp_path, monkeypatch):
    """A cache directory that cannot be created or written (here: under a file, which even root cannot write
    into): no file, no error, the same scan."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv(scan_cache.CACHE_ENV, str(blocker / "sub"))
    sample = b"CUDA out of memory\n"
    try:
        assert _hs_engine().lines(sample, 0, len(sample))
        assert blocker.read_text() == "x" and list(tmp_path.iterdir()) == [blocker]
        monkeypatch.setenv(scan_cache.CACHE_ENV, "")  # off
        assert scan_cache.cache_dir() is None and _hs_engine().lines(sample, 0, len(sample))
    finally:
        prefilter.engine.cache_clear()
