"""The one way oomguard writes a file: ``check --fix`` and every ``-o`` / ``--report``.

``write_text(target, text)`` writes a temporary file in the target's own
directory and renames it over the target, so that:

- a reader never sees half a file, and a failed write leaves the old one;
- a symlink already at the target is replaced, never followed (a planted
  ``NAME.fixed.sh -> ~/.ssh/authorized_keys`` is not written through, and its
  target's mode is not changed);
- the target is never a directory, FIFO or device (refused with one line).

Permissions: an existing target keeps its own mode; a new file gets
``mode_from``'s mode when given (``check --fix`` keeps a script executable),
else the usual 0666 & ~umask. Never more than the user's bits allow, and no
set-uid/set-gid/sticky bits are copied.
"""

from __future__ import annotations

import os
import stat
import tempfile

from oomguard.errors import InputError
from oomguard.inputs.files import oserror_text


def _umask() -> int:
    # os.umask has no read-only form; reading it means setting it back at once.
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(target: str | os.PathLike[str], text: str, *, mode_from: str | os.PathLike[str] | None = None,
               what: str = "", mode: int | None = None) -> None:
    """Atomically replace ``target`` with ``text`` (UTF-8); InputError naming the path on any failure.

    ``mode``: exactly these permission bits, whatever the target had (``0o600`` for a file of
    secrets: the temporary file is created 0600, so the text is never readable by others).
    """
    path = os.fspath(target)
    label = f"cannot write{' ' + what if what else ''}"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"{label}: {oserror_text(exc)}", file=path) from None
    except ValueError:
        raise InputError(f"{label}: invalid file name", file=path) from None
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise InputError(f"{label}: {kind}", file=path)
    forced = mode
    if forced is not None:
        mode = forced & 0o777
    elif st is not None and stat.S_ISREG(st.st_mode):
        mode = stat.S_IMODE(st.st_mode)
    else:
        # New file (or a symlink we replace, whose target's mode says nothing about us).
        base = 0o666
        if mode_from is not None:
            try:
                base = stat.S_IMODE(os.stat(mode_from).st_mode)
            except (OSError, ValueError):
                pass
        mode = base & ~_umask()
    mode &= 0o777  # never copy set-uid, set-gid or sticky bits
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path)[:50] + ".", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"{label}: {oserror_text(exc)}", file=path) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)  # rename(2): replaces a symlink itself, never what it points to
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InputError(f"{label}: {oserror_text(exc)}", file=path) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
