"""Bounded JSON and YAML parsing: depth, aliases, size and node count are capped.

A user's ``--config`` YAML or ``config.json`` is a few KiB and a few levels
deep. Anything far past that is refused with one line naming the file (and the
line, for YAML) instead of exhausting memory, recursion or time:

- JSON: nesting deeper than ``MAX_DEPTH`` is refused (Python's decoder would
  raise ``RecursionError`` somewhat later, and our own walkers earlier).
- YAML: one parse with PyYAML's safe loader (libyaml when installed; it is
  ~6x faster), a cap on depth, on the number of aliases and on the number of
  nodes after alias expansion ("billion laughs": 1 KiB that expands to
  gigabytes), and a cap on text size (pure-Python YAML parses ~100 KiB/s on a
  busy 2-core machine, so the size cap is the time bound).
"""

from __future__ import annotations

import json

from oomguard.errors import InputError

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 64
MAX_YAML_BYTES = 1 << 20  # 1 MiB: a vLLM --config YAML with every flag set is ~10 KiB
MAX_YAML_BYTES_PURE = 256 << 10  # without libyaml, parsing is ~6x slower
MAX_YAML_ALIASES = 256
MAX_YAML_NODES = 200_000  # after alias expansion; every flag of vLLM is ~400 nodes


def _walk_depth(value: Any, limit: int) -> int:
    """The nesting depth of a parsed JSON/YAML value, iteratively; stops past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen: set[int] = set()
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if id(v) in seen:  # YAML aliases share objects
                continue
            seen.add(id(v))
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            children = v.values() if isinstance(v, dict) else v
            stack.extend((c, d + 1) for c in children)
    return deepest


def load_json(text: str | bytes, *, file: str | None = None, what: str = "JSON", max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` with one-line errors and a depth limit."""
    from oomguard.numbers import NumberError, json_int

    try:
        # Integers are digit-capped here; non-finite floats pass, for the caller to refuse naming
        # the field (model_config.validate_config), or ``numbers.nonfinite_at``.
        data = json.loads(text, parse_int=json_int)
    except NumberError as exc:
        # The decoder gives no position for a hook's error: the first occurrence of the literal.
        raise InputError(f"malformed {what}: the number {exc}", file=file,
                         line=_line_of(text, exc.text.rstrip("."))) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed {what}: {exc.msg} (column {exc.colno})", file=file, line=exc.lineno) from None
    except RecursionError:
        raise InputError(f"{what} nested too deeply (more than {max_depth} levels)", file=file) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"malformed {what}: {exc.__class__.__name__}", file=file) from None
    if _walk_depth(data, max_depth) > max_depth:
        raise InputError(f"{what} nested too deeply (more than {max_depth} levels)", file=file)
    return data


def _line_of(text: str | bytes, needle: str) -> int | None:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    at = text.find(needle) if needle else -1
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def _loader_base():
    import yaml

    return getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


def yaml_size_limit() -> int:
    import yaml

    return MAX_YAML_BYTES if getattr(yaml, "CSafeLoader", None) else MAX_YAML_BYTES_PURE


def _problem(exc: Exception) -> str:
    """A YAML error as one line (a reader error has ``reason``, not ``problem``, and its text spans lines)."""
    text = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
    return " ".join(str(text).split())


def _reader_line(exc: Exception, text: str) -> int | None:
    """The line of a reader error (a control character), which carries a character position, not a mark."""
    pos = getattr(exc, "position", None)
    return text.count("\n", 0, pos) + 1 if isinstance(pos, int) and 0 <= pos <= len(text) else None


def _line(mark: Any) -> int | None:
    return (mark.line + 1) if mark is not None else None


def _check_events(text: str, file: str | None) -> None:
    """One pass over the parse events: depth and alias count, before anything is built."""
    import yaml

    loader = _loader_base()(text)
    depth = aliases = 0
    try:
        while True:
            event = loader.get_event()
            if event is None:
                break
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(f"YAML nested too deeply (more than {MAX_DEPTH} levels)", file=file,
                                     line=_line(event.start_mark))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_YAML_ALIASES:
                    raise InputError(f"YAML uses more than {MAX_YAML_ALIASES} aliases (*name); "
                                     "a vLLM config needs none", file=file, line=_line(event.start_mark))
            elif isinstance(event, yaml.StreamEndEvent):
                break
    finally:
        loader.dispose()


def _expanded_nodes(node: Any, file: str | None) -> int:
    """Nodes after alias expansion, memoised per node (aliases are shared node objects).

    An alias inside its own anchor (``&a [*a]``) makes the tree a cycle: PyYAML composes it, and
    it would expand forever. It is refused here, naming the line."""
    import yaml

    sizes: dict[int, int] = {}
    open_: set[int] = set()  # collections whose children are being counted (the path from the root)
    stack: list[tuple[Any, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        if id(n) in sizes:
            continue
        if isinstance(n, yaml.ScalarNode):
            sizes[id(n)] = 1
            continue
        kids = [c for pair in n.value for c in pair] if isinstance(n, yaml.MappingNode) else list(n.value)
        if done:
            open_.discard(id(n))
            total = 1 + sum(sizes.get(id(c), 0) for c in kids)
            if total > MAX_YAML_NODES:
                raise InputError(f"YAML expands to more than {MAX_YAML_NODES:,} values through its aliases",
                                 file=file, line=_line(n.start_mark))
            sizes[id(n)] = total
            continue
        if id(n) in open_:
            raise InputError("YAML refers to itself through an alias (an anchor that contains its own alias)",
                             file=file, line=_line(n.start_mark))
        open_.add(id(n))
        stack.append((n, True))
        for c in kids:
            if id(c) in open_:
                raise InputError("YAML refers to itself through an alias (an anchor that contains its own alias)",
                                 file=file, line=_line(c.start_mark))
            if id(c) not in sizes:
                stack.append((c, False))
    return sizes.get(id(node), 0)


_CONSTRUCTOR = None


def _constructor_class():
    """PyYAML's safe constructor with numbers read safely: an integer scalar longer than
    ``numbers.MAX_CHARS`` would reach ``int()`` (ValueError past 4,300 digits; YAML 1.1's
    base-60 ``1:2:3`` builds huge ints from short parts), and ``.nan`` / ``.inf`` / ``1.0e999``
    would become non-finite floats. Both are refused with the scalar's line."""
    global _CONSTRUCTOR
    if _CONSTRUCTOR is not None:
        return _CONSTRUCTOR
    import math

    import yaml

    from oomguard.numbers import MAX_CHARS

    def _refuse(node, why):
        shown = node.value if len(node.value) <= 24 else node.value[:20] + "..."
        raise yaml.constructor.ConstructorError(None, None, f"the number {shown!r} {why}", node.start_mark)

    class SafeNumbersLoader(yaml.SafeLoader):
        def construct_yaml_int(self, node):
            if len(node.value) > MAX_CHARS:
                _refuse(node, f"has too many digits (more than {MAX_CHARS})")
            return super().construct_yaml_int(node)

        def construct_yaml_float(self, node):
            if len(node.value) > MAX_CHARS:
                _refuse(node, f"has too many digits (more than {MAX_CHARS})")
            value = super().construct_yaml_float(node)
            if not math.isfinite(value):
                _refuse(node, "is not a finite number")
            return value

    SafeNumbersLoader.add_constructor("tag:yaml.org,2002:int", SafeNumbersLoader.construct_yaml_int)
    SafeNumbersLoader.add_constructor("tag:yaml.org,2002:float", SafeNumbersLoader.construct_yaml_float)
    _CONSTRUCTOR = SafeNumbersLoader
    return _CONSTRUCTOR


def compose_yaml(text: str, *, file: str | None = None) -> Any:
    """The YAML node tree (with marks) of ``text``, bounded; None for an empty document."""
    nodes = _compose_nodes(text, file, "a vLLM --config YAML", single=True)
    return nodes[0] if nodes else None


def construct_yaml(node: Any, *, file: str | None = None) -> Any:
    """Python values of a node tree from ``compose_yaml`` (safe types only)."""
    import yaml

    if node is None:
        return None
    constructor = _constructor_class()("")  # a constructor; its parser is never used
    try:
        return constructor.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"invalid YAML: {_problem(exc)}", file=file, line=_line(mark)) from None
    except (ValueError, TypeError, OverflowError, ArithmeticError):
        # an explicit tag the value does not fit: !!int abc, !!timestamp 2020-13-45, !!float of 5000 digits
        bad = _bad_tagged_scalar(node)
        shown = f"{bad.tag.rsplit(':', 1)[-1]} {bad.value[:40]!r}" if bad is not None else "a value"
        raise InputError(f"invalid YAML value: {shown} cannot be read as its tag says",
                         file=file, line=_line(bad.start_mark) if bad is not None else None) from None
    except RecursionError:
        raise InputError(f"YAML nested too deeply (more than {MAX_DEPTH} levels)", file=file) from None
    finally:
        constructor.dispose()


def _bad_tagged_scalar(node: Any) -> Any:
    """The first scalar whose explicit tag its value does not fit (for the error's line)."""
    import yaml

    constructor = _constructor_class()("")
    try:
        stack, seen = [node], set()
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if isinstance(n, yaml.ScalarNode):
                try:
                    constructor.construct_object(n, deep=True)
                except Exception:  # noqa: BLE001 - any failure marks the culprit
                    return n
            elif isinstance(n, yaml.MappingNode):
                stack.extend(c for pair in reversed(n.value) for c in reversed(pair))
            elif isinstance(n, yaml.SequenceNode):
                stack.extend(reversed(n.value))
    finally:
        constructor.dispose()
    return None


def compose_yaml_all(text: str, *, file: str | None = None) -> list[Any]:
    """The node trees (with marks) of every document of ``text`` (``---``-separated), bounded like
    ``compose_yaml``: one size cap, one event pass, and the alias expansion of all documents together."""
    return _compose_nodes(text, file, "a manifest", single=False)


def _compose_nodes(text: str, file: str | None, what: str, *, single: bool) -> list[Any]:
    """The bounded composition both entry points share: the size cap (``what`` is a few KiB), the event
    pass, one document (``single``: PyYAML's error for a second) or every one, the alias expansion."""
    import yaml

    limit = yaml_size_limit()
    if len(text) > limit:
        raise InputError(f"YAML larger than {limit >> 10} KiB, the most oomguard parses "
                         f"({what} is a few KiB)", file=file)
    try:
        _check_events(text, file)
        loader = _loader_base()(text)
        nodes = []
        try:
            if single:
                nodes = [loader.get_single_node()]
            else:
                while loader.check_node():
                    nodes.append(loader.get_node())
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"invalid YAML: {_problem(exc)}", file=file, line=_line(mark) or _reader_line(exc, text)) from None
    except RecursionError:
        raise InputError(f"YAML nested too deeply (more than {MAX_DEPTH} levels)", file=file) from None
    nodes = [n for n in nodes if n is not None]
    total = 0
    for node in nodes:
        total += _expanded_nodes(node, file)
        if total > MAX_YAML_NODES:
            raise InputError(f"YAML expands to more than {MAX_YAML_NODES:,} values through its aliases",
                             file=file, line=_line(node.start_mark))
    return nodes


def load_yaml(text: str, *, file: str | None = None) -> Any:
    """``yaml.safe_load`` with the bounds above."""
    return construct_yaml(compose_yaml(text, file=file), file=file)


def load_yaml_with_node(text: str, *, file: str | None = None) -> tuple[Any, Any]:
    """(values, node tree) from one parse: callers that need line numbers use the nodes."""
    node = compose_yaml(text, file=file)
    return construct_yaml(node, file=file), node
