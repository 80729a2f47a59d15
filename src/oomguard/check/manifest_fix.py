"""``check --fix`` for manifests: the edits written into the Deployment, compose file or Helm values itself.

The manifest is never re-dumped: each edit replaces the span of one YAML node in
the original text (a list item of ``args``, a ``vllmConfig`` value, an ``env``
entry), deletes one item's line, or inserts items after the last one, so comments,
key order, quoting and indentation stay as written and the diff is the edit.
Where the flags live is ``launch.carrier`` (``oomguard.inputs.manifests``):

- ``ArgsCarrier``: the words are list items (``args``, ``command``, ``extraArgs``);
- ``ScriptCarrier``: the words are a shell script or command string in one scalar
  (``sh -c "vllm serve ..."``, compose ``command: vllm serve ...``): the script is
  fixed as a script (``check.fix_text``) and the scalar re-rendered in its own style;
- ``HelmCarrier``: production-stack's ``vllmConfig`` keys for the flags the chart
  knows, ``extraArgs`` for the rest;
- environment edits go to the container's ``env`` (Kubernetes, Helm) or the
  service's ``environment`` (compose, list or mapping form).

A value rendered into YAML is checked to read back as the same string, quoted
otherwise (a plain ``8192`` in ``args`` would be a number, which Kubernetes rejects).
"""

from __future__ import annotations

import json
import re
from typing import Any

from oomguard.check.finding import SHM_SIZE, Edit
from oomguard.check.fix_text import ScriptFixer, TextEdits, flag_meta, render_flag
from oomguard.inputs.launch import Launch


def _yaml():
    import yaml

    return yaml


def _plain_ok(value: str) -> bool:
    """Whether ``value`` written as a plain scalar reads back as the same string."""
    if not value or value != value.strip() or "\n" in value or len(value) > 4096:
        return False
    if value[0] in "!&*{}[]|>'\"%@`#,?:-" and not (value.startswith("--") or value.startswith("-") and len(value) > 1 and value[1] not in " "):
        return False
    if ": " in value or " #" in value or value.endswith(":"):
        return False
    try:
        return _yaml().safe_load(f"k: {value}\n") == {"k": value}
    except Exception:  # noqa: BLE001 - anything YAML reads differently is not plain
        return False


def render_string(value: str, style: str | None) -> str:
    """A YAML scalar that reads back as the string ``value``, in ``style`` when possible."""
    if style == '"' or "\n" in value or any(ord(c) < 0x20 and c != "\t" for c in value):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar
    if style in (None, "") and _plain_ok(value):
        return value
    return "'" + value.replace("'", "''") + "'"


def render_typed(value: Any) -> str:
    """A typed value (a vllmConfig key: number, bool, string) as YAML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dict, list)):
        return render_string(json.dumps(value, separators=(",", ":")), "'")
    return render_string(str(value), None)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    e = text.find("\n", pos)
    return len(text) if e < 0 else e


def _last_leaf(node: Any) -> Any:
    y = _yaml()
    while isinstance(node, (y.MappingNode, y.SequenceNode)) and node.value and not node.flow_style:
        last = node.value[-1]
        node = last[1] if isinstance(node, y.MappingNode) else last
    return node


class _Yamltext:
    """Span edits on one YAML text, keyed by the nodes they touch."""

    def __init__(self, text: str):
        self.text = text
        self.te = TextEdits(text)

    def replace_node(self, node: Any, new: str) -> None:
        self.te.replace(node.start_mark.index, node.end_mark.index, new)

    def style(self, node: Any) -> str | None:
        return getattr(node, "style", None)

    def delete_item(self, seq: Any, item: Any) -> None:
        """Delete one item of a sequence (its whole line in block style, ``, item`` in flow style)."""
        text = self.text
        if seq.flow_style:
            items = seq.value
            i = next(k for k, x in enumerate(items) if x is item)
            if i > 0:
                start = items[i - 1].end_mark.index
                self.te.replace(start, item.end_mark.index, "")
            elif len(items) > 1:
                self.te.replace(item.start_mark.index, items[1].start_mark.index, "")
            else:
                self.te.replace(item.start_mark.index, item.end_mark.index, "")
            return
        ls = _line_start(text, item.start_mark.index)
        end_node = _last_leaf(item)
        le = _line_end(text, max(item.end_mark.index, end_node.end_mark.index) - (1 if item.end_mark.column == 0 else 0))
        self.te.replace(ls, min(le + 1, len(text)), "")

    def append_items(self, seq: Any, rendered: list[str]) -> None:
        if not rendered:
            return
        text = self.text
        if seq.flow_style or not seq.value:
            close = seq.end_mark.index - 1
            while close > seq.start_mark.index and text[close] != "]":
                close -= 1
            sep = ", " if seq.value else ""
            self.te.insert(close, sep + ", ".join(rendered))
            return
        last = seq.value[-1]
        leaf = _last_leaf(last)
        at = _line_end(text, leaf.end_mark.index - (1 if leaf.end_mark.column == 0 and leaf.end_mark.index > 0 else 0))
        ls = _line_start(text, last.start_mark.index)
        dash = text[ls:last.start_mark.index]
        prefix = dash if dash.strip() in ("-", "") and "-" in dash else " " * seq.start_mark.column + "- "
        self.te.insert(at, "".join("\n" + prefix + r for r in rendered))

    def add_key(self, mapping: Any, key: str, block: str) -> None:
        """Insert ``key: ...`` (``block`` is the text after the colon, lines after the first already
        indented relative to the key) as the mapping's last key."""
        text = self.text
        if mapping.flow_style:
            close = mapping.end_mark.index - 1
            sep = ", " if mapping.value else ""
            self.te.insert(close, f"{sep}{key}: {block.strip()}")
            return
        indent = mapping.value[0][0].start_mark.column if mapping.value else mapping.start_mark.column
        leaf = _last_leaf(mapping.value[-1][1]) if mapping.value else mapping
        at = _line_end(text, leaf.end_mark.index - (1 if leaf.end_mark.column == 0 and leaf.end_mark.index > 0 else 0))
        pad = " " * indent
        lines = block.split("\n")
        body = lines[0] + "".join("\n" + pad + ln for ln in lines[1:])
        self.te.insert(at, f"\n{pad}{key}:{body}")

    def apply(self) -> str:
        return self.te.apply()


def render_block_scalar(node: Any, value: str, text: str) -> str:
    """A literal block scalar (``|``) holding ``value``, indented as the original's content."""
    start = node.start_mark.index
    header_end = _line_end(text, start)
    header = text[start:header_end]
    content_start = header_end + 1
    m = re.match(r"[ ]*", text[content_start:])
    indent = m.group(0) if m and m.group(0) else " " * (node.start_mark.column + 2)
    body = value[:-1] if value.endswith("\n") else value
    lines = [(indent + ln if ln else "") for ln in body.split("\n")]
    out = header.replace(">", "|", 1) + "\n" + "\n".join(lines)
    if node.end_mark.column == 0 and node.end_mark.index > content_start:
        out += "\n"  # the original span ends at the start of the next line
    return out


_WHOLE_K8S_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class ManifestFixer:
    """The fixer interface of ``check.fix_text`` (remove / set / env / finish) for manifests."""

    def __init__(self, launch: Launch, release):
        self.launch = launch
        self.release = release
        self.text = launch.text or ""
        self.y = _Yamltext(self.text)
        self.carrier = launch.carrier
        self.flags = self.carrier.flags
        self.notes: list[str] = []
        self.appended: list[list[str]] = []  # new flags, as words
        self.shm_gib: int | None = None  # OG405's /dev/shm size, written last (finish)
        self.script: ScriptFixer | None = None
        from oomguard.inputs.manifests import ArgsCarrier, HelmCarrier, ScriptCarrier

        self._Args, self._Helm, self._Script = ArgsCarrier, HelmCarrier, ScriptCarrier
        if isinstance(self.flags, ScriptCarrier) and self.flags.node is not None:
            from oomguard.records import replace

            inner = replace(launch, text=self.flags.value, kind="script")
            self.script = ScriptFixer(inner, release)

    # ------------------------------------------------------------------ helpers
    def _occ(self, dest: str):
        return [o for o in self.launch.occurrences if o.dest == dest and o.site.option_word is not None]

    def _written(self, option: str):
        out = [(o.site.option_word, o.site.value_word) for o in self.launch.occurrences if o.written == option]
        out += [(p.option_word, p.value_word) for p in self.launch.problems if p.option == option and p.option_word is not None]
        return out

    @staticmethod
    def _node(word) -> Any:
        return getattr(word, "node", None)

    def _seq_of(self, node: Any) -> Any:
        for seq in getattr(self._args(), "seqs", []):
            if any(item is node for item in seq.value):
                return seq
        return None

    def _env_definition(self, vnode: Any) -> Any:
        """The ``value:`` node of the env entry a whole-word Kubernetes ``$(NAME)`` argument expands from;
        None for any other word, a variable set by ``valueFrom`` or elsewhere, and outside Kubernetes."""
        env = self.carrier.env
        if self.carrier.format != "kubernetes" or env is None:
            return None
        m = _WHOLE_K8S_REF.fullmatch(str(getattr(vnode, "value", "")))
        entry = env.entries.get(m.group(1)) if m else None
        return entry[1] if entry is not None and entry[1] is not None else None

    def _args(self):
        return self.flags.extra_args if isinstance(self.flags, self._Helm) else self.flags

    def _style_near(self, seq: Any) -> str | None:
        if seq is None or not seq.value:
            return None
        return getattr(seq.value[-1], "style", None)

    def _words(self, e: Edit) -> list[str]:
        """The words of one flag edit (unquoted: each becomes one YAML item)."""
        import shlex

        from oomguard.inputs.render import format_value

        rendered = render_flag(self.release, e.flag, e.value)
        if rendered is None:
            return []
        meta = flag_meta(self.release, e.flag)
        if meta is not None and not meta.takes_value:
            return shlex.split(rendered)
        if isinstance(e.value, list) and meta is not None and meta.nargs in ("+", "*"):
            return [e.flag, *(format_value(v) for v in e.value)]
        return [e.flag, format_value(e.value)]

    def _helm_key(self, e: Edit) -> bool:
        """A flag the chart writes from a vllmConfig key: set that key (added when absent)."""
        from oomguard.inputs.manifests import HELM_KEYS, HELM_SWITCHES

        known = {v[2:].replace("-", "_"): k for k, v in HELM_KEYS.items()}
        known.update({v.replace("-", "_"): k for k, v in HELM_SWITCHES.items()})
        key = known.get(e.dest or "")
        if key is None or any(self._node(o.site.option_word) is not None for o in self._occ(e.dest)):
            return False  # not a chart key, or written in extraArgs: edited there
        hc = self.flags
        if e.dest in hc.keys:
            _k, _knode, vnode = hc.keys[e.dest]
            self.y.replace_node(vnode, render_typed(e.value))
            return True
        if hc.vllm_config is not None:
            self.y.add_key(hc.vllm_config, key, " " + render_typed(e.value))
        else:
            self.y.add_key(hc.model_spec, "vllmConfig", f"\n  {key}: {render_typed(e.value)}")
        return True

    def _unfixable(self, e: Edit) -> bool:
        self.notes.append(f"{e.describe()}: the manifest's template writes this flag; change it by hand")
        return False

    # ------------------------------------------------------------------ the fixer interface
    def remove(self, e: Edit) -> bool:
        if self.script is not None:
            return self.script.remove(e)
        if isinstance(self.flags, self._Helm) and e.dest in self.flags.keys:
            _key, knode, _vnode = self.flags.keys[e.dest]
            self._delete_key(self.flags.vllm_config, knode)
            return True
        targets = [(o.site.option_word, o.site.value_word) for o in self._occ(e.dest)] if e.dest else []
        if not targets:
            targets = self._written(e.replaces or e.flag)
        done = False
        for ow, vw in targets:
            for w in {id(x): x for x in (ow, vw) if x is not None}.values():
                node = self._node(w)
                if node is None:
                    return self._unfixable(e)
                seq = self._seq_of(node)
                if seq is not None:
                    self.y.delete_item(seq, node)
                    done = True
        return done

    def _delete_key(self, mapping: Any, knode: Any) -> None:
        text = self.text
        for k, v in mapping.value:
            if k is knode:
                ls = _line_start(text, k.start_mark.index)
                leaf = _last_leaf(v)
                le = _line_end(text, leaf.end_mark.index - (1 if leaf.end_mark.column == 0 and leaf.end_mark.index > 0 else 0))
                self.y.te.replace(ls, min(le + 1, len(text)), "")
                return

    def set(self, e: Edit) -> bool:
        if e.flag == SHM_SIZE:
            self.shm_gib = int(e.value)
            return True
        if self.script is not None:
            return self.script.set(e)
        if isinstance(self.flags, self._Helm) and self._helm_key(e):
            return True
        occ = self._occ(e.dest) if e.dest else []
        spots = [(o.site.option_word, o.site.value_word) for o in occ]
        if not spots and e.replaces:
            spots = self._written(e.replaces)
        if spots:
            ow, vw = spots[-1]
            onode, vnode = self._node(ow), self._node(vw) if vw is not None else None
            if onode is None:
                return self._unfixable(e)
            words = self._words(e)
            if not words:  # "absent": a switch's default
                return self.remove(e)
            style = getattr(onode, "style", None)
            if vw is None or vw is ow:
                # one item: --flag or --flag=value
                new = words[0] if len(words) == 1 else f"{words[0]}={words[1]}"
                if len(words) > 2:
                    new = words[0] + "=" + ",".join(words[1:])
                self.y.replace_node(onode, render_string(new, style))
            else:
                if ow.text != words[0]:
                    self.y.replace_node(onode, render_string(words[0], style))
                if len(words) > 1 and vnode is not None:
                    value = words[1] if self.launch.flags.get(e.dest) != e.value or isinstance(e.value, (dict, list)) else vw.text
                    defined = self._env_definition(vnode)
                    if defined is not None:
                        # `- "$(MAXLEN)"` with MAXLEN in the container's env: the value lives there; the
                        # reference stays (fix the definition, not the word the kubelet expands)
                        self.y.replace_node(defined, render_string(value, getattr(defined, "style", None) or '"'))
                    else:
                        self.y.replace_node(vnode, render_string(value, getattr(vnode, "style", None)))
                elif len(words) == 1 and vnode is not None:
                    seq = self._seq_of(vnode)
                    if seq is not None:
                        self.y.delete_item(seq, vnode)
            for o in occ[:-1]:
                for w in {id(x): x for x in (o.site.option_word, o.site.value_word) if x is not None}.values():
                    node = self._node(w)
                    seq = self._seq_of(node) if node is not None else None
                    if seq is not None:
                        self.y.delete_item(seq, node)
            return True
        words = self._words(e)
        if words:
            self.appended.append(words)
        return True

    def env(self, e: Edit) -> bool:
        envc = self.carrier.env
        if envc is None:
            return False
        name, value = e.flag, e.value
        entry = envc.entries.get(name)
        if entry is not None:
            item, vnode = entry
            if value is None:
                if envc.style == "compose-map":
                    self._delete_key(envc.node, item)
                else:
                    self.y.delete_item(envc.node, item)
            elif envc.style == "compose-list":
                self.y.replace_node(item, render_string(f"{name}={value}", getattr(item, "style", None)))
            elif vnode is not None:
                self.y.replace_node(vnode, render_string(str(value), '"'))
            else:
                return False
            return True
        if value is None:
            return True
        if envc.style == "compose-list":
            new = [render_string(f"{name}={value}", '"')]
        elif envc.style == "compose-map":
            new = None
        else:
            new = [f"name: {render_string(name, None)}\n  value: {render_string(str(value), chr(34))}"]
        if envc.node is not None and not (envc.style == "compose-map"):
            if new and "\n" in new[0] and (envc.node.flow_style or not envc.node.value):
                # `env: []` (or `[{...}]`): an item written inside the brackets is a flow mapping; a block one
                # there is invalid YAML (the fixed Deployment failed to parse)
                new = [f"{{name: {render_string(name, None)}, value: {render_string(str(value), chr(34))}}}"]
            elif new and "\n" in new[0] and not envc.node.flow_style and envc.node.value:
                pad = " " * (envc.node.value[-1].start_mark.column)
                new = [new[0].replace("\n  ", "\n" + pad)]
            self.y.append_items(envc.node, new)
        elif envc.node is not None:
            self.y.add_key(envc.node, render_string(name, None), " " + render_string(str(value), '"'))
        else:
            key = "environment" if envc.style.startswith("compose") else "env"
            if envc.style.startswith("compose"):
                block = f"\n  - {render_string(f'{name}={value}', chr(34))}"
            else:
                block = f"\n  - name: {render_string(name, None)}\n    value: {render_string(str(value), chr(34))}"
            self.y.add_key(envc.parent, key, block)
        return True

    def finish(self) -> str:
        if self.script is not None:
            new_value = self.script.finish()
            node = self.flags.node
            if new_value != self.flags.value:
                if getattr(node, "style", None) in ("|", ">"):
                    self.y.replace_node(node, render_block_scalar(node, new_value, self.text))
                else:
                    self.y.replace_node(node, render_string(new_value, getattr(node, "style", None)))
        elif self.appended:
            args = self._args()
            seq = getattr(args, "append_to", None)
            items = [w for words in self.appended for w in words]
            if seq is not None:
                style = self._style_near(seq)
                self.y.append_items(seq, [render_string(w, style) for w in items])
            elif getattr(args, "parent", None) is not None:
                block = "".join(f"\n  - {render_string(w, None)}" for w in items)
                self.y.add_key(args.parent, args.create_key, block)
        if self.shm_gib is not None:
            # after the flags: at a position two edits share, the later one comes out first, and a
            # new list item must follow its own list
            self._size_shm(self.shm_gib)
        return self.y.apply()

    # ------------------------------------------------------------------ /dev/shm (OG405)
    def _size_shm(self, gib: int) -> None:
        """/dev/shm of ``gib`` GiB in the manifest's own terms: compose ``shm_size``, production-stack
        ``shmSize``, a Kubernetes memory ``emptyDir`` (its ``sizeLimit``, or a new volume and its mount)."""
        site = self.carrier.shm
        if site is None:
            self.notes.append(f"give /dev/shm {gib} GiB by hand: the manifest does not size it")
            return
        if site.style in ("compose", "helm"):
            value = f"{gib}gb" if site.style == "compose" else f"{gib}Gi"
            key = "shm_size" if site.style == "compose" else "shmSize"
            if site.size is not None:
                self.y.replace_node(site.size, render_string(value, getattr(site.size, "style", None)))
            else:
                self._first_key(site.parent, key, value)
            return
        if site.empty_dir is not None:  # a memory emptyDir at /dev/shm already: its size
            if site.size is not None:
                self.y.replace_node(site.size, render_string(f"{gib}Gi", getattr(site.size, "style", None)))
            else:
                self.y.add_key(site.empty_dir, "sizeLimit", f" {gib}Gi")
            return
        name = next(x for x in ("dshm", *(f"dshm-{i}" for i in range(2, len(site.names) + 3))) if x not in site.names)
        self._add_item(site.mounts, site.parent, "volumeMounts", f"{{name: {name}, mountPath: /dev/shm}}")
        self._add_item(site.volumes, site.pod, "volumes", f"{{name: {name}, emptyDir: {{medium: Memory, sizeLimit: {gib}Gi}}}}")

    def _add_item(self, seq: Any, parent: Any, key: str, item: str) -> None:
        """``item`` (a flow mapping) appended to ``seq``, or ``key: [item]`` added to ``parent``."""
        if seq is not None:
            self.y.append_items(seq, [item])
        else:
            self._first_key(parent, key, f"[{item}]")

    def _first_key(self, mapping: Any, key: str, value: str) -> None:
        """``key: value`` (one line) as the mapping's first key: the end of a mapping is where other
        edits append (its last list, a new args key), its first key's start is nobody else's."""
        if mapping.flow_style or not mapping.value:
            self.y.add_key(mapping, key, " " + value)
            return
        first = mapping.value[0][0]
        self.y.te.insert(first.start_mark.index, f"{key}: {value}\n" + " " * first.start_mark.column)
