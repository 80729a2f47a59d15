"""Which parts of a launch are secret, and where each one goes in an export.

The decision is ``oomguard.redact.is_secret`` — the same redactor that masks
``check``'s and ``bundle``'s output — applied to every flag and environment
variable by name and by value: ``--api-key``, ``HF_TOKEN``, ``*_PASSWD``,
``*_AUTH*``, ``*_CREDENTIALS``, ``*_KEY``, ``*PASSWORD*``; URLs with
``user:pass@`` (``LMCACHE_REMOTE_URL``, ``--otlp-traces-endpoint``), bearer
tokens, key shapes, and JSON-valued flags holding any of these. A secret is
never written into a unit, a command line, a manifest or a compose file:

- ``--api-key`` (one key) becomes ``VLLM_API_KEY``, which vLLM reads itself
  (``entrypoints/serve/middleware/register.py``: ``args.api_key or [envs.VLLM_API_KEY]``);
  ``--hf-token`` becomes ``HF_TOKEN``, which huggingface_hub reads; the flag is dropped.
- any other secret flag keeps its place, and its value becomes a reference to
  ``SECRET_<FLAG>`` (``EnvRef``) that each target writes in its own syntax;
- a secret environment variable keeps its name and leaves the inline environment.

The values go only to the secrets file (``--secrets-file``, or the env file
``--to env -o FILE``), written with mode 0600; printed text names the
variables, never the values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from oomguard.export.shell import EnvRef

# flags vLLM (or the libraries it uses) can read from the environment themselves
READ_FROM_ENV = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}
_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass
class SecretPlan:
    flags: dict[str, Any]  # what is written: secret values replaced by EnvRef, or dropped
    env: dict[str, str]  # the plain environment (written inline)
    secrets: dict[str, str | None]  # NAME -> value (None: the launch itself read it from $NAME)
    moved: dict[str, list[str]] = field(default_factory=dict)  # flag dest -> the variables its value moved to
    dropped: dict[str, str] = field(default_factory=dict)  # flag dest -> the variable vLLM reads instead
    notes: list[str] = field(default_factory=list)
    # Variables a manifest sets from a Secret / ConfigMap / pod field (``Launch.env_from``): the Kubernetes
    # target writes each ``valueFrom`` back as it was; the others ask for it in the secrets file (``secrets``: None).
    env_from: dict[str, Any] = field(default_factory=dict)


def env_reference(value: Any) -> str | None:
    """``NAME`` when ``value`` is exactly ``$NAME`` / ``${NAME}`` (a variable the script did not set)."""
    if isinstance(value, str):
        m = _REFERENCE.fullmatch(value.strip())
        if m:
            return m.group(1) or m.group(2)
    return None


_K8S_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _as_reference(text: str, launch: Any) -> str | None:
    """``text`` as ``${NAME}`` when it is one variable: ``$NAME`` / ``${NAME}``, or in a Kubernetes manifest
    ``$(NAME)`` (the kubelet's expansion: a variable the container's env sets, from ``valueFrom`` too)."""
    if env_reference(text) is not None:
        return text.strip()
    m = _K8S_REFERENCE.fullmatch(text.strip())
    if m and (getattr(launch, "deployment", None) or {}).get("format") == "kubernetes":
        return "${" + m.group(1) + "}"
    return None


def _is_list(dest: str, launch: Any) -> bool:
    from oomguard.inputs.render import flag_form

    form = flag_form(dest, getattr(launch, "version", None))
    return form.multi_word or form.value_type == "list"


def secret_name(dest: str) -> str:
    return "SECRET_" + re.sub(r"[^A-Za-z0-9_]", "_", dest).upper()


def _flag_text(value: Any) -> str:
    from oomguard.inputs.render import format_value

    return format_value(value)


def unresolved_values(launch: Any) -> dict[str, Any]:
    """``{dest: "$NAME"}`` for the flags whose value is a variable the launch does not set.

    The launch reader leaves such a flag out of ``flags`` (vLLM's default is assumed for
    planning); an export must carry it, as a reference to that variable. A value that is more
    than one variable (``"$HOST:$PORT"``) has no reference form in every target: refused.
    """
    from oomguard.errors import InputError

    out: dict[str, Any] = {}
    for u in getattr(launch, "unresolved", None) or []:
        if u.dest == "model":
            raise InputError(f"the model is {u.option!r}'s ${u.variables[0]}, which the launch does not set: "
                             "give the model in the launch", file=u.file, line=u.line)
        if not u.dest or u.dest in launch.flags:
            continue
        occ = next((o for o in reversed(launch.occurrences) if o.dest == u.dest), None)
        text = occ.value_text if occ is not None else None
        ref = _as_reference(text, launch) if text is not None else None
        if ref is None:
            raise InputError(f"{u.option}: its value uses {', '.join('$' + v.lstrip('$') for v in u.variables)}, which the "
                             "launch does not set; an export writes values or a reference to one variable: set it in "
                             "the launch", file=u.file, line=u.line)
        out[u.dest] = ref
    return out


def plan_for(launch: Any) -> SecretPlan:
    """The export plan of a launch: its flags (with the unresolved references) and environment, the
    credentials the launch sets outside vLLM's names included (``launch.secret_env``: HF_TOKEN ...)."""
    refs = unresolved_values(launch)
    flags = {**dict(launch.flags), **refs}
    env = {**dict(getattr(launch, "secret_env", None) or {}), **dict(getattr(launch, "env", None) or {})}
    plan = plan_secrets(flags, env, references=set(refs), launch=launch)
    for name, found in (getattr(launch, "env_from", None) or {}).items():
        plan.env_from[name] = found
        plan.secrets[name] = None
        plan.notes.append(f"environment variable {name} is set from {found.source} in the manifest: the Kubernetes "
                          f"export keeps that reference; other targets read {name} from the secrets file")
    return plan


def plan_secrets(flags: dict[str, Any], env: dict[str, str], *, references: set[str] = frozenset(),
                 launch: Any = None) -> SecretPlan:
    """Split a launch's flags and environment into what is written and what moves out.

    ``references``: flags whose value is ``$NAME`` for a variable the launch does not set
    (``unresolved_values``): written as references to it, the variable listed for the operator.
    """
    from oomguard.redact import is_secret

    out_flags: dict[str, Any] = {}
    plan = SecretPlan(out_flags, {}, {})

    def add_secret(name: str, value: str | None) -> None:
        if name in plan.secrets and plan.secrets[name] not in (None, value):
            raise ValueError(f"two different secrets would move to {name}")
        plan.secrets[name] = value if value is not None else plan.secrets.get(name)

    for dest, value in flags.items():
        opt = "--" + dest.replace("_", "-")
        if dest in references and dest not in READ_FROM_ENV:
            name = env_reference(value)
            out_flags[dest] = [EnvRef(name)] if _is_list(dest, launch) else EnvRef(name)
            add_secret(name, None)
            plan.moved[dest] = [name]
            plan.notes.append(f"{opt} is ${name}, which the launch does not set: the export references it; "
                              f"set {name} where the server runs")
            continue
        if not is_secret(dest, value) and not (isinstance(value, list) and any(is_secret(dest, v) for v in value)):
            out_flags[dest] = value
            continue
        items = value if isinstance(value, list) else None
        own = READ_FROM_ENV.get(dest)
        if own and (items is None or len(items) == 1):
            single = items[0] if items is not None else value
            ref = env_reference(single)
            if ref and ref != own:
                # `--api-key "$MY_KEY"`: keep the reference (the caller's variable), not the name vLLM reads
                out_flags[dest] = [EnvRef(ref)] if items is not None or _is_list(dest, launch) else EnvRef(ref)
                add_secret(ref, None)
                plan.moved[dest] = [ref]
                plan.notes.append(f"{opt} reads ${ref}: set {ref} in the secrets file")
                continue
            add_secret(own, None if ref else str(single))
            plan.dropped[dest] = own
            plan.notes.append(f"{opt} was not written out: vLLM reads it from the environment variable {own}")
            continue
        if items is not None:
            refs = []
            for i, item in enumerate(items, 1):
                ref = env_reference(item)
                name = ref or (f"{secret_name(dest)}_{i}" if len(items) > 1 else secret_name(dest))
                refs.append(EnvRef(name))
                add_secret(name, None if ref else _flag_text(item))
            out_flags[dest] = refs
            plan.moved[dest] = [r.name for r in refs]
            plan.notes.append(f"{opt} holds credentials: its values moved to {', '.join(plan.moved[dest])}, "
                              "which the export references")
            continue
        ref = env_reference(value)
        name = ref or secret_name(dest)
        out_flags[dest] = EnvRef(name)
        add_secret(name, None if ref else _flag_text(value))
        plan.moved[dest] = [name]
        what = "its JSON holds credentials" if isinstance(value, (dict, list)) or str(value).lstrip()[:1] in "{[" else "it holds a credential"
        plan.notes.append(f"{opt}: {what}; its whole value moved to the environment variable {name}, which the export references")
    for k, v in env.items():
        if k in plan.dropped.values() and is_secret(k, v):
            # `--api-key X` with VLLM_API_KEY=Y in the environment: vLLM takes the flag
            plan.notes.append(f"environment variable {k} is ignored by vLLM when the flag is given: the flag's value is kept")
            continue
        if is_secret(k, v):
            ref = env_reference(v)
            if ref:  # `export HF_TOKEN="$HF_TOKEN"`: the value is the caller's, never the text `$HF_TOKEN`
                add_secret(k, None)
                plan.notes.append(f"environment variable {k} is ${ref} in the launch: set {k} in the secrets file")
                continue
            add_secret(k, str(v))
            plan.notes.append(f"environment variable {k} holds a credential: its value moved to the secrets file")
        else:
            plan.env[k] = str(v)
    return plan
