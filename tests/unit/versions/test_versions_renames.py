"""The hand-written rename notes must agree with the generated tables."""

from __future__ import annotations

import pytest

from oomguard.versions import SUPPORTED, get_release, option_history
from oomguard.versions.renames import CHANGES, ChangeKind, rename_for


def _first_deprecated(option: str) -> str | None:
    for version in SUPPORTED:
        rel = get_release(version)
        if rel.has_option(option) and rel.resolve_option(option).deprecated:
            return version
    return None


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.old)
def test_change_matches_tables(change):
    hist = option_history(change.old)
    assert hist.present_in, f"{change.old} is in no supported table"
    if change.removed_in is not None:
        assert hist.removed_in == change.removed_in or (
            # present again later (0.33 re-accepts --disable-log-requests as a negative form)
            change.removed_in not in hist.present_in and change.removed_in in SUPPORTED)
        assert not get_release(change.removed_in).has_option(change.old)
    else:
        assert hist.last == SUPPORTED[-1]
    assert _first_deprecated(change.old) == change.deprecated_in
    if change.new is not None:
        assert get_release("latest").has_option(change.new), change.new
    assert change.source


def test_no_ops_are_still_accepted_and_deprecated():
    newest = get_release("latest")
    for change in CHANGES:
        if change.kind is ChangeKind.NO_OP:
            assert newest.resolve_option(change.old).deprecated


def test_lookup_and_description():
    change = rename_for("--swap-space")
    assert change.kind is ChangeKind.REMOVED and change.removed_in == "0.18.0"
    assert "removed in 0.18.0" in change.describe()
    assert "renamed to --cudagraph-capture-sizes in 0.13.0" in rename_for("--cuda-graph-sizes").describe()
    assert rename_for("--gpu-memory-utilization") is None
