"""A compiled Hyperscan database kept on disk between runs: compiling the scan's ~200 expressions takes
about a second of CPU, loading a serialized one a few milliseconds.

The cache lives in ``$OOMGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/oomguard``, else ``~/.cache/oomguard``.
A file's name carries what it was built from (the oomguard and hyperscan versions, the database's kind and a
hash of every source pattern and of the translator), so a changed pattern set is a different file. It is never trusted
blindly: a file that does not start with that same key, or that Hyperscan cannot load, is rebuilt. Nothing is
written when the directory cannot be created or written (a read-only home, a container): the database is then
compiled each run, and the run is no different otherwise. ``OOMGUARD_CACHE_DIR=`` (empty) turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_ENV = "OOMGUARD_CACHE_DIR"
_MAGIC = b"oomguard-hs-db\n"


def cache_dir() -> Path | None:
    """Where compiled databases are kept, or None when the cache is turned off."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit is not None:
        return Path(explicit) if explicit.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "oomguard"


def database_key(kind: str, source: bytes) -> str:
    """A database's file name: its kind, the oomguard and hyperscan versions, and a hash of what it is built
    from (``source``: the caller's description of every input)."""
    import hashlib

    import hyperscan  # type: ignore[import-not-found]

    from oomguard import __version__

    hs_version = getattr(hyperscan, "__version__", "?")
    return f"scan-{kind}-{__version__}-hs{hs_version}-{hashlib.sha256(source).hexdigest()[:24]}.db"


def load_or_build(kind: str, source: bytes, build: Callable[[], Any], mode: int) -> Any:
    """The database built from ``source``: from the cache when a valid copy is there, else ``build()`` (and
    saved when the cache directory can be written)."""
    import hyperscan  # type: ignore[import-not-found]

    folder = cache_dir()
    if folder is None:
        return build()
    name = database_key(kind, source)
    path = folder / name
    header = _MAGIC + name.encode() + b"\n"
    try:
        raw = path.read_bytes()
    except OSError:
        raw = b""
    if raw.startswith(header):
        try:
            db = hyperscan.loadb(raw[len(header):], mode)
            db.scratch = hyperscan.Scratch(db)  # a loaded database comes without the scratch space a scan needs
            return db
        except Exception:  # noqa: BLE001 - a truncated or corrupt file: rebuilt below
            pass
    db = build()
    _save(folder, path, header + bytes(hyperscan.dumpb(db)))
    return db


MAX_FILES = 32  # ~0.5 MB each; stretches of routine lines get a database per set of routine patterns


def _prune(folder: Path) -> None:
    """Keep the newest MAX_FILES databases (a log of a new kind adds one): the cache does not grow forever."""
    files = sorted(folder.glob("scan-*.db"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[MAX_FILES:]:
        old.unlink(missing_ok=True)


def _save(folder: Path, path: Path, data: bytes) -> None:
    """Write atomically (a concurrent run reads the old file or the new one, never half of one); any failure
    to write leaves things as they were."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        import tempfile  # only when a new database is written (tempfile imports shutil, random: ~10 ms)

        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".scan-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        _prune(folder)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
