"""One rooted exception tree for oomguard.

Every error a user can trigger is an ``OomguardError``. The CLI prints its
``str()`` as one line and exits with the command's "bad input" code; it never
shows a traceback for these.

- ``InputError``: a file, flag or value we could not read or accept. Carries the
  file and line when known.
- ``UnsupportedModelError``: a model config we cannot model exactly (we refuse to
  guess a dense model).
- ``UnknownGPUError``: a GPU name not in the catalog, with close matches.
"""

from __future__ import annotations


class OomguardError(Exception):
    """Base of every user-facing error."""


class InputError(OomguardError):
    def __init__(self, message: str, *, file: str | None = None, line: int | None = None):
        self.message = message
        self.file = file
        self.line = line
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.message}"


class UnsupportedModelError(OomguardError):
    pass


class UnknownGPUError(OomguardError):
    pass
