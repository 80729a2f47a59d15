"""Read an exported launch back with oomguard's own launch readers.

``oomguard export launch`` renders, reads the text back here and compares
the flags before printing anything: an exported unit that would start vLLM
with different flags is a bug, and it is caught at export time, not at the
next restart. The tests use the same functions for the round-trip property.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from oomguard.export.launch import Target, parse_env_file


def _undollar(text: str) -> str:
    return text.replace("$$", "$")


def read_back(
    text: str, target: Target | str, *, version: str | None = None
) -> tuple[str | None, dict[str, Any], dict[str, str]]:
    """``(model, flags, env)`` as oomguard reads the exported ``text``.

    For ``env`` only the environment is returned (the flags are not part of an env file).
    """
    import yaml

    from oomguard.inputs.command import parse_script
    from oomguard.inputs.reader import read_command as parse_command
    from oomguard.inputs.reader import read_launch

    target = Target(target)
    if target is Target.SYSTEMD:
        from oomguard.export.systemd import environment, split_command, unit_values

        exec_start = unit_values(text, "ExecStart")
        if len(exec_start) != 1:
            raise ValueError(f"expected one ExecStart=, found {len(exec_start)}")
        launch = parse_command(split_command(exec_start[0]), version=version)
        return launch.model, launch.flags, environment(text)
    if target is Target.DOCKER:
        launch = parse_script(text, path=None, version=version)
        return launch.model, launch.flags, dict(launch.env)
    if target is Target.ENV:
        return None, {}, parse_env_file(text)
    if target in (Target.COMPOSE, Target.KUBERNETES):
        doc = yaml.safe_load(text)
        if target is Target.COMPOSE:
            (service,) = doc["services"].values()
            argv = service["command"]
            env = {k: _undollar(str(v)) for k, v in (service.get("environment") or {}).items()}
        else:
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            argv = container["args"]
            env = {e["name"]: _undollar(e["value"]) for e in container.get("env", []) if "value" in e}
        launch = parse_command([_undollar(str(w)) for w in argv], version=version)
        return launch.model, launch.flags, env
    # YAML: read_launch wants a file
    fd, path = tempfile.mkstemp(suffix=".yaml", prefix="oomguard-export-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        launch = read_launch(path, version=version)
    finally:
        os.unlink(path)
    flags = dict(launch.flags)
    # `no-x: true` means x = False (vLLM turns it into --no-x). oomguard.inputs.launch.apply_yaml
    # does not apply the negation yet (reported); until it does, apply it here. Idempotent.
    data = yaml.safe_load(text) or {}
    try:
        from oomguard.versions import get_release

        rel = get_release(version)
        for key, value in data.items():
            if value is True and str(key).startswith("no-"):
                res = rel.resolve_option("--" + str(key))
                if res.negated:
                    flags[res.flag.dest] = False
    except Exception:  # noqa: BLE001 - the reader already validated the keys
        pass
    return launch.model, flags, {}


def differences(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Human-readable differences between two flag dicts (empty when equal)."""
    out = []
    for key in sorted(set(expected) | set(got)):
        a, b = expected.get(key, "<absent>"), got.get(key, "<absent>")
        if a != b or type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            out.append(f"{key}: exported {a!r}, read back {b!r}")
    return out


def expected_flags(flags: dict[str, Any], *, version: str | None = None) -> dict[str, Any]:
    """The flags an export carries: without credentials and without what vLLM's defaults imply.

    A ``False`` for a flag that only has a positive form (``--disable-log-stats``) is
    its default and is not written; an empty list is not written either.
    """
    from oomguard.inputs.render import flag_form, is_secret_dest

    out: dict[str, Any] = {}
    for dest, value in flags.items():
        if value is None or (is_secret_dest(dest) and not isinstance(value, bool)):
            continue
        if isinstance(value, (list, tuple)) and not value:
            continue
        if isinstance(value, bool):
            form = flag_form(dest, version)
            if not (form.known and form.takes_value):
                if value is False and not form.negative:
                    continue  # a store_true flag's default
                if value is True and not form.has_positive:
                    continue  # a store_false flag's default
        out[dest] = value
    return out
