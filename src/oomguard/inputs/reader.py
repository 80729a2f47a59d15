"""The one door every command reads a launch through.

``read_launches(TARGET)`` reads a file, ``-`` (stdin) or ``/dev/fd/N`` (a pipe, as
``oomguard plan <(kubectl get deploy x -o yaml)`` passes it), bounded like every
other input (``oomguard.inputs.files``), and returns every vLLM launch in it:

- a shell script (``start_api.sh``), or one command line;
- a ``vllm serve --config`` YAML;
- a systemd service unit (``oomguard.inputs.systemd_unit``): its ``ExecStart=``;
- a Kubernetes object, a compose file or production-stack Helm values
  (``oomguard.inputs.manifests``): one launch per vLLM container, service or
  ``modelSpec``.

``TARGET#NAME`` picks one launch of a file that holds several (``values.yaml#llama3``,
``deploy.yaml#vllm``); ``read_launch`` returns the only (or the picked) one. The kind
is told from the content (a pipe has no file name), the suffix only breaks ties.
``read_command`` / ``read_flags`` are the same parser for a command after ``--`` and
for vLLM flags given to oomguard directly.
"""

from __future__ import annotations

import os
import re

from oomguard.errors import InputError
from oomguard.inputs import files
from oomguard.inputs.command import parse_command, parse_config_yaml, parse_flags, parse_script, read_text
from oomguard.inputs.launch import Launch

__all__ = ["read_command", "read_flags", "read_launch", "read_launches", "launches_from_text", "split_selector"]


def split_selector(target: str | os.PathLike[str]) -> tuple[str, str | None]:
    """(path, launch name) of ``PATH#NAME``; a file whose name holds ``#`` is taken as it is."""
    t = os.fspath(target)
    if "#" not in t or files.is_named_stream(t) or os.path.lexists(t):
        return t, None
    path, _, name = t.rpartition("#")
    return path, (name or None)


def _looks_like_yaml(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        return False
    if lines[0].strip() == "---" or lines[0].startswith(("apiVersion:", "kind:")):
        return True
    return all(re.match(r"^[A-Za-z0-9_\-\"'.]+\s*:(\s|$)", ln) or ln.startswith((" ", "-", "\t")) for ln in lines)


def _is_unit(text: str) -> bool:
    from oomguard.inputs.systemd_unit import is_unit

    return is_unit(text)


def launches_from_text(text: str, *, path: str, version: str | None = None, lenient: bool = False,
                       suffix: str = "") -> list[Launch]:
    """Every launch in a launch text (the kind told from the content)."""
    if not text.strip():
        raise InputError("empty file, expected a launch script or YAML", file=path)
    head = text.lstrip()
    # a systemd unit (oomguard's own export, or a hand-written one); is_unit needs a "[Service]" line, so a
    # text without one never imports the unit reader
    if suffix == ".service" or ("[Service]" in text and _is_unit(text)):
        from oomguard.inputs.systemd_unit import read_unit

        return [read_unit(text, path=path, version=version, lenient=lenient)]
    script_like = head.startswith(("#!", "vllm", "python", "export", "docker", "exec", "CUDA_", "VLLM_"))
    if (suffix in (".yaml", ".yml") and not head.startswith("#!")) or (not script_like and _looks_like_yaml(text)):
        from oomguard.inputs.manifests import is_manifest, read_manifests

        if is_manifest(text):
            return read_manifests(text, path=path, version=version, lenient=lenient)
        return [parse_config_yaml(text, path=path, version=version, lenient=lenient)]
    return [parse_script(text, path=path, version=version, lenient=lenient)]


def read_launches(target: str | os.PathLike[str], *, version: str | None = None, lenient: bool = False) -> list[Launch]:
    """Every vLLM launch of a file, ``-`` or ``/dev/fd/N`` (``TARGET#NAME``: the one named)."""
    from pathlib import Path  # a launch file's suffix; plan --model FLAGS reads none (start-up)

    path, name = split_selector(target)
    text = read_text(path)
    shown = files.display(path)
    launches = launches_from_text(text, path=shown, version=version, lenient=lenient,
                                  suffix=Path(path).suffix.lower() if not files.is_named_stream(path) else "")
    if name is None:
        return launches
    picked = [x for x in launches if _matches(x, name)]
    if not picked:
        raise InputError(f"no launch named {name!r} here; it holds {_names(launches)}", file=shown)
    if len(picked) > 1:
        raise InputError(f"{name!r} names {len(picked)} launches ({_names(picked)}); use a longer name", file=shown)
    return picked


def short_name(launch: Launch) -> str:
    """The name ``FILE#NAME`` takes for a launch: the container, service or modelSpec name."""
    d = launch.deployment or {}
    if d.get("format") == "kubernetes":
        return str(d.get("container") or d.get("name") or "")
    return str(d.get("name") or "")


def _matches(launch: Launch, name: str) -> bool:
    if not launch.name:
        return False
    d = launch.deployment or {}
    parts = {launch.name, short_name(launch), str(d.get("name") or ""),
             f"{d.get('name')}/{d.get('container')}" if d.get("container") else ""}
    return name in parts - {""}


def _names(launches: list[Launch]) -> str:
    shown = [x.name or x.kind for x in launches[:8]]
    return ", ".join(shown) + (" ..." if len(launches) > 8 else "")


def read_launch(target: str | os.PathLike[str], *, version: str | None = None, lenient: bool = False) -> Launch:
    """The one vLLM launch of a file (or the one ``TARGET#NAME`` names)."""
    launches = read_launches(target, version=version, lenient=lenient)
    if len(launches) > 1:
        path, _ = split_selector(target)
        raise InputError(f"{len(launches)} vLLM launches here ({_names(launches)}): name one as "
                         f"{path}#{short_name(launches[0]) or 'NAME'}", file=files.display(path))
    return launches[0]


def read_command(argv: list[str], *, version: str | None = None, lenient: bool = False) -> Launch:
    """A command given after ``--`` (words, or one string)."""
    return parse_command(argv, version=version, lenient=lenient)


def read_flags(argv: list[str], *, version: str | None = None, lenient: bool = False) -> Launch:
    """vLLM flags given to an oomguard command directly (no program name)."""
    return parse_flags(argv, version=version, lenient=lenient)
