"""The file-system root that every host fact is read under.

``oomguard host --root DIR`` reads ``DIR/proc/meminfo`` instead of
``/proc/meminfo`` and so on, which is how the tests describe a machine with
fake ``/proc`` and ``/sys`` trees. Facts that cannot come from files (statvfs
of ``/dev/shm``, the process's own rlimits, NVML, running ``nvidia-smi``) are
only taken on the real root, so a fake tree never mixes with this machine.
"""

from __future__ import annotations

import os
from pathlib import Path

from oomguard.errors import InputError


class Root:
    def __init__(self, path: str | os.PathLike[str] = "/"):
        self.path = Path(path)
        from oomguard.inputs import files

        if not files.is_dir(self.path):
            raise InputError("--root is not a directory", file=str(path))
        self.is_real = os.path.realpath(self.path) == "/"

    def file(self, path: str) -> Path:
        return self.path / path.lstrip("/")

    def display(self, path: str) -> str:
        """The path as the user should see it in messages."""
        return path if self.is_real else str(self.file(path))

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when it is absent or unreadable (containers hide things).

        Read through ``inputs.files``: a FIFO or device in a fake tree is an error, never a hang,
        and no file is read past ``files.PROC_BYTES``.
        """
        from oomguard.inputs import files

        return files.read_optional_text(self.file(path))

    def read_int(self, path: str) -> int | None:
        """A file holding one integer; InputError naming the file when it holds something else."""
        text = self.read_text(path)
        if text is None:
            return None
        from oomguard.numbers import NumberError, parse_int

        value = text.strip()
        try:
            return parse_int(value)
        except NumberError as exc:
            raise InputError(f"expected an integer, found {value[:40]!r} ({exc.why})", file=self.display(path), line=1) from None

    def exists(self, path: str) -> bool:
        return self.file(path).exists()

    def __repr__(self) -> str:
        return f"Root({str(self.path)!r})"
