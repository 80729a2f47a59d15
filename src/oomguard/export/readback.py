"""Read an exported launch back with the target's own grammar, before anything is printed.

Two checks, both run by ``oomguard export launch`` and by the tests:

- ``check_structure``: the text is parsed as its target reads it (a unit file as
  systemd does, ``systemd.parse_unit``; the docker line with oomguard's shell
  lexer; compose and Kubernetes with ``yaml.safe_load_all``; env files line by
  line) and must be exactly what the renderer meant: the same settings in the
  same sections (one ``ExecStart=``, no key we did not write), the same shell
  words in one command, the same YAML documents, the same comments. Every line
  written is covered. Besides, no raw control character other than the
  newline may appear anywhere in the text (each is escaped or refused first).
- ``read_back``: the launch oomguard's launch readers see in the text (model,
  flags, environment), to compare with the launch that was exported: a unit
  that would start vLLM with other flags is a bug caught at export time.

A flag whose value moved to the environment reads back as ``EnvRef(NAME)``.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

from oomguard.export.fields import CONTROL, describe, visible
from oomguard.export.launch import Rendered, Target, parse_env_file, parse_env_lines
from oomguard.export.shell import EnvRef


def _undollar(text: str) -> str:
    return text.replace("$$", "$")


# -- structure --------------------------------------------------------------------------


def _raw_controls(text: str) -> list[str]:
    bad = [m.group(0) for m in CONTROL.finditer(text) if m.group(0) != "\n"]
    if bad:
        return [f"the text holds a raw control character {describe(bad[0])} ({len(bad)} in all)"]
    return []


def _systemd_structure(text: str) -> list[tuple]:
    from oomguard.export.systemd import parse_unit, split_command, split_words

    out: list[tuple] = []
    for e in parse_unit(text):
        if e.kind == "comment":
            out.append(("comment", None, e.value))
        elif e.kind == "blank":
            out.append(("blank",))
        elif e.kind == "section":
            out.append(("section", e.section))
        elif e.key == "ExecStart":
            out.append(("setting", "ExecStart", tuple(split_command(e.value))))
        elif e.key == "Environment":
            out.append(("setting", "Environment", tuple(str(w) for w in split_words(e.value, dollars=False))))
        else:
            out.append(("setting", e.key, e.value))
    return out


def _shell_words(text: str) -> tuple[list[str], list[Any]]:
    from oomguard.inputs.shell import lex

    script = lex(text, path=None)
    if len(script.commands) != 1:
        raise ValueError(f"expected one shell command, found {len(script.commands)}")
    if script.commands[0].assignments:
        raise ValueError("the command starts with variable assignments")
    words: list[Any] = []
    for w in script.commands[0].words:
        if w.unresolved and len(w.unresolved) == 1 and w.text.startswith("${" + w.unresolved[0] + "}"):
            words.append(EnvRef(w.unresolved[0], w.text[len(w.unresolved[0]) + 3 :]))
        elif w.unresolved:
            raise ValueError(f"a word expands variables: {visible(w.raw[:40])!r}")
        else:
            words.append(w.text)
    return [c for _, c in script.comments], words


def _yaml_docs(text: str) -> list[Any]:
    import yaml

    return [d for d in yaml.safe_load_all(text)]


def _comment_lines(text: str) -> list[str]:
    """The comment lines at the top of a YAML export (the emitter itself writes none)."""
    lines = text.split("\n")
    out = []
    for line in lines:
        if line.startswith("#"):
            out.append(line)
        else:
            break
    return out


def check_structure(rendered: Rendered, target: Target | str) -> list[str]:
    """Problems (empty when none) between what ``rendered`` meant and what its text parses to."""
    target = Target(target)
    text = rendered.text
    problems = _raw_controls(text)
    meant = rendered.structure
    try:
        if target is Target.SYSTEMD:
            got = _systemd_structure(text)
            if got != meant:
                problems.append(_first_difference(meant, got, "unit"))
            exec_starts = [e for e in got if e[:2] == ("setting", "ExecStart")]
            if len(exec_starts) != 1:
                problems.append(f"expected one ExecStart=, found {len(exec_starts)}")
        elif target is Target.DOCKER:
            comments, words = _shell_words(text)
            if comments != meant["comments"]:
                problems.append(_first_difference(meant["comments"], comments, "comment"))
            if words != meant["words"]:
                problems.append(_first_difference(meant["words"], words, "word"))
        elif target in (Target.COMPOSE, Target.KUBERNETES, Target.YAML):
            docs = _yaml_docs(text)
            if docs != meant["docs"]:
                problems.append(f"the YAML reads back as {len(docs)} document(s) other than the ones written")
            comments = _comment_lines(text)
            if comments != meant["comments"]:
                problems.append(_first_difference(meant["comments"], comments, "comment"))
            body = text.split("\n")[len(comments):]
            if any(line.lstrip().startswith("#") for line in body):
                problems.append("a comment line inside the YAML body")
        elif target is Target.ENV:
            got = parse_env_lines(text)
            if got != meant:
                problems.append(_first_difference(meant, got, "line"))
    except Exception as exc:  # noqa: BLE001 - any parser error is a failed read-back, not a crash
        msg = str(exc).splitlines()[0] if str(exc) else ""
        problems.append(f"reading it back failed: {type(exc).__name__}: {visible(msg[:200])}")
    return problems


def _first_difference(meant: list, got: list, what: str) -> str:
    for i, (a, b) in enumerate(zip(meant, got)):
        if a != b:
            return f"{what} {i + 1}: written {visible(repr(a)[:120])}, reads back as {visible(repr(b)[:120])}"
    return f"{len(meant)} {what}s written, {len(got)} read back"


# -- the launch it holds --------------------------------------------------------------------


def _is_list_flag(dest: str, version: str | None) -> bool:
    from oomguard.inputs.render import flag_form

    form = flag_form(dest, version)
    return form.multi_word or form.value_type == "list"


def _take_refs(words: list[Any], ref_of, version: str | None) -> tuple[list[str], dict[str, Any]]:
    """Split the argv into plain words and ``{dest: EnvRef | [EnvRef]}`` for flags written as references."""
    from oomguard.versions import get_release

    rel = get_release(version)
    plain: list[str] = []
    refs: dict[str, Any] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if isinstance(w, str) and w.startswith("--") and i + 1 < len(words) and ref_of(words[i + 1]):
            names = []
            j = i + 1
            while j < len(words) and ref_of(words[j]):
                names.append(ref_of(words[j]))
                j += 1
            dest = rel.resolve_option(w.split("=", 1)[0]).flag.dest
            refs[dest] = [EnvRef(n) for n in names] if _is_list_flag(dest, version) else EnvRef(names[0])
            if len(names) > 1 and not isinstance(refs[dest], list):
                raise ValueError(f"{w}: several references for a one-value flag")
            i = j
            continue
        if ref_of(w):
            raise ValueError("a reference to the environment outside a flag value")
        plain.append(w)
        i += 1
    return plain, refs


_DOCKER_OPTIONS_WITH_VALUE = {"--name", "--gpus", "-p", "--memory", "-v", "-e"}  # what render_docker writes


def read_back(
    text: str, target: Target | str, *, version: str | None = None
) -> tuple[str | None, dict[str, Any], dict[str, str]]:
    """``(model, flags, env)`` as oomguard reads the exported ``text``.

    Flags written as references to the environment are ``EnvRef`` values. For ``env``
    only the environment is returned (the flags are not part of an env file).
    """
    import yaml

    from oomguard.inputs.reader import read_command as parse_command
    from oomguard.inputs.reader import read_launch

    target = Target(target)
    if target is Target.SYSTEMD:
        from oomguard.export.systemd import environment, split_command, unit_values

        exec_start = unit_values(text, "ExecStart")
        if len(exec_start) != 1:
            raise ValueError(f"expected one ExecStart=, found {len(exec_start)}")
        words = split_command(exec_start[0])
        plain, refs = _take_refs(words, lambda w: w.name if isinstance(w, EnvRef) and not w.suffix else None, version)
        launch = parse_command([str(w) for w in plain], version=version)
        return launch.model, {**launch.flags, **refs}, environment(text)
    if target is Target.DOCKER:
        _, words = _shell_words(text)
        if words[:2] != ["docker", "run"]:
            raise ValueError("not a docker run command")
        env = {}
        image = 2
        while image < len(words) and str(words[image]).startswith("-"):
            if words[image] in _DOCKER_OPTIONS_WITH_VALUE:
                if words[image] == "-e" and isinstance(words[image + 1], str) and "=" in words[image + 1]:
                    k, _, v = words[image + 1].partition("=")
                    env[k] = v
                image += 2
            else:
                image += 1
        plain, refs = _take_refs(words[image + 1 :], lambda w: w.name if isinstance(w, EnvRef) and not w.suffix else None,
                                 version)
        launch = parse_command(plain, version=version)
        return launch.model, {**launch.flags, **refs}, env
    if target is Target.ENV:
        return None, {}, parse_env_file(text)
    if target in (Target.COMPOSE, Target.KUBERNETES):
        doc = yaml.safe_load(text)
        if target is Target.COMPOSE:
            (service,) = doc["services"].values()
            argv = service["command"]
            env = {k: str(v) for k, v in (service.get("environment") or {}).items()}
            ref_re = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
        else:
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            argv = container["args"]
            env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
            ref_re = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
        plain, refs = _take_refs([str(w) for w in argv], lambda w: (m.group(1) if (m := ref_re.fullmatch(w)) else None), version)
        launch = parse_command([_undollar(w) for w in plain], version=version)
        env = {k: v if ref_re.fullmatch(v) else _undollar(v) for k, v in env.items()}
        return launch.model, {**launch.flags, **refs}, env
    # YAML: read_launch wants a file; references are on the `# run:` line
    fd, path = tempfile.mkstemp(suffix=".yaml", prefix="oomguard-export-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        launch = read_launch(path, version=version)
    finally:
        os.unlink(path)
    flags = dict(launch.flags)
    run = next((line for line in _comment_lines(text) if line.startswith("# run: ")), None)
    if run:
        from oomguard.inputs.shell import lex

        cmd = lex(run[len("# run: ") :], path=None).commands[0].words
        words = [str(EnvRef(w.unresolved[0])) if w.unresolved else w.text for w in cmd][4:]  # vllm serve --config F
        ref_re = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
        _, refs = _take_refs(words, lambda w: (m.group(1) if (m := ref_re.fullmatch(w)) else None), version)
        flags.update(refs)
    # `no-x: true` means x = False (vLLM turns it into --no-x). oomguard.inputs.launch.apply_yaml
    # applies the negation; this keeps older readers honest. Idempotent.
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
            out.append(f"{key}: exported {visible(repr(a))[:200]}, read back {visible(repr(b))[:200]}")
    return out


def expected_flags(flags: dict[str, Any], *, version: str | None = None) -> dict[str, Any]:
    """The flags an export carries, as read back: what vLLM's defaults imply is not written.

    ``flags`` are the written ones (``secrets.plan_secrets(...).flags``: credentials are
    references or gone). A ``False`` for a flag that only has a positive form
    (``--disable-log-stats``) is its default and is not written; an empty list is not
    written either.
    """
    from oomguard.inputs.render import flag_form

    out: dict[str, Any] = {}
    for dest, value in flags.items():
        if value is None:
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


def verify(rendered: Rendered, target: Target | str, launch: Any, version: str | None) -> list[str]:
    """Everything that differs between ``launch`` and the export ``rendered`` of it (empty: none)."""
    from oomguard.errors import OomguardError
    from oomguard.export.secrets import plan_for

    target = Target(target)
    problems = check_structure(rendered, target)
    if problems:
        return problems
    try:
        model, flags, env = read_back(rendered.text, target, version=version)
    except (OomguardError, ValueError, KeyError, StopIteration, TypeError) as exc:
        return [f"reading it back failed: {visible(str(exc))[:200]}"]
    except Exception as exc:  # noqa: BLE001 - a reader's own error (e.g. YAML) is a failed read-back, not a crash
        return [f"reading it back failed: {type(exc).__name__}"]
    plan = plan_for(launch)
    if target is not Target.ENV:
        problems += differences(expected_flags(plan.flags, version=version), flags)
        if model != launch.model:
            problems.append(f"model: exported {visible(repr(launch.model))[:200]}, read back {visible(repr(model))[:200]}")
    want_env = dict(plan.env)
    if target in (Target.DOCKER, Target.COMPOSE, Target.KUBERNETES):
        want_env.pop("CUDA_VISIBLE_DEVICES", None)  # became the container's GPU selection
    if target is not Target.YAML:
        got_env = {k: v for k, v in env.items() if k not in plan.secrets}
        if got_env != want_env:
            problems.append("the environment reads back differently: "
                            + ", ".join(sorted(set(got_env) ^ set(want_env)) or [k for k in want_env if got_env.get(k) != want_env[k]]))
    for name, value in plan.secrets.items():
        if value and len(value) >= 4 and value in rendered.text and target is not Target.ENV:
            problems.append(f"the value of the secret {name} is in the export")
    return problems
