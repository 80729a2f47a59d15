"""Get one vLLM release's Python sources: ``pip download`` the wheel, keep only the ``.py`` files.

The wheel (300+ MB, mostly compiled kernels) goes to a scratch directory and is
deleted once its ``vllm/**/*.py`` members (~60 MB) have been streamed out, unless
``keep_wheel`` is set. Extracted sources are cached per version under
``<cache>/src/<version>/``; a ``.complete`` marker makes re-runs free.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Fetched:
    version: str
    root: Path                 # directory holding vllm/
    download_s: float | None   # None when served from the cache
    wheel_bytes: int | None


def _wanted(member: str) -> bool:
    return member.startswith("vllm/") and member.endswith(".py")


def _extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if _wanted(info.filename):
                    target = dest / info.filename
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out)
        return
    with tarfile.open(archive) as tf:  # sdist fallback: vllm-X/vllm/...
        for member in tf.getmembers():
            parts = member.name.split("/", 1)
            if len(parts) == 2 and member.isfile() and _wanted(parts[1]):
                target = dest / parts[1]
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(member)
                if src is not None:
                    with src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out)


def fetch(version: str, cache: Path, keep_wheel: bool = False, quiet: bool = True) -> Fetched:
    cache = Path(cache)
    root = cache / "src" / version
    if (root / ".complete").is_file():
        return Fetched(version, root, None, None)
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    existing = sorted(wheels.glob(f"vllm-{version}-*.whl")) or sorted(wheels.glob(f"vllm-{version}.tar.gz"))
    elapsed: float | None = None
    if not existing:
        start = time.monotonic()
        cmd = [sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps",
               "--disable-pip-version-check", "-d", str(wheels)]
        result = subprocess.run(cmd, capture_output=quiet, text=True)
        elapsed = time.monotonic() - start
        if result.returncode != 0:
            detail = (result.stderr or "").strip().splitlines()[-1:] if quiet else []
            raise RuntimeError(f"pip download vllm=={version} failed: {' '.join(detail)}")
        existing = sorted(wheels.glob(f"vllm-{version}-*.whl")) or sorted(wheels.glob(f"vllm-{version}.tar.gz"))
        if not existing:
            raise RuntimeError(f"pip download vllm=={version} produced no wheel in {wheels}")
    archive = existing[0]
    size = archive.stat().st_size
    if root.exists():
        shutil.rmtree(root)
    _extract(archive, root)
    (root / ".complete").write_text(archive.name + "\n")
    if not keep_wheel:
        archive.unlink()
    return Fetched(version, root, elapsed, size)
