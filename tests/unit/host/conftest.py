"""Shared helpers for the host tests: fixture paths and a copy-and-edit fake root."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from host_paths import ROOTS


class FakeRoot:
    """A writable copy of a committed fake root that a test can edit."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, rel: str, text: str) -> FakeRoot:
        p = self.path / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return self

    def remove(self, rel: str) -> FakeRoot:
        p = self.path / rel.lstrip("/")
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
        return self

    def __str__(self) -> str:
        return str(self.path)


@pytest.fixture
def fake_root(tmp_path):
    """fake_root("docker_cgroup_v2_limited") -> FakeRoot copied under tmp_path."""

    def make(name: str) -> FakeRoot:
        dest = tmp_path / name
        shutil.copytree(ROOTS / name, dest)
        return FakeRoot(dest)

    return make
