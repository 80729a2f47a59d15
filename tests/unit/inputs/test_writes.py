"""inputs.writes: temp file + rename, never through a symlink, mode only for new files."""

from __future__ import annotations

import os
import stat

import pytest

from oomguard.errors import InputError
from oomguard.inputs.writes import write_text


def _mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_symlink_at_target_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    src = tmp_path / "start_api.sh"
    src.write_text("vllm serve m\n")
    src.chmod(0o755)
    target = tmp_path / "start_api.fixed.sh"
    target.symlink_to(victim)
    write_text(target, "vllm serve m --x\n", mode_from=src)
    assert victim.read_text() == "secret\n" and _mode(victim) == 0o600
    assert not target.is_symlink() and target.read_text() == "vllm serve m --x\n"
    assert _mode(target) == 0o755 & ~_umask()


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_existing_file_keeps_its_own_mode(tmp_path):
    src = tmp_path / "start_api.sh"
    src.write_text("a\n")
    src.chmod(0o755)
    target = tmp_path / "out.sh"
    target.write_text("old\n")
    target.chmod(0o600)
    write_text(target, "new\n", mode_from=src)
    assert target.read_text() == "new\n" and _mode(target) == 0o600


def test_new_file_without_source_gets_default_mode(tmp_path):
    target = tmp_path / "report.md"
    write_text(target, "# report\n")
    assert _mode(target) == 0o666 & ~_umask()


def test_setuid_is_never_copied(tmp_path):
    src = tmp_path / "s.sh"
    src.write_text("a\n")
    src.chmod(0o4755)
    target = tmp_path / "t.sh"
    write_text(target, "b\n", mode_from=src)
    assert not _mode(target) & 0o7000


def test_no_temp_file_left_on_failure(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    with pytest.raises(InputError, match="a directory"):
        write_text(d, "x")
    with pytest.raises(InputError, match="no such file"):
        write_text(tmp_path / "missing" / "x.md", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]
