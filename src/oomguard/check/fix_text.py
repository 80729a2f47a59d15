"""The text side of ``check --fix``: flag values rendered as the launch writes them, span edits,
and the fixers of a shell script and a ``--config`` YAML.

A shell script keeps its shebang, comments, variables and line continuations:
values are rewritten in place, removed flags take their line (and the dangling
``\\`` before it) with them, new flags are appended to the vLLM command in the
same continuation style (inside a quoted ``sh -c`` string, escaped for its quote).
A ``--config`` YAML keeps its comments and key style. Manifests have their own
fixer (``oomguard.check.manifest_fix``) built on the same span edits.
"""

from __future__ import annotations

import json
import re
import shlex

from oomguard.check.finding import Edit
from oomguard.inputs.launch import Launch
from oomguard.records import record

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

# --------------------------------------------------------------------- rendering


def render_value_shell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return shlex.quote(json.dumps(value, separators=(",", ":")))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value).rstrip("0").rstrip(".") if "e" not in repr(value) else repr(value)
    return shlex.quote(str(value))


def render_value_yaml(value: Any) -> str:
    if isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(",", ":"))
        return "'" + text.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return render_value_shell(value)
    import yaml

    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def flag_meta(release, option: str):
    try:
        return release.resolve_option(option).flag
    except Exception:
        return None


def render_flag(release, option: str, value: Any, *, equals: bool = False) -> str | None:
    """``--opt value`` as shell words; None when the edit means "absent"."""
    meta = flag_meta(release, option)
    if meta is not None and not meta.takes_value:
        if value is True:
            return option if option in meta.all_options and option not in meta.negatives else meta.name
        if value is False:
            if meta.default is False or meta.default is None:
                return None
            return meta.negatives[0] if meta.negatives else None
        return f"{meta.name}={render_value_shell(value)}"
    if meta is not None and meta.nargs == "?" and value is True:
        return option  # "--enable-chunked-prefill" (nargs="?" with a true const)
    if isinstance(value, list) and meta is not None and meta.nargs in ("+", "*"):
        return option + " " + " ".join(render_value_shell(v) for v in value)
    sep = "=" if equals else " "
    return f"{option}{sep}{render_value_shell(value)}"


# --------------------------------------------------------------------- text edits


@record
class _Span:
    start: int
    end: int
    text: str


class TextEdits:
    """Non-overlapping replacements and zero-width inserts, applied in one pass.

    Both the overlap test and ``apply`` are O(log n) / O(n): a script repeating a flag 100,000
    times gets 100,000 removals, and the quadratic versions took minutes.
    """

    def __init__(self, text: str):
        self.text = text
        self.spans: list[_Span] = []
        self._index: list[tuple[int, int]] = []  # (start, end) of every span, sorted

    def overlaps(self, start: int, end: int) -> bool:
        import bisect

        i = bisect.bisect_left(self._index, (end, -1))  # spans starting before ``end``
        while i > 0:
            i -= 1
            s_start, s_end = self._index[i]
            if not (end <= s_start or start >= s_end):
                return True
            if s_start <= start and s_end > s_start:
                return False  # replacements are disjoint: nothing earlier reaches past this one
        return False

    def _add(self, span: _Span) -> None:
        import bisect

        self.spans.append(span)
        bisect.insort(self._index, (span.start, span.end))

    def replace(self, start: int, end: int, new: str) -> bool:
        if self.overlaps(start, end):
            return False
        self._add(_Span(start, end, new))
        return True

    def insert(self, at: int, new: str) -> None:
        self._add(_Span(at, at, new))

    def apply(self) -> str:
        # Same order as applying back to front: spans at one position come out in reverse order of addition.
        order = sorted(range(len(self.spans)), key=lambda k: (self.spans[k].start, self.spans[k].end, -k))
        out: list[str] = []
        pos = 0
        for k in order:
            sp = self.spans[k]
            out.append(self.text[pos:sp.start])
            out.append(sp.text)
            pos = max(pos, sp.end)
        out.append(self.text[pos:])
        return "".join(out)


# --------------------------------------------------------------------- scripts


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, (len(text) if end < 0 else end)


def _remove_words(te: TextEdits, start: int, end: int) -> None:
    """Delete a flag's words with the blank they leave; empty lines are cleaned up later."""
    text = te.text
    ls, le = _line_bounds(text, start)
    if not text[ls:start].strip():
        t = end
        while t < len(text) and text[t] in " \t":
            t += 1
        te.replace(start, t, "")
        return
    ws = start
    while ws > ls and text[ws - 1] in " \t":
        ws -= 1
    te.replace(ws, end, "")


def _open_quote(line: str, quote: str | None) -> str | None:
    """The shell quote still open at the end of ``line`` (None when none), given the one open at its start."""
    i = 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif c == "\\":
            i += 1
        elif c in ("'", '"'):
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            break  # a comment: quotes after it do not count
        i += 1
    return quote


def _tidy_command(region: str) -> str:
    """Drop lines a removal emptied and restore the ``\\`` continuations of a multi-line command.

    A line that ends inside a quoted value (a JSON flag written over several lines) is kept
    as written: a ``\\`` there would become part of the value."""
    lines = region.split("\n")
    quote = None
    kept = []
    inside = []  # whether each kept line ends inside quotes
    for i, ln in enumerate(lines):
        start_quote = quote
        quote = _open_quote(ln, quote)
        if i and start_quote is None and ln.strip() in ("", "\\"):
            continue
        kept.append(ln)
        inside.append(quote is not None)
    out = []
    for i, ln in enumerate(kept):
        if inside[i]:
            out.append(ln)
            continue
        body = re.sub(r"[ \t]*\\$", "", ln.rstrip())
        out.append(body + " \\" if i < len(kept) - 1 else body)
    return "\n".join(out)


def _command_end(launch: Launch) -> tuple[int, int, str]:
    """(offset after the last argument, its line start, that line's indentation) of the vLLM command."""
    from oomguard.inputs.command import strip_redirections

    words = strip_redirections(launch.command.words)
    last = words[-1]
    text = launch.text or ""
    ls, _ = _line_bounds(text, last.start)
    indent = re.match(r"[ \t]*", text[ls:]).group(0)
    return last.end, ls, indent


class ScriptFixer:
    def __init__(self, launch: Launch, release, *, quote: str = ""):
        self.read = launch
        self.release = release
        self.text = launch.text or ""
        self.te = TextEdits(self.text)
        self.path = launch.path
        self.quote = quote  # the vLLM command sits inside a quoted `sh -c` string: new text is escaped for it
        self.notes: list[str] = []
        self.appended: list[str] = []
        self.env_lines: list[str] = []
        cmd = launch.command
        if cmd is not None and cmd.words:
            first = cmd.words[0].start
            last = max(w.end for w in cmd.words)
            self.region = (_line_bounds(self.text, first)[0], _line_bounds(self.text, last)[1])
        else:
            self.region = (0, len(self.text))

    # occurrences in this file
    def _occ(self, dest: str):
        return [o for o in self.read.occurrences if o.dest == dest and o.site.file == self.path and o.site.option_word is not None]

    def _written(self, option: str):
        # Indexed once per fixer: one edit per unknown flag made the per-edit scan quadratic.
        index = self.__dict__.get("_written_index")
        if index is None:
            index = {}
            for o in self.read.occurrences:
                if o.site.file == self.path and o.site.option_word is not None:
                    index.setdefault(o.written, []).append((o.site.option_word, o.site.value_word))
            for p in self.read.problems:
                if p.file == self.path and p.option_word is not None:
                    index.setdefault(p.option, []).append((p.option_word, p.value_word))
            self._written_index = index
        return list(index.get(option, ()))

    @staticmethod
    def _span(ow, vw) -> tuple[int, int]:
        end = vw.end if vw is not None and vw is not ow else ow.end
        return ow.start, end

    def _q(self, text: str) -> str:
        """New text for the inside of a quoted `sh -c` string, escaped for that quote."""
        if self.quote == "'":
            return text.replace("'", "'\\''")
        if self.quote == '"':
            return re.sub(r'(["\\$`])', r"\\\1", text)
        return text

    def remove(self, e: Edit) -> bool:
        targets = []
        if e.dest:
            targets = [(o.site.option_word, o.site.value_word) for o in self._occ(e.dest)]
        if not targets:
            targets = self._written(e.replaces or e.flag)
        for ow, vw in targets:
            s, t = self._span(ow, vw)
            _remove_words(self.te, s, t)
        return bool(targets)

    def set(self, e: Edit) -> bool:
        occ = self._occ(e.dest) if e.dest else []
        if occ:
            last = occ[-1]
            ow, vw = last.site.option_word, last.site.value_word
            equals = "=" in ow.text and vw is None
            rendered = render_flag(self.release, e.flag, e.value, equals=equals)
            if vw is not None and rendered is not None and self.read.flags.get(e.dest) == e.value and not isinstance(e.value, (dict, list)):
                rendered = f"{e.flag} {vw.raw}"  # a rename: keep the value as the author wrote it
            s, t = self._span(ow, vw)
            if rendered is None:
                _remove_words(self.te, s, t)
            else:
                self.te.replace(s, t, self._q(rendered))
            for o in occ[:-1]:
                s2, t2 = self._span(o.site.option_word, o.site.value_word)
                _remove_words(self.te, s2, t2)
            return True
        rendered = render_flag(self.release, e.flag, e.value)
        if e.replaces:
            spots = self._written(e.replaces)
            if spots:
                ow, vw = spots[-1]
                s, t = self._span(ow, vw)
                if rendered is None:
                    _remove_words(self.te, s, t)
                else:
                    self.te.replace(s, t, self._q(rendered))
                return True
        if rendered is None:
            return True  # absent already
        self.appended.append(self._q(rendered))
        return True

    def env(self, e: Edit) -> bool:
        text = self.text
        cmd_start = self.read.command.words[0].start if self.read.command and self.read.command.words else len(text)
        # an assignment before the program word: `export X=...`, `X=...`, or the `X=... vllm serve` prefix
        pattern = re.compile(rf"(^|\s|;)((?:export\s+)?{re.escape(e.flag)}=)(\"[^\"]*\"|'[^']*'|[^\s;]*)", re.M)
        found = None
        for m in pattern.finditer(text, 0, cmd_start):
            found = m
        if found is not None:
            if e.value is None:
                self.te.replace(found.start(2), found.end(3), "")
            else:
                self.te.replace(found.start(3), found.end(3), self._q(shlex.quote(str(e.value))))
            return True
        if e.value is None:
            return True
        self.env_lines.append(self._q(f"export {e.flag}={shlex.quote(str(e.value))}"))
        return True

    def finish(self) -> str:
        if self.appended and self.read.command is not None:
            end, ls, indent = _command_end(self.read)
            cmd_first = self.read.command.words[0].start
            multiline = "\n" in self.text[cmd_first:end]
            if multiline:
                ind = indent or "  "
                block = "".join(f" \\\n{ind}{a}" for a in self.appended)
            else:
                block = "".join(f" {a}" for a in self.appended)
            self.te.insert(end, block)
        r0, r1 = self.region
        inside = [sp for sp in self.te.spans if r0 <= sp.start and sp.end <= r1]
        inside_ids = {id(sp) for sp in inside}
        outside = [sp for sp in self.te.spans if id(sp) not in inside_ids]
        region = TextEdits(self.text[r0:r1])
        region.spans = [_Span(sp.start - r0, sp.end - r0, sp.text) for sp in inside]
        head = TextEdits(self.text[:r0])
        head.spans = [sp for sp in outside if sp.end <= r0]
        tail = TextEdits(self.text[r1:])
        tail.spans = [_Span(sp.start - r1, sp.end - r1, sp.text) for sp in outside if sp.start >= r1]
        new_region = region.apply()
        if new_region != self.text[r0:r1]:
            new_region = _tidy_command(new_region)
        env_block = ""
        if self.env_lines:
            indent = re.match(r"[ \t]*", self.text[r0:]).group(0)
            env_block = "".join(f"{indent}{x}\n" for x in self.env_lines)
        return head.apply() + env_block + new_region + tail.apply()


# --------------------------------------------------------------------- YAML


class YamlFixer:
    def __init__(self, launch: Launch, release):
        self.read = launch
        self.release = release
        self.text = launch.text or ""
        self.te = TextEdits(self.text)
        self.path = launch.path
        self.appended: list[str] = []
        self.env_lines: list[str] = []
        self.nodes: dict[str, tuple] = {}
        from oomguard.inputs.structured import compose_yaml

        node = compose_yaml(self.text, file=self.path)
        if node is not None and hasattr(node, "value"):
            for k, v in node.value:
                self.nodes[str(k.value)] = (k, v)
        keys = list(self.nodes)
        self.underscore = sum("_" in k for k in keys) >= sum("-" in k for k in keys)

    def _key_for(self, e: Edit) -> str:
        name = e.dest or e.flag.lstrip("-")
        name = name.replace("-", "_") if self.underscore else name.replace("_", "-")
        return name

    def _existing(self, e: Edit) -> str | None:
        if e.dest:
            for o in self.read.occurrences:
                if o.dest == e.dest and o.site.file == self.path and o.site.yaml_key in self.nodes:
                    return o.site.yaml_key
        for key in (e.replaces, e.flag):
            if key and key in self.nodes:
                return key
        return None

    def _block(self, key: str) -> tuple[int, int]:
        k, v = self.nodes[key]
        start = self.text.rfind("\n", 0, k.start_mark.index) + 1
        end = v.end_mark.index
        nl = self.text.find("\n", end)
        if v.end_mark.column == 0 and end > 0:  # block values end at the next line's start
            return start, end
        return start, (len(self.text) if nl < 0 else nl + 1)

    def remove(self, e: Edit) -> bool:
        key = self._existing(e)
        if key is None:
            return False
        s, t = self._block(key)
        self.te.replace(s, t, "")
        return True

    def set(self, e: Edit) -> bool:
        key = self._existing(e)
        meta = flag_meta(self.release, e.flag) if e.flag.startswith("-") else None
        value = e.value
        if meta is not None and not meta.takes_value and isinstance(value, bool) and value is False and meta.default in (False, None):
            return self.remove(e) or True
        rendered = render_value_yaml(value)
        if key is not None:
            k, v = self.nodes[key]
            import yaml

            renamed = key == e.replaces and key != e.flag  # a key spelled wrong: respell it
            new_key = self._key_for(e) if renamed else key
            if isinstance(v, yaml.ScalarNode) and v.start_mark.line == v.end_mark.line:
                # keep the line (and its comment): replace the key and the value in place
                if new_key != key:
                    self.te.replace(k.start_mark.index, k.end_mark.index, new_key)
                self.te.replace(v.start_mark.index, v.end_mark.index, rendered)
            else:
                s, t = self._block(key)
                self.te.replace(s, t, f"{new_key}: {rendered}\n")
            return True
        self.appended.append(f"{self._key_for(e)}: {rendered}")
        return True

    def env(self, e: Edit) -> bool:
        if e.value is not None:
            self.env_lines.append(f"# oomguard: a YAML config cannot set environment variables: run `export {e.flag}={shlex.quote(str(e.value))}` before `vllm serve --config`")
        return False

    def finish(self) -> str:
        if self.appended:
            tail = "" if self.text.endswith("\n") or not self.text else "\n"
            self.te.insert(len(self.text), tail + "".join(a + "\n" for a in self.appended))
        if self.env_lines:
            self.te.insert(0, "".join(x + "\n" for x in self.env_lines))
        return self.te.apply()
