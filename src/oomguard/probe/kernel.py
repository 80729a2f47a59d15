"""New kernel OOM-killer lines while the probe runs.

A process the kernel kills for host RAM leaves no CUDA error, only a line in
the kernel log (S1's third failure). We read ``/dev/kmsg`` from its end at
start, so only new records count; when it is not readable we fall back to
diffing ``dmesg`` output; when neither works we say so and carry on (the
verdict then states that kernel kills could not be checked).
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from oomguard.probe.classes import Source
from oomguard.probe.samplers import Sample, ThreadedSampler

_OOM = re.compile(
    r"Out of memory: Killed process|Memory cgroup out of memory|oom-kill:|invoked oom-killer|"
    r"oom_reaper: reaped process",
    re.IGNORECASE,
)
_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")


@dataclass(frozen=True)
class OomKill:
    pid: int
    name: str
    line: str


def oom_kill(line: str) -> OomKill | None:
    m = _KILLED.search(line)
    return OomKill(int(m.group(1)), m.group(2), line.strip()) if m else None


def is_oom_line(line: str) -> bool:
    return bool(_OOM.search(line))


class _KmsgReader:
    """Non-blocking reader of ``/dev/kmsg`` positioned at the end."""

    def __init__(self, path: str = "/dev/kmsg"):
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self._fd, 0, os.SEEK_END)

    def __call__(self) -> list[str]:
        lines = []
        for _ in range(10000):  # a bound, in case the kernel logs faster than we read
            try:
                record = os.read(self._fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten under us: keep going
                    continue
                raise
            if not record:
                break
            text = record.decode(errors="replace")
            lines.append(text.split(";", 1)[1].rstrip("\n") if ";" in text else text.rstrip("\n"))
        return lines

    def close(self) -> None:
        os.close(self._fd)


class _DmesgReader:
    """``dmesg`` diffed against the previous call (slower; only when kmsg is closed)."""

    def __init__(self) -> None:
        self._seen = len(self._read())

    @staticmethod
    def _read() -> list[str]:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5, check=True).stdout
        return out.splitlines()

    def __call__(self) -> list[str]:
        lines = self._read()
        # The ring buffer can wrap; if it shrank, everything visible is new to us.
        new = lines[self._seen :] if len(lines) >= self._seen else lines
        self._seen = len(lines)
        return new

    def close(self) -> None:
        return None


class KernelOomSampler(ThreadedSampler):
    """Emits one sample per new OOM-killer line (``text`` holds the line)."""

    source = Source.KERNEL
    name = "kernel"

    def __init__(self, reader: Callable[[], list[str]]):
        self._reader = reader
        # A non-blocking /dev/kmsg read is cheap enough for the event loop; dmesg is a subprocess.
        self.inline = isinstance(reader, _KmsgReader)
        self.kills: list[OomKill] = []
        self.lines: list[str] = []

    @classmethod
    def create(cls) -> tuple[KernelOomSampler | None, str]:
        try:
            return cls(_KmsgReader()), "kernel log: /dev/kmsg"
        except OSError as exc:
            kmsg_error = exc.strerror or str(exc)
        try:
            return cls(_DmesgReader()), f"kernel log: dmesg (/dev/kmsg: {kmsg_error})"
        except (OSError, subprocess.SubprocessError) as exc:
            return None, (
                f"kernel log not readable (/dev/kmsg: {kmsg_error}; dmesg: {exc}); "
                "kernel OOM kills cannot be checked: run as root or set kernel.dmesg_restrict=0"
            )

    def sample_sync(self, t: float) -> list[Sample]:
        out = []
        for line in self._reader():
            if not is_oom_line(line):
                continue
            self.lines.append(line)
            kill = oom_kill(line)
            values: dict[str, float] = {}
            if kill:
                self.kills.append(kill)
                values["killed_pid"] = float(kill.pid)
            out.append(Sample(t, self.source, "oom", values, text=line.strip()))
        return out

    async def close(self) -> None:
        close = getattr(self._reader, "close", None)
        if close:
            close()
