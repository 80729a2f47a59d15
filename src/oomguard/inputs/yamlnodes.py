"""Typed, located access to a YAML node tree (PyYAML's composed nodes, which keep their marks).

Manifests are read from nodes, not from ``yaml.safe_load``'s plain values, for two
reasons: every value keeps its line, column and key path (a finding points at the
line of ``--max-model-len`` in a Deployment, and ``check --fix`` edits that span of
the text), and every wrong type is one ``InputError`` naming the file, the line
and the field (``spec.template.spec.containers[0].args: expected a list of
strings, found a mapping``) instead of an ``AttributeError`` deep in a reader.

The nodes come from ``oomguard.inputs.structured.compose_yaml_all`` (bounded:
size, depth, aliases, expanded nodes).
"""

from __future__ import annotations

import math
import re
from typing import Any

from oomguard.errors import InputError

__all__ = ["Nodes", "parse_docker_size", "parse_quantity"]

_MAX_BYTES = 2**53
_K8S_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
              "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_DOCKER_UNITS = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_QUANTITY = re.compile(r"([0-9]{1,18}(?:\.[0-9]{1,9})?|\.[0-9]{1,9})(?:[eE]([+-]?[0-9]{1,2}))?\s*(Ki|Mi|Gi|Ti|Pi|Ei|[kKMGTPE])?")
_DOCKER = re.compile(r"([0-9]{1,18}(?:\.[0-9]{1,9})?)\s*([bkmgt])?b?")


def _bytes(number: float, what: str, file: str | None, line: int | None) -> int:
    if not math.isfinite(number) or number < 0 or number > _MAX_BYTES:
        raise InputError(f"{what}: out of range (at most 8 PiB)", file=file, line=line)
    return int(number)


def parse_quantity(value: Any, *, file: str | None = None, line: int | None = None, what: str = "quantity") -> int:
    """A Kubernetes quantity (``16Gi``, ``500M``, ``1.5Gi``, ``1e9``, ``64``) in bytes."""
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise InputError(f"{what}: not a Kubernetes quantity: {value!r} (e.g. 16Gi)", file=file, line=line)
    text = str(value).strip()
    m = _QUANTITY.fullmatch(text)
    if not m:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise InputError(f"{what}: not a Kubernetes quantity: {shown!r} (e.g. 16Gi)", file=file, line=line)
    from oomguard.numbers import parse_float

    number = parse_float(m.group(1)) * (10 ** int(m.group(2)) if m.group(2) else 1)
    return _bytes(number * _K8S_UNITS.get(m.group(3) or "", 1), what, file, line)


def parse_docker_size(value: Any, *, file: str | None = None, line: int | None = None, what: str = "size") -> int:
    """A Docker size (``16g``, ``16gb``, ``512m``, ``1073741824``) in bytes."""
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise InputError(f"{what}: not a Docker size: {value!r} (e.g. 16g)", file=file, line=line)
    text = str(value).strip().lower()
    m = _DOCKER.fullmatch(text)
    if not m:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise InputError(f"{what}: not a Docker size: {shown!r} (e.g. 16g)", file=file, line=line)
    from oomguard.numbers import parse_float

    return _bytes(parse_float(m.group(1)) * _DOCKER_UNITS.get(m.group(2) or "b", 1), what, file, line)


def _kind(node: Any) -> str:
    import yaml

    if node is None:
        return "nothing"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag.endswith(":null"):
        return "nothing"
    if node.tag.endswith(":bool"):
        return "true/false"
    if node.tag.endswith((":int", ":float")):
        return "a number"
    return "a string"


class Nodes:
    """Reading values out of one file's node tree, with the file's name for errors."""

    def __init__(self, file: str | None):
        import yaml

        from oomguard.inputs.structured import _constructor_class

        self.file = file
        self._yaml = yaml
        # the bounded loader's constructor: numbers read safely (digit cap, NaN/inf refused)
        self._constructor = _constructor_class()("")

    def close(self) -> None:
        self._constructor.dispose()

    # ----------------------------------------------------------- structure
    @staticmethod
    def line(node: Any) -> int | None:
        return node.start_mark.line + 1 if node is not None and getattr(node, "start_mark", None) else None

    @staticmethod
    def column(node: Any) -> int | None:
        return node.start_mark.column + 1 if node is not None and getattr(node, "start_mark", None) else None

    def error(self, node: Any, where: str, problem: str) -> InputError:
        return InputError(f"{where}: {problem}" if where else problem, file=self.file, line=self.line(node))

    def is_map(self, node: Any) -> bool:
        return isinstance(node, self._yaml.MappingNode)

    def is_seq(self, node: Any) -> bool:
        return isinstance(node, self._yaml.SequenceNode)

    def is_scalar(self, node: Any) -> bool:
        return isinstance(node, self._yaml.ScalarNode)

    def is_null(self, node: Any) -> bool:
        return node is None or (self.is_scalar(node) and node.tag.endswith(":null"))

    def pairs(self, node: Any, where: str) -> list[tuple[str, Any, Any]]:
        """(key, key node, value node) of a mapping; keys must be scalars."""
        if not self.is_map(node):
            raise self.error(node, where, f"expected a mapping, found {_kind(node)}")
        out = []
        for k, v in node.value:
            if not self.is_scalar(k):
                raise self.error(k, where, "a key is not a plain value")
            if k.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *base" merge keys: their targets are not followed
            out.append((k.value, k, v))
        return out

    def get(self, node: Any, key: str, where: str = "") -> Any:
        """The value node of ``key`` in a mapping (None when absent or when ``node`` is null)."""
        if self.is_null(node):
            return None
        hit = None
        for k, _kn, v in self.pairs(node, where):
            if k == key:
                hit = v
        return hit

    def key_node(self, node: Any, key: str) -> Any:
        if not self.is_map(node):
            return None
        hit = None
        for k, v in node.value:
            if self.is_scalar(k) and k.value == key:
                hit = k
        return hit

    def path(self, node: Any, keys: tuple, where: str = "") -> Any:
        """The node at ``keys`` below ``node`` (None when a step is absent); a non-mapping step is an error."""
        for i, key in enumerate(keys):
            if self.is_null(node):
                return None
            node = self.get(node, key, ".".join((where,) + keys[:i]).strip("."))
        return None if self.is_null(node) else node

    def seq(self, node: Any, where: str) -> list:
        if self.is_null(node):
            return []
        if not self.is_seq(node):
            raise self.error(node, where, f"expected a list, found {_kind(node)}")
        return list(node.value)

    # ----------------------------------------------------------- scalars
    def value(self, node: Any, where: str) -> Any:
        """The Python value of a scalar node (str, int, float, bool, None, date)."""
        if node is None:
            return None
        if not self.is_scalar(node):
            raise self.error(node, where, f"expected a single value, found {_kind(node)}")
        try:
            return self._constructor.construct_object(node, deep=True)
        except (self._yaml.YAMLError, ValueError, TypeError, OverflowError, ArithmeticError):
            raise self.error(node, where, f"{node.value[:40]!r} cannot be read as its tag "
                                          f"{node.tag.rsplit(':', 1)[-1]} says") from None

    def text(self, node: Any, where: str, *, allow_numbers: bool = True) -> str | None:
        """A scalar as the text it was written as (``4`` and ``true`` too); None when null."""
        if self.is_null(node):
            return None
        if not self.is_scalar(node):
            raise self.error(node, where, f"expected a string, found {_kind(node)}")
        if node.tag.endswith(":binary"):
            raise self.error(node, where, "expected a string, found binary data")
        if not allow_numbers and not node.tag.endswith(":str"):
            raise self.error(node, where, f"expected a string, found {_kind(node)}")
        self.value(node, where)  # an explicit tag its text does not fit is refused here too
        return node.value

    def strings(self, node: Any, where: str) -> list[Any]:
        """The items of a list of strings (the nodes; numbers are accepted as their text)."""
        items = self.seq(node, where)
        for i, item in enumerate(items):
            if self.is_null(item):
                raise self.error(item, f"{where}[{i}]", "an empty item")
            self.text(item, f"{where}[{i}]")
        return items

    def integer(self, node: Any, where: str, *, minimum: int = 0, maximum: int = 1 << 20) -> int | None:
        """A count (GPUs, replicas): an integer written as a number or a string of digits (``"4"``, as
        Kubernetes quantities and Helm templates write them), through ``oomguard.numbers``."""
        from oomguard.numbers import NumberError, as_int, parse_int

        if self.is_null(node):
            return None
        v = self.value(node, where)
        try:
            return parse_int(v.strip(), lo=minimum, hi=maximum) if isinstance(v, str) else as_int(v, lo=minimum, hi=maximum)
        except NumberError as exc:
            raise self.error(node, where, f"expected a whole number from {minimum} to {maximum}: {exc}") from None

    def boolean(self, node: Any, where: str) -> bool | None:
        if self.is_null(node):
            return None
        v = self.value(node, where)
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
            return v.strip().lower() in ("true", "yes", "1")
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        raise self.error(node, where, f"expected true/false, found {_kind(node)}")

    def quantity(self, node: Any, where: str) -> int | None:
        if self.is_null(node):
            return None
        return parse_quantity(self.value(node, where), file=self.file, line=self.line(node), what=where)

    def docker_size(self, node: Any, where: str) -> int | None:
        if self.is_null(node):
            return None
        return parse_docker_size(self.value(node, where), file=self.file, line=self.line(node), what=where)
