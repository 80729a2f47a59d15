"""cgroup v1/v2 memory limits of containers and pods, read from fake trees."""

from __future__ import annotations

import pytest

from oomguard.errors import InputError
from oomguard.host.cgroup import CgroupVersion, ContainerKind, detect_container, read_cgroup_memory
from oomguard.host.root import Root
from oomguard.units import GiB

from host_paths import ROOTS


def test_v2_namespaced_docker_container():
    root = Root(ROOTS / "docker_cgroup_v2_limited")
    cg = read_cgroup_memory(root)
    assert cg.version is CgroupVersion.V2
    assert cg.path == "/"
    assert cg.limit_bytes == 64 * GiB
    assert cg.high_bytes == 60 * GiB
    assert cg.swap_limit_bytes == 0
    assert cg.current_bytes == 2 * GiB
    assert detect_container(root) is ContainerKind.DOCKER


def test_v1_pod_limit_above_the_container_wins():
    root = Root(ROOTS / "k8s_cgroup_v1_pod")
    cg = read_cgroup_memory(root)
    assert cg.version is CgroupVersion.V1
    assert cg.path.startswith("/kubepods/burstable/pod")
    # The container says 48 GiB, its pod 40 GiB: the kernel enforces the smaller.
    assert cg.limit_bytes == 40 * GiB
    assert cg.limit_from.endswith("pod5f0c1a2e-7d3b-4c1e-9a55-2b8e6d0f4c11")
    assert cg.current_bytes == 3 * GiB
    assert detect_container(root) is ContainerKind.KUBERNETES


def test_v2_host_session_without_limits():
    root = Root(ROOTS / "bad_kernel_settings")
    cg = read_cgroup_memory(root)
    assert cg.version is CgroupVersion.V2
    assert cg.limit_bytes is None and cg.high_bytes is None
    assert cg.current_bytes == GiB
    assert detect_container(root) is ContainerKind.NONE


def test_v1_unlimited_sentinel_is_no_limit(fake_root):
    r = fake_root("k8s_cgroup_v1_pod")
    pod = "sys/fs/cgroup/memory/kubepods/burstable/pod5f0c1a2e-7d3b-4c1e-9a55-2b8e6d0f4c11"
    r.write(f"{pod}/memory.limit_in_bytes", "9223372036854771712\n")
    ctr = next(p.name for p in (r.path / pod).iterdir() if p.is_dir())
    r.write(f"{pod}/{ctr}/memory.limit_in_bytes", "9223372036854771712\n")
    assert read_cgroup_memory(Root(r.path)).limit_bytes is None


def test_no_cgroup_files_means_none(fake_root):
    r = fake_root("bad_kernel_settings").remove("proc/self/cgroup").remove("sys/fs/cgroup")
    assert read_cgroup_memory(Root(r.path)) is None


def test_garbage_limit_names_the_file(fake_root):
    r = fake_root("docker_cgroup_v2_limited").write("sys/fs/cgroup/memory.max", "sixty-four gigs\n")
    with pytest.raises(InputError, match=r"memory.max:1: expected a byte count"):
        read_cgroup_memory(Root(r.path))


def test_bad_cgroup_line(fake_root):
    r = fake_root("docker_cgroup_v2_limited").write("proc/self/cgroup", "garbage\n")
    with pytest.raises(InputError, match=r"cgroup:1: not a cgroup line"):
        read_cgroup_memory(Root(r.path))
