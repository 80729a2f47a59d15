"""The memory limit the kernel enforces on this process's cgroup (v1 or v2).

A container or Kubernetes pod sees the machine's /proc/meminfo, yet the kernel
kills it at its cgroup limit; that limit is the RAM vLLM really has. The
effective limit is the smallest along the path from the process's cgroup up to
the root (a pod limit sits one level above the container), so we walk up.

With cgroup namespaces (the Docker default on v2) /proc/self/cgroup says ``/``
and /sys/fs/cgroup is the container's own cgroup; we fall back to the top of
the mount when the named path does not exist under it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import PurePosixPath

from oomguard.errors import InputError
from oomguard.host.root import Root

__all__ = ["CgroupVersion", "CgroupMemory", "ContainerKind", "read_cgroup_memory", "detect_container"]

# cgroup v1 writes PAGE_COUNTER_MAX rounded to pages (9223372036854771712) for "no limit".
_V1_UNLIMITED = 1 << 62


class CgroupVersion(str, Enum):
    V1 = "v1"
    V2 = "v2"


class ContainerKind(str, Enum):
    NONE = "none"
    DOCKER = "docker"
    KUBERNETES = "kubernetes"
    OTHER = "container"  # podman, containerd, LXC, ...


@dataclass(frozen=True)
class CgroupMemory:
    version: CgroupVersion
    path: str  # the process's cgroup path as /proc/self/cgroup names it
    limit_bytes: int | None  # effective hard limit (memory.max / limit_in_bytes); None = none
    limit_from: str | None  # the cgroup directory that set it
    high_bytes: int | None  # v2 memory.high (throttle and reclaim point)
    swap_limit_bytes: int | None  # v2 memory.swap.max; v1 memsw limit (memory + swap)
    current_bytes: int | None  # usage now, page cache included


def _parse_cgroup_file(text: str, source: str) -> tuple[str | None, str | None]:
    """The v2 path and the v1 memory-controller path of /proc/self/cgroup."""
    v2 = v1_memory = None
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(":", 2)
        if len(parts) != 3:
            raise InputError(f"not a cgroup line: {line[:60]!r}", file=source, line=no)
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1_memory = path
    return v2, v1_memory


def _value(root: Root, path: str, v1: bool = False) -> int | None:
    text = root.read_text(path)
    if text is None:
        return None
    value = text.strip()
    if value == "max":
        return None
    from oomguard.numbers import NumberError, parse_int

    try:
        number = parse_int(value, lo=0, hi=(1 << 64) - 1)
    except NumberError as exc:
        raise InputError(f"expected a byte count or 'max', found {value[:40]!r} ({exc.why})",
                         file=root.display(path), line=1) from None
    if v1 and number >= _V1_UNLIMITED:
        return None
    return number


def _walk(root: Root, base: str, path: str) -> list[str]:
    """Directories from the leaf cgroup up to the mount top, the ones that exist."""
    leaf = PurePosixPath(base) / path.lstrip("/")
    if not root.file(str(leaf)).is_dir():
        leaf = PurePosixPath(base)  # namespaced: the mount top is our cgroup
    dirs = []
    current = leaf
    while True:
        dirs.append(str(current))
        if current == PurePosixPath(base) or current == current.parent:
            break
        current = current.parent
    return dirs


def _min_limit(root: Root, dirs: list[str], name: str, v1: bool) -> tuple[int | None, str | None]:
    best: int | None = None
    where: str | None = None
    for d in dirs:
        value = _value(root, f"{d}/{name}", v1=v1)
        if value is not None and (best is None or value < best):
            best, where = value, d
    return best, where


def read_cgroup_memory(root: Root) -> CgroupMemory | None:
    """The memory limits of our cgroup, or None when no cgroup memory controller is visible."""
    text = root.read_text("/proc/self/cgroup")
    v2_path, v1_path = (None, None) if text is None else _parse_cgroup_file(text, root.display("/proc/self/cgroup"))

    if v1_path is not None and root.file("/sys/fs/cgroup/memory").is_dir():
        base = "/sys/fs/cgroup/memory"
        dirs = _walk(root, base, v1_path)
        limit, where = _min_limit(root, dirs, "memory.limit_in_bytes", v1=True)
        memsw, _ = _min_limit(root, dirs, "memory.memsw.limit_in_bytes", v1=True)
        return CgroupMemory(
            version=CgroupVersion.V1,
            path=v1_path,
            limit_bytes=limit,
            limit_from=where,
            high_bytes=None,
            swap_limit_bytes=memsw,
            current_bytes=_value(root, f"{dirs[0]}/memory.usage_in_bytes", v1=True),
        )

    base = "/sys/fs/cgroup"
    if v2_path is None and not root.exists(f"{base}/cgroup.controllers"):
        return None
    dirs = _walk(root, base, v2_path or "/")
    # The root cgroup has no memory.max; a host without limits has none anywhere.
    limit, where = _min_limit(root, dirs, "memory.max", v1=False)
    high, _ = _min_limit(root, dirs, "memory.high", v1=False)
    return CgroupMemory(
        version=CgroupVersion.V2,
        path=v2_path or "/",
        limit_bytes=limit,
        limit_from=where,
        high_bytes=high,
        swap_limit_bytes=_value(root, f"{dirs[0]}/memory.swap.max"),
        current_bytes=_value(root, f"{dirs[0]}/memory.current"),
    )


def detect_container(root: Root) -> ContainerKind:
    text = (root.read_text("/proc/self/cgroup") or "") + (root.read_text("/proc/1/cgroup") or "")
    if "kubepods" in text or root.exists("/var/run/secrets/kubernetes.io/serviceaccount"):
        return ContainerKind.KUBERNETES
    if "docker" in text or root.exists("/.dockerenv"):
        return ContainerKind.DOCKER
    if any(word in text for word in ("containerd", "crio", "libpod", "lxc")) or root.exists("/run/.containerenv"):
        return ContainerKind.OTHER
    return ContainerKind.NONE
