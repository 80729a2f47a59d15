"""The committed option index is exactly what the flag tables say (the tables are the source)."""

from __future__ import annotations

from pathlib import Path

from oomguard.versions import option_index, releases
from oomguard.versions.table import _options_of, option_history


def test_committed_index_equals_the_tables():
    rebuilt = option_index.build(releases.supported(), _options_of)
    committed = (Path(releases.DATA_DIR) / option_index.INDEX_NAME).read_text(encoding="utf-8")
    assert committed == option_index.render(rebuilt), (
        "data/flags/option-index.json is stale: run python scripts/gen_flag_tables.py --index")


def test_index_is_used_and_agrees_with_a_full_read():
    assert option_index.load() is not None
    for option in ("--swap-space", "--kv-cache-memory-bytes", "--no-enable-prefix-caching", "-tp", "--nope"):
        expected = tuple(v for v in releases.supported() if option in _options_of(v))
        assert option_index.present_in(option) == expected
        assert option_history(option).present_in == expected


def test_an_index_of_other_releases_is_not_used(monkeypatch, tmp_path):
    """A table added without rebuilding the index: the tables answer, never a stale index."""
    index = option_index.build(releases.supported()[:-1], _options_of)
    (tmp_path / option_index.INDEX_NAME).write_text(option_index.render(index), encoding="utf-8")
    monkeypatch.setattr(releases, "DATA_DIR", tmp_path)
    option_index.load.cache_clear()
    try:
        assert option_index.load() is None
        assert option_index.present_in("--swap-space") is None
    finally:
        option_index.load.cache_clear()


def test_runs_are_compact():
    index = option_index.build(["a", "b", "c", "d"], {"a": {"--x"}, "b": {"--x"}, "c": set(), "d": {"--x", "--y"}}.get)
    assert index["options"] == {"--x": [[0, 1], [3, 3]], "--y": [[3, 3]]}


def test_one_entry_per_dest_and_flags_built_on_demand():
    """load_table keys its lazy flags and its option index by dest: a table lists each dest once."""
    import json

    from oomguard.versions.table import load_table

    for version in releases.supported():
        dests = [f["dest"] for f in json.loads((Path(releases.DATA_DIR) / f"vllm-{version}.json").read_text())["flags"]]
        assert len(dests) == len(set(dests)), version
    rel = load_table(releases.supported()[-1])
    assert rel.resolve_option("--max-model-len").flag is rel.flags["max_model_len"]
    assert list(rel.flags) == list(dict(rel.flags.items())) and len(rel.flags) == len(list(rel.flags.values()))
