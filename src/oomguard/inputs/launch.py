"""The one model of a vLLM launch, whatever it was written as.

A script, a command, a ``--config`` YAML, bare flags, a Kubernetes object, a
compose service or a production-stack modelSpec all become one ``Launch``
(``oomguard.inputs.reader`` reads them; ``oomguard.inputs.command`` parses the
vLLM words; ``oomguard.inputs.manifests`` finds them in manifests). It holds:

- ``model``, ``flags`` (keyed by vLLM's own ``dest`` names, typed as vLLM's
  argparse types them) and ``env`` (the variables that change vLLM's memory or
  GPU behaviour);
- the **source of every value**: ``sites[dest]`` / ``env_sites[name]`` /
  ``model_site`` say the file, line, column and, in YAML, the key path
  (``spec.template.spec.containers[1].args[3]``); ``source_of(dest)`` also
  answers for a flag that is not set (vLLM's default in the chosen release);
- the vLLM release: ``version`` with ``version_source`` (the user's
  ``--vllm-version``, the container image tag, or the newest table);
- what the deployment gives the server (``deployment``: GPUs, memory limit,
  ``/dev/shm``), for manifests;
- what ``check`` needs beyond that (filled by the same reader in either mode):
  every flag as written (``occurrences``), every flag vLLM would reject
  (``problems``: raised at once unless ``lenient``), values built from unset
  variables (``unresolved``), the vLLM command's words (``command``) and the
  ``# oomguard: ignore`` directives.

Nothing is executed; nothing here reads files.
"""

from __future__ import annotations

import enum

from oomguard.inputs.shell import Command, Word
from oomguard.records import NamedTuple, field, record

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "FlagProblem",
    "FlagSite",
    "Launch",
    "Occurrence",
    "ProblemKind",
    "Source",
    "Unresolved",
]


class Source(NamedTuple):
    """Where one value of a launch came from.

    ``origin`` is one of ``script``, ``command`` (after ``--``), ``flags`` (given to
    oomguard directly), ``config`` (a ``--config`` YAML), ``kubernetes``, ``compose``,
    ``helm``, ``image-tag``, ``option`` (an oomguard option such as
    ``--vllm-version``) or ``default``; ``detail`` says more where the position
    alone does not (the image, the release whose default applies).
    """

    origin: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    yaml_path: str | None = None  # YAML path of the value
    detail: str = ""

    def text(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + (f":{self.column}" if self.line and self.column else "")
        parts = [p for p in (where, self.yaml_path and f"({self.yaml_path})", self.detail) if p]
        return " ".join(parts) if parts else self.origin

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"origin": self.origin}
        for k in ("file", "line", "column", "yaml_path", "detail"):
            v = getattr(self, k)
            if v not in (None, ""):
                d[k] = v
        return d


@record
class FlagSite:
    """Where one flag (or the model, or an env variable) was written."""

    option: str  # as the user wrote it, e.g. "--kv-cache-memory", or the YAML key
    file: str | None
    line: int | None
    option_word: Word | None = None
    value_word: Word | None = None
    yaml_key: str | None = None  # the key in a --config YAML / Helm vllmConfig
    column: int | None = None
    yaml_path: str | None = None  # YAML path of the value in a manifest
    origin: str = ""

    def source(self) -> Source:
        return Source(self.origin or "command", self.file, self.line, self.column, self.yaml_path)


class ProblemKind(str, enum.Enum):
    UNKNOWN = "unknown-flag"  # not a flag of this release (may be removed / renamed / not yet added)
    AMBIGUOUS = "ambiguous-flag"  # an abbreviation matching several flags
    INVALID_VALUE = "invalid-value"  # wrong type, not a choice, negative
    MISSING_VALUE = "missing-value"  # a flag that takes a value, at the end of the command
    YAML_KEY = "yaml-key"  # a --config YAML key that is not a flag
    UNEXPECTED = "unexpected-argument"  # a stray positional word


@record
class FlagProblem:
    """A flag vLLM would reject: raised by a strict read, recorded by a lenient one."""

    kind: ProblemKind
    option: str  # as written ("--swap-space", YAML key "swap_space")
    message: str
    file: str | None
    line: int | None
    suggestion: str | None = None  # the right spelling in this release, when there is one
    option_word: Word | None = None
    value_word: Word | None = None
    yaml_key: str | None = None
    dest: str | None = None  # for invalid values of known flags
    other_versions: tuple[str, ...] = ()
    detail: str = ""
    value_text: str | None = None  # the value that went with an unknown flag, when one did


@record
class Occurrence:
    """One flag as written in the launch (a flag given twice has two)."""

    dest: str
    written: str  # the option word as written, before "=" ("--kv-cache-memory", "max_model_len")
    canonical: str  # the release's own spelling ("--kv-cache-memory-bytes")
    site: FlagSite
    negated: bool = False
    deprecated: bool = False
    value_text: str | None = None
    via_prefix: bool = False  # resolved as an argparse abbreviation
    json_quote: str = ""  # quoting of a JSON value word in a script ("'", '"', "")


class EnvFrom(NamedTuple):
    """A variable a Kubernetes manifest sets from elsewhere (``valueFrom``: a Secret's or ConfigMap's key, a
    pod field): it is set, with a value oomguard cannot know. Nothing plans with a value for it; exports
    write the reference back as it was (``spec``, the ``valueFrom`` mapping as plain data)."""

    source: str  # "Secret hf key token", "ConfigMap vllm key allow-long", "the pod field status.podIP"
    spec: Any
    line: int | None = None


@record
class Unresolved:
    """A flag (or its value) built from variables the launch does not set."""

    option: str
    variables: tuple[str, ...]
    file: str | None
    line: int | None
    dest: str | None


@record
class Launch:
    """One vLLM launch as read from a script, a --config YAML, a unit or a manifest, with the source of every value."""
    kind: str  # "script" | "yaml" | "command" | "flags" | "manifest"
    path: str | None
    model: str | None
    flags: dict[str, Any] = field(default_factory=dict)  # dest -> typed value
    sites: dict[str, FlagSite] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    env_sites: dict[str, FlagSite] = field(default_factory=dict)
    # Credentials the launch sets outside ``env``'s names (HF_TOKEN, *_API_KEY: ``redact.is_secret``;
    # ``inputs.command.keep_env``): nothing plans with them and nothing prints them; exports carry
    # them to the server through the env file / Kubernetes Secret.
    secret_env: dict[str, str] = field(default_factory=dict)
    # Variables set from a Secret / ConfigMap / pod field (Kubernetes ``valueFrom``): set, value unknown.
    env_from: dict[str, EnvFrom] = field(default_factory=dict)
    program: str = "vllm serve"
    version: str | None = None  # the release the flags were read with (None: the newest table)
    version_source: Source | None = None
    image: str | None = None  # the container image, when the launch names one
    text: str | None = None  # original script / YAML text (for rewriting)
    notes: list[str] = field(default_factory=list)
    model_site: FlagSite | None = None
    command_line: int | None = None
    lenient: bool = False  # problems are recorded instead of raised
    deployment: dict | None = None  # a manifest's GPUs, memory limit and /dev/shm (oomguard.inputs.manifests)
    name: str | None = None  # which launch of a file holding several ("Deployment qwen/vllm", "modelSpec llama3")
    # what check reads beyond the flags (the same reader fills them in either mode)
    problems: list[FlagProblem] = field(default_factory=list)
    occurrences: list[Occurrence] = field(default_factory=list)
    unresolved: list[Unresolved] = field(default_factory=list)
    command: Command | None = None  # the vLLM command's words
    flag_start: int = 0  # index in command.words of the first flag word
    ignore_file: set = field(default_factory=set)  # rule ids silenced for the whole file
    ignore_lines: dict = field(default_factory=dict)  # line -> rule ids
    yaml_lines: dict = field(default_factory=dict)  # --config YAML key -> line
    carrier: Any = None  # how check --fix writes this launch back (oomguard.inputs.manifests / check.fixer)

    # ------------------------------------------------------------------ values
    def manifest_gpus(self) -> int | None:
        """The GPUs a manifest gives the server (``nvidia.com/gpu``, compose ``gpus:`` / device
        reservations), None when it does not say: the count every command plans with unless
        --num-gpus is given (a Deployment with one GPU and TP 2 does not start)."""
        n = (self.deployment or {}).get("gpus")
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    def get(self, dest: str, default: Any = None) -> Any:
        return self.flags.get(dest, default)

    def is_set(self, dest: str) -> bool:
        return dest in self.flags

    def location(self, dest: str) -> tuple[str | None, int | None]:
        site = self.sites.get(dest)
        return (site.file, site.line) if site else (self.path, self.command_line)

    def argv(self) -> list[str]:
        """The launch as ``vllm serve`` arguments (for printing and export)."""
        from oomguard.inputs.render import flags_to_argv

        return flags_to_argv(self.model, self.flags, version=self.version)

    # ------------------------------------------------------------------ sources
    def source_of(self, dest: str) -> Source:
        """Where the value of ``dest`` comes from: its site, or the release's default."""
        site = self.sites.get(dest)
        if site is not None:
            return site.source()
        release = self.version or "the newest table"
        return Source("default", detail=f"not set: vLLM {release}'s default")

    @property
    def unknown(self) -> list[tuple[str, str | None, str | None, int | None]]:
        """(option, value text, file, line) of every flag this release does not know."""
        kinds = (ProblemKind.UNKNOWN, ProblemKind.AMBIGUOUS, ProblemKind.YAML_KEY)
        out = []
        for p in self.problems:
            if p.kind in kinds:
                option = p.option if p.kind is not ProblemKind.YAML_KEY else "--" + p.option.replace("_", "-")
                value = p.value_text if p.value_text is not None else (p.value_word.text if p.value_word else None)
                out.append((option, value, p.file, p.line))
        return out

    def report_notes(self) -> list[str]:
        """Notes for commands that do not lint (plan, fit, host, export): the reader's notes, and
        in lenient mode each flag it set aside and each value left to its default."""
        out = list(self.notes)
        for p in self.problems:
            where = f"{p.file or 'command'}:{p.line}: " if p.line else (f"{p.file}: " if p.file else "")
            out.append(f"{where}{p.message}; not applied")
        for u in self.unresolved:
            names = ", ".join(v if v.startswith("$") else "$" + v for v in u.variables)
            where = f"{u.file or 'command'}:{u.line}: " if u.line else ""
            sources = self.set_elsewhere(u)
            if sources:
                out.append(f"{where}{u.option} takes its value from {names}, set from {'; '.join(sources)} (a value not "
                           "known here: vLLM's default is assumed for planning)")
            else:
                out.append(f"{where}{u.option} uses {names}, which the launch does not set: vLLM's default is assumed")
        return out

    def set_elsewhere(self, u: Unresolved) -> list[str]:
        """Where an unresolved value's variables come from when every one is set by a manifest's ``valueFrom``
        (``$(NAME)`` the kubelet expands): a value that exists but is not known here; else []."""
        names = [v[2:-1] if v.startswith("$(") and v.endswith(")") else v.lstrip("$").strip("{}") for v in u.variables]
        if not names or any(n not in self.env_from for n in names):
            return []
        return [self.env_from[n].source for n in names]

    def to_dict(self) -> dict:
        """The launch as data, with the source of every value (secret values masked)."""
        from oomguard.redact import MASK, is_secret_name

        def value(name: str, v: Any) -> Any:
            if is_secret_name(name):
                return MASK
            if isinstance(v, (dict, list)):
                from oomguard.redact import redact_data

                return redact_data(v)
            return v

        return {
            "kind": self.kind,
            "path": self.path,
            "name": self.name,
            "program": self.program,
            "image": self.image,
            "model": {"value": self.model, "source": (self.model_site.source() if self.model_site else Source("default")).to_dict()},
            "vllm_version": {"value": self.version, "source": (self.version_source or Source("default", detail="the newest table")).to_dict()},
            "flags": {d: {"value": value(d, v), "source": self.source_of(d).to_dict()} for d, v in self.flags.items()},
            "env": {k: {"value": value(k, v), "source": (self.env_sites[k].source() if k in self.env_sites else Source(self.kind)).to_dict()}
                    for k, v in self.env.items()},
            "deployment": {k: v for k, v in (self.deployment or {}).items() if k != "line"} or None,
            "notes": list(self.notes),
        }
