"""OG6xx: flag spelling and syntax for the chosen vLLM release.

vLLM's parser rejects an unknown option only after the launch command runs
(``vllm serve: error: unrecognized arguments``), and accepts abbreviations and
underscores silently. These rules read the per-release flag tables
(``oomguard.versions``): unknown, removed and not-yet-added flags, renames,
abbreviations, deprecated flags, values of the wrong type, JSON values the shell
will mangle, ``--config`` YAML keys that are not flags, duplicates.
"""

from __future__ import annotations

import json

from oomguard.check.finding import Edit, Severity
from oomguard.inputs.launch import ProblemKind
from oomguard.check.rule import rule
from oomguard.model.failures import FailureClass as F

_BAD = (F.BAD_ARGUMENT,)


def _as_flag(written: str) -> str:
    """A YAML key or an option as written, shown as the option (``max_num_seq`` -> ``--max-num-seq``)."""
    return written if written.startswith("-") else "--" + written.replace("_", "-")


def _history(ctx, option: str):
    try:
        return ctx.release.history(option)
    except Exception:  # an option string the table cannot normalise
        return None


def _change(option: str):
    from oomguard.versions.renames import rename_for

    return rename_for(option.split("=", 1)[0])


def _vt(text: str | None):
    from oomguard.versions.releases import parse_version

    return parse_version(text) if text else None


def classify_unknown(ctx, option: str) -> str:
    """"removed", "too-new" or "unknown" for an option this release does not accept."""
    here = _vt(ctx.release.version)
    ch = _change(ctx.release._normalise(option))  # noqa: SLF001
    if ch is not None and ch.removed_in and _vt(ch.removed_in) is not None and here is not None and _vt(ch.removed_in) <= here:
        return "removed"
    hist = _history(ctx, option)
    if hist is None or not hist.present_in:
        return "unknown"
    last, first = _vt(hist.last), _vt(hist.first)
    if here is not None and last is not None and last < here:
        return "removed"
    if here is not None and first is not None and first > here:
        return "too-new"
    return "unknown"


def _value_of(problem):
    if problem.value_word is None:
        return None
    return problem.value_word.text


def _replacement_edits(ctx, problem) -> tuple[list[Edit], str]:
    """Edits turning a removed / renamed option into this release's spelling."""
    opt = problem.option
    norm = ctx.release._normalise(opt)  # noqa: SLF001
    remove = Edit(opt, None, replaces=opt)
    ch = _change(norm)
    val = _value_of(problem)
    if ch is not None and ch.new and ctx.release.has_option(ch.new):
        new_flag = ctx.release.resolve_option(ch.new).flag
        if ch.new == "--hf-overrides" and val is not None:
            key = "rope_scaling" if norm == "--rope-scaling" else norm.lstrip("-").replace("-", "_")
            try:
                parsed = json.loads(val)
            except ValueError:
                parsed = val
            from oomguard.check.context import json_value

            hf = json_value(ctx.flags.get("hf_overrides"))
            hf = dict(hf) if isinstance(hf, dict) else {}
            hf[key] = parsed
            return [remove, Edit(ch.new, hf, dest=new_flag.dest, replaces=opt)], f"use {ch.new} '{json.dumps(hf, separators=(',', ':'))}'"
        if ch.kind.value == "renamed":
            if new_flag.takes_value and val is None:
                return [remove], f"{ch.new} needs a value; removed"
            value = True if not new_flag.takes_value else _typed(new_flag, val)
            return [remove, Edit(ch.new, value, dest=new_flag.dest, replaces=opt)], f"use {ch.new}"
        if norm == "--disable-mm-preprocessor-cache":
            return [remove, Edit(ch.new, 0, dest=new_flag.dest, replaces=opt)], f"use {ch.new} 0"
    if problem.suggestion and ch is None and ctx.release.has_option(problem.suggestion):
        new_flag = ctx.release.resolve_option(problem.suggestion).flag
        if not new_flag.takes_value and val is None:
            return [remove, Edit(problem.suggestion, True, dest=new_flag.dest, replaces=opt)], f"did you mean {problem.suggestion}?"
        if val is not None and new_flag.takes_value:
            try:
                typed = _typed(new_flag, val, strict=True)
            except _Untyped:
                return [remove], f"remove it ({problem.suggestion} is the closest flag, but {val!r} is not a value it takes)"
            return [remove, Edit(problem.suggestion, typed, dest=new_flag.dest, replaces=opt)], f"did you mean {problem.suggestion}?"
    return [remove], "remove it"


class _Untyped(Exception):
    pass


def _typed(flag, text, *, strict: bool = False):
    """The value as the flag's type; with ``strict``, raise when it does not convert."""
    from oomguard.inputs.command import convert_value

    try:
        return convert_value(flag, text, file=None, line=None, option=flag.name)
    except Exception:
        if strict:
            raise _Untyped(text) from None
        return text


def _problems(ctx, *kinds):
    return [p for p in ctx.launch.problems if p.kind in kinds]


def _at_problem(r, ctx, p, message: str, **kw):
    """A finding about one word the parser could not take (``p``, a FlagProblem): its option, at its line."""
    return r.finding(ctx, message, flags=[p.option], location=(p.file, p.line), **kw)


@rule(
    "OG601",
    "unknown-flag",
    title="Flag unknown to every supported vLLM release",
    severity=Severity.ERROR,
    needs=(),
    why="""vLLM's argument parser stops with "unrecognized arguments: ..." (exit code 2) on an option it
    does not know, after the container or job has already been scheduled. Typos, single-dash
    spellings (`-language-model-only`) and sampling options passed by wrappers (`--temperature`)
    are the usual causes.""",
    fix="""The closest option of this release when one is close; otherwise remove the word and its
    value.""",
    example="vllm serve MODEL -language-model-only",
    use_instead="vllm serve MODEL --language-model-only",
    predicts=_BAD,
)
def unknown_flag(ctx):
    r = unknown_flag.rule
    for p in _problems(ctx, ProblemKind.UNKNOWN):
        if classify_unknown(ctx, p.option) != "unknown":
            continue
        edits, how = _replacement_edits(ctx, p)
        yield _at_problem(
            r, ctx, p,
            f"{p.option} is not a vLLM {ctx.release.version} flag: `vllm serve` stops with 'unrecognized arguments'; {how}.",
            fix=edits,
        )


@rule(
    "OG602",
    "removed-flag",
    title="Flag removed or renamed in this vLLM release",
    severity=Severity.ERROR,
    needs=(),
    why="""Flags come and go between vLLM releases (`--swap-space` went in 0.18, `--use-v2-block-manager`
    in 0.10, `--cuda-graph-sizes` became `--cudagraph-capture-sizes` in 0.13, `--rope-scaling`
    became `--hf-overrides` in 0.11.2). A launch written for an older release fails with
    "unrecognized arguments" on a newer one.""",
    fix="""This release's spelling when the flag was renamed or folded into another
    (`--hf-overrides '{"rope_scaling": ...}'`); otherwise remove it.""",
    example="vllm serve MODEL --swap-space 4   # vLLM 0.33",
    use_instead="vllm serve MODEL",
    predicts=_BAD,
)
def removed_flag(ctx):
    r = removed_flag.rule
    for p in _problems(ctx, ProblemKind.UNKNOWN):
        if classify_unknown(ctx, p.option) != "removed":
            continue
        edits, how = _replacement_edits(ctx, p)
        ch = _change(ctx.release._normalise(p.option))  # noqa: SLF001
        hist = _history(ctx, p.option)
        when = ch.describe() if ch is not None else (f"last in {hist.last}" if hist and hist.last else "removed")
        yield _at_problem(
            r, ctx, p,
            f"{p.option} is not accepted by vLLM {ctx.release.version} ({when}): 'unrecognized arguments'; {how}.",
            fix=edits,
            numbers={"last_release_with_it": hist.last if hist else None},
        )


@rule(
    "OG603",
    "flag-newer-than-release",
    title="Flag added after this vLLM release",
    severity=Severity.ERROR,
    needs=(),
    why="""A flag copied from newer documentation does not exist in the installed vLLM
    (`--kv-cache-memory-bytes` arrived in 0.10.2, `--kv-offloading-size` in 0.11.2): the launch
    fails with "unrecognized arguments". Check `--vllm-version` against `pip show vllm`.""",
    fix="""Remove the flag (or upgrade vLLM to the release named in the message).""",
    example="vllm serve MODEL --kv-cache-memory-bytes 8G   # vLLM 0.9",
    use_instead="vllm serve MODEL",
    predicts=_BAD,
)
def too_new(ctx):
    r = too_new.rule
    for p in _problems(ctx, ProblemKind.UNKNOWN):
        if classify_unknown(ctx, p.option) != "too-new":
            continue
        hist = _history(ctx, p.option)
        yield _at_problem(
            r, ctx, p,
            f"{p.option} first appears in vLLM {hist.first}; vLLM {ctx.release.version} stops with 'unrecognized arguments'. Remove it or upgrade.",
            fix=[Edit(_as_flag(p.option), None, replaces=p.option)],
            numbers={"added_in": hist.first},
        )


@rule(
    "OG604",
    "abbreviated-flag",
    title="Flag works only as an argparse abbreviation",
    severity=Severity.WARNING,
    needs=(),
    why="""argparse accepts any unambiguous prefix of an option, so `--kv-cache-memory` works as
    `--kv-cache-memory-bytes` (vLLM's own start-up log suggests that spelling) and
    `--tensor_parallel` as `--tensor-parallel-size`. The day a release adds another option with
    the same prefix, the launch fails with "ambiguous option".""",
    fix="""The full spelling.""",
    example="vllm serve MODEL --kv-cache-memory 10737418240",
    use_instead="vllm serve MODEL --kv-cache-memory-bytes 10737418240",
)
def abbreviated(ctx):
    r = abbreviated.rule
    for o in ctx.launch.occurrences:
        if not o.via_prefix:
            continue
        value = ctx.flags.get(o.dest)
        yield r.finding(
            ctx,
            f"{o.written} is accepted only as an abbreviation of {o.canonical}; spell it out.",
            flags=[o.written],
            fix=[Edit(_as_flag(o.written), None, replaces=o.written), Edit(o.canonical, value if value is not None else True, dest=o.dest, replaces=o.written)],
            location=(o.site.file, o.site.line),
        )


@rule(
    "OG605",
    "ambiguous-flag",
    title="Abbreviated flag matches several flags",
    severity=Severity.ERROR,
    needs=(),
    why="""An option prefix that matches several options is rejected ("ambiguous option: --max-num
    could match --max-num-seqs, --max-num-batched-tokens").""",
    fix="""The closest matching option, spelled out.""",
    example="vllm serve MODEL --max-num 64",
    use_instead="vllm serve MODEL --max-num-seqs 64",
    predicts=_BAD,
)
def ambiguous(ctx):
    r = ambiguous.rule
    for p in _problems(ctx, ProblemKind.AMBIGUOUS):
        norm = ctx.release._normalise(p.option)  # noqa: SLF001
        cands = sorted(o for o in ctx.release._index if o.startswith(norm))  # noqa: SLF001
        import difflib  # the closest candidate: only for an ambiguous abbreviation

        best = (difflib.get_close_matches(norm, cands, n=1, cutoff=0) or cands[:1] or [None])[0]
        fix = [Edit(_as_flag(p.option), None, replaces=p.option)]
        if best:
            flag = ctx.release.resolve_option(best).flag
            val = True if not flag.takes_value else (_typed(flag, p.value_word.text) if p.value_word else None)
            if val is not None:
                fix.append(Edit(best, val, dest=flag.dest, replaces=p.option))
        yield _at_problem(
            r, ctx, p,
            f"{p.option} could mean {', '.join(cands[:6])}{' ...' if len(cands) > 6 else ''}: vLLM stops with 'ambiguous option'."
            + (f" Spelled out as {best}." if best else ""),
            fix=fix,
        )


@rule(
    "OG606",
    "deprecated-flag",
    title="Deprecated flag",
    severity=Severity.WARNING,
    needs=(),
    why="""A deprecated flag still works in this release but is scheduled to go (or already does
    nothing): the launch breaks on the next upgrade, or silently loses the behaviour it asked
    for.""",
    fix="""The replacement when the flag was renamed; removal when it has no effect.""",
    example="vllm serve MODEL --disable-log-requests",
    use_instead="vllm serve MODEL",
)
def deprecated(ctx):
    r = deprecated.rule
    for o in ctx.launch.occurrences:
        if not o.deprecated:
            continue
        ch = _change(ctx.release._normalise(o.written if o.written.startswith("-") else "--" + o.written.replace("_", "-")))  # noqa: SLF001
        fix: list[Edit] = []
        how = ""
        if ch is not None and ch.kind.value == "no-op":
            fix, how = [Edit(_as_flag(o.written), None, replaces=o.written)], " It has no effect: remove it."
        elif ch is not None and ch.new and ctx.release.has_option(ch.new) and ch.kind.value == "renamed":
            flag = ctx.release.resolve_option(ch.new).flag
            fix = [Edit(_as_flag(o.written), None, replaces=o.written), Edit(ch.new, ctx.flags.get(o.dest, True), dest=flag.dest, replaces=o.written)]
            how = f" Use {ch.new}."
        elif ch is not None and not ch.suggest:
            how = f" {ch.note}" if ch.note else ""
        yield r.finding(
            ctx,
            f"{o.written} is deprecated in vLLM {ctx.release.version}" + (f" ({ch.describe()})" if ch is not None else "") + "." + how,
            flags=[o.written],
            fix=fix,
            location=(o.site.file, o.site.line),
        )


@rule(
    "OG607",
    "invalid-flag-value",
    title="Flag value vLLM will reject",
    severity=Severity.ERROR,
    needs=(),
    why="""vLLM types every flag value (integers, floats, sizes, JSON, fixed choices) and validates
    ranges in its config classes; a value that does not convert (`--max-model-len 32k` on a
    release without size suffixes, an empty `$MAX_MODEL_LEN` passed as 0, a utilization of 1.5)
    stops the launch before anything loads.""",
    fix="""Remove the flag so that vLLM's default applies (the message names the default).""",
    example="vllm serve MODEL --max-model-len 0",
    use_instead="vllm serve MODEL",
    predicts=(F.BAD_ARGUMENT, F.CONFIG_ERROR),
)
def invalid_value(ctx):
    r = invalid_value.rule
    for p in _problems(ctx, ProblemKind.INVALID_VALUE, ProblemKind.MISSING_VALUE):
        if _json_quoting_problem(ctx, p):
            continue  # OG608
        target = p.yaml_key or p.option
        yield r.finding(
            ctx,
            f"{p.message}: vLLM rejects it. Removing it gives vLLM's default"
            + (f" ({_default_of(ctx, p.dest)})." if p.dest else "."),
            flags=[target],
            fix=[Edit(_as_flag(target), None, dest=p.dest, replaces=target)],
            location=(p.file, p.line),
        )


def _default_of(ctx, dest: str) -> str:
    try:
        d = ctx.release.flag(dest).default
    except KeyError:
        return "default"
    return "derived at start-up" if d is None else f"default {d}"


def _json_quoting_problem(ctx, p) -> bool:
    if p.kind is not ProblemKind.INVALID_VALUE or p.value_word is None or p.dest is None:
        return False
    try:
        flag = ctx.release.flag(p.dest)
    except KeyError:
        return False
    return flag.type == "json" and ctx.launch.kind in ("script", "command") and p.value_word.quoted != "'" and _recover_json(p.value_word.raw) is not None


def _recover_json(raw: str):
    """The JSON the author meant, from the value as written in the script."""
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].replace('\\"', '"')
    try:
        return json.loads(text)
    except ValueError:
        return None


@rule(
    "OG608",
    "json-value-not-single-quoted",
    title="JSON-valued flag not single-quoted in a shell script",
    severity=Severity.ERROR,
    needs=(),
    why="""The shell removes double quotes and expands `$` and backticks inside them: an unquoted
    `{"method":"mtp"}` reaches vLLM as `{method:mtp}` (invalid JSON), and a double-quoted one
    breaks as soon as a value contains `$`. JSON-valued flags (`--speculative-config`,
    `--kv-transfer-config`, `--compilation-config`, `--hf-overrides`, `--limit-mm-per-prompt`)
    belong in single quotes.""",
    fix="""The same JSON, single-quoted.""",
    example="""--speculative-config {"method":"mtp","num_speculative_tokens":3}""",
    use_instead="""--speculative-config '{"method":"mtp","num_speculative_tokens":3}'""",
    predicts=_BAD,
)
def json_quoting(ctx):
    r = json_quoting.rule
    if ctx.launch.kind not in ("script", "command") or ctx.launch.text is None and ctx.launch.kind == "script":
        return
    for p in _problems(ctx, ProblemKind.INVALID_VALUE):
        if not _json_quoting_problem(ctx, p):
            continue
        value = _recover_json(p.value_word.raw)
        yield _at_problem(
            r, ctx, p,
            f"the shell turns {p.value_word.raw} into {p.value_word.text!r}, which is not JSON: single-quote it.",
            fix=[Edit(ctx.option_for(p.dest), value, dest=p.dest, replaces=p.option)],
        )
    for o in ctx.launch.occurrences:
        if o.json_quote != '"' or o.site.value_word is None:
            continue
        try:
            if ctx.release.flag(o.dest).type != "json":
                continue
        except KeyError:
            continue
        yield r.finding(
            ctx,
            f"{o.written}'s JSON is double-quoted: it works until a value contains $ or a backtick; single-quote it.",
            flags=[o.written],
            severity=Severity.WARNING,
            fix=[Edit(o.canonical, ctx.flags.get(o.dest), dest=o.dest)],
            location=(o.site.file, o.site.line),
        )


@rule(
    "OG609",
    "yaml-key-not-a-flag",
    title="--config YAML key that is not a flag",
    severity=Severity.ERROR,
    needs=(),
    why="""`vllm serve --config file.yaml` turns every key into `--key value`: a key that is not a
    flag of this release (a typo, a removed flag, a sampling parameter) fails like an unknown
    flag on the command line.""",
    fix="""The key spelled as this release's flag when one is close; otherwise remove it.""",
    example="max_num_seq: 64",
    use_instead="max_num_seqs: 64",
    predicts=_BAD,
)
def yaml_key(ctx):
    r = yaml_key.rule
    for p in _problems(ctx, ProblemKind.YAML_KEY):
        opt = "--" + p.yaml_key.replace("_", "-")
        fix = [Edit(opt, None, replaces=p.yaml_key)]
        if p.suggestion:
            try:
                flag = ctx.release.resolve_option("--" + p.suggestion.replace("_", "-")).flag
                val = _yaml_value(ctx, p)
                fix.append(Edit(flag.name, val if flag.takes_value else True, dest=flag.dest, replaces=p.yaml_key))
            except Exception:
                pass
        kind = classify_unknown(ctx, opt)
        detail = ""
        if kind == "removed":
            ch = _change(ctx.release._normalise(opt))  # noqa: SLF001
            hist = _history(ctx, opt)
            detail = f" ({ch.describe() if ch is not None else 'last in ' + str(hist.last if hist else '?')})"
        elif kind == "too-new":
            detail = f" (added in {_history(ctx, opt).first})"
        yield r.finding(
            ctx,
            f"YAML key {p.yaml_key!r} is not a vLLM {ctx.release.version} flag{detail}" + (f"; did you mean {p.suggestion!r}?" if p.suggestion else "; remove it."),
            flags=[p.yaml_key],
            fix=fix,
            location=(p.file, p.line),
        )


def _yaml_value(ctx, p):
    from oomguard.errors import InputError
    from oomguard.inputs.structured import load_yaml

    try:
        data = load_yaml(ctx.launch.text or "", file=p.file) if p.file == ctx.launch.path else None
    except InputError:
        data = None
    if isinstance(data, dict):
        return data.get(p.yaml_key)
    return None


@rule(
    "OG610",
    "duplicate-flag",
    title="Flag given more than once",
    severity=Severity.WARNING,
    needs=(),
    why="""argparse keeps the last occurrence of a repeated flag: an edit to the first one (the one
    people read) changes nothing. Duplicates usually come from appending flags to a copied
    command.""",
    fix="""Keep one occurrence with the value in effect (the last).""",
    example="vllm serve MODEL --max-model-len 8192 ... --max-model-len 32768",
    use_instead="vllm serve MODEL ... --max-model-len 32768",
)
def duplicate(ctx):
    r = duplicate.rule
    seen: dict[str, list] = {}
    for o in ctx.launch.occurrences:
        if o.site.file == ctx.launch.path:
            seen.setdefault(o.dest, []).append(o)
    for dest, occ in seen.items():
        if len(occ) < 2 or dest in ("config",):
            continue
        lines = ", ".join(str(o.site.line) for o in occ if o.site.line)
        value = ctx.flags.get(dest)
        yield r.finding(
            ctx,
            f"{occ[-1].canonical} is given {len(occ)} times" + (f" (lines {lines})" if lines else "") + f"; the last one ({occ[-1].value_text if occ[-1].value_text is not None else value}) wins.",
            flags=[occ[0].canonical],
            fix=[Edit(occ[-1].canonical, value, dest=dest)] if value is not None else [],
            location=(occ[0].site.file, occ[0].site.line),
        )


@rule(
    "OG611",
    "unresolved-variable",
    title="Flag value from a variable the script does not set",
    severity=Severity.WARNING,
    needs=(),
    why="""A value such as `$MAX_MODEL_LEN` that the script never assigns comes from the caller's
    environment: oomguard cannot check it, and an empty variable turns `--max-model-len
    $MAX_MODEL_LEN` into a missing value (or a 0 some wrappers pass), which vLLM rejects.""",
    fix="""None automatic: set the variable in the script (with a default, `${MAX_MODEL_LEN:-32768}`)
    or pass the value to `oomguard check`.""",
    example="vllm serve MODEL --max-model-len $MAX_MODEL_LEN",
    use_instead="vllm serve MODEL --max-model-len ${MAX_MODEL_LEN:-32768}",
)
def unresolved(ctx):
    r = unresolved.rule
    for u in ctx.launch.unresolved:
        if ctx.launch.set_elsewhere(u):
            continue  # set from a Secret / ConfigMap (valueFrom): it has a value, not known here (the reader's note)
        names = ", ".join(v if v.startswith("$(") else "$" + v for v in u.variables)
        yield r.finding(
            ctx,
            (f"{u.option} takes its value from {names}, which the script does not set: the checks used vLLM's default for it."
             if u.dest else f"{u.option} uses {names}, which the script does not set."),
            flags=[u.option],
            location=(u.file, u.line),
        )


@rule(
    "OG612",
    "unexpected-argument",
    title="Stray word in the vLLM command",
    severity=Severity.ERROR,
    needs=(),
    why="""Only the model may stand alone after `vllm serve`; any other bare word (a value whose flag
    was deleted, a second model path, a broken line continuation) is an "unrecognized
    argument".""",
    fix="""Remove the word.""",
    example="vllm serve MODEL 8192 --max-model-len 8192",
    use_instead="vllm serve MODEL --max-model-len 8192",
    predicts=_BAD,
)
def unexpected(ctx):
    r = unexpected.rule
    for p in _problems(ctx, ProblemKind.UNEXPECTED):
        yield _at_problem(
            r, ctx, p,
            f"{p.option!r} is not a flag or a flag's value: 'unrecognized arguments'. Remove it.",
            fix=[Edit(_as_flag(p.option), None, replaces=p.option)],
        )


@rule(
    "OG613",
    "unknown-vllm-env-var",
    title="VLLM_* environment variable this release does not read",
    severity=Severity.WARNING,
    needs=(),
    why="""vLLM silently ignores environment variables it does not define: a misspelt or retired
    `VLLM_*` variable (such as `VLLM_ATTENTION_BACKEND` after its removal) leaves the behaviour it
    was meant to change at the default.""",
    fix="""The closest variable this release reads, when one is close; otherwise none.""",
    example="VLLM_ALLOW_LONG_MAX_MODEL_LENGTH=1 vllm serve MODEL",
    use_instead="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve MODEL",
)
def unknown_env(ctx):
    r = unknown_env.rule
    known = set(getattr(ctx.release, "env", {}) or {})
    if not known:
        return
    for name, value in ctx.env.items():
        if not name.startswith("VLLM_") or name in known:
            continue
        import difflib  # did-you-mean: only for an unknown name

        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.85)
        fix = [Edit(name, None), Edit(close[0], value)] if close else []
        yield r.finding(
            ctx,
            f"vLLM {ctx.release.version} does not read {name}" + (f"; did you mean {close[0]}?" if close else ": it has no effect."),
            flags=[name],
            fix=fix,
            location=(ctx.launch.path, ctx.launch.command_line),
        )


@rule(
    "OG614",
    "demo-api-server",
    title="The demo api_server entry point",
    severity=Severity.ERROR,
    needs=(),
    why="""`python -m vllm.entrypoints.api_server` is a minimal demo server: no OpenAI-compatible
    API, and none of the OpenAI server's options (`--api-key`, `--served-model-name`, tool
    parsers...), which it rejects as unrecognized arguments. Production launches use
    `vllm serve` (or `python -m vllm.entrypoints.openai.api_server`).""",
    fix="""None automatic (the program changes): use `vllm serve MODEL ...`.""",
    example="python -m vllm.entrypoints.api_server --model MODEL --api-key KEY",
    use_instead="vllm serve MODEL --api-key KEY",
    predicts=_BAD,
)
def demo_server(ctx):
    r = demo_server.rule
    prog = ctx.launch.program
    if not prog.endswith("vllm.entrypoints.api_server"):
        return
    frontend = sorted(
        {o.written for o in ctx.launch.occurrences if getattr(ctx.release.flags.get(o.dest), "group", None) is not None
         and str(getattr(ctx.release.flags[o.dest].group, "value", "")) == "frontend" and o.dest not in ("host", "port", "ssl_keyfile", "ssl_certfile", "root_path", "log_level")}
    )
    yield r.finding(
        ctx,
        "python -m vllm.entrypoints.api_server is the demo server (no OpenAI API)"
        + (f"; it rejects {', '.join(frontend)} as unrecognized arguments." if frontend else "."),
        flags=frontend,
        severity=Severity.ERROR if frontend else Severity.WARNING,
        location=(ctx.launch.path, ctx.launch.command_line),
    )


@rule(
    "OG615",
    "eager-overrides-cudagraph-mode",
    title="--enforce-eager overrides the compilation config's cudagraph_mode",
    severity=Severity.WARNING,
    needs=(),
    why="""`--enforce-eager` sets `cudagraph_mode` to NONE whatever `--compilation-config` says: a
    `cudagraph_mode` chosen to avoid a crash (PIECEWISE against an illegal memory access)
    silently stops applying when eager mode is turned off later, or the graphs the config asks
    for never run.""",
    fix="""None automatic: keep one of the two.""",
    example="""vllm serve MODEL --enforce-eager --compilation-config '{"cudagraph_mode":"PIECEWISE"}'""",
)
def eager_vs_mode(ctx):
    r = eager_vs_mode.rule
    from oomguard.check.context import json_value

    comp = json_value(ctx.flags.get("compilation_config"))
    if not ctx.flags.get("enforce_eager") or not isinstance(comp, dict):
        return
    mode = str(comp.get("cudagraph_mode") or "").upper()
    if not mode or mode == "NONE":
        return
    yield r.finding(
        ctx,
        f"--enforce-eager turns CUDA graphs off, so cudagraph_mode {mode} in --compilation-config has no effect.",
        dests=["enforce_eager", "compilation_config"],
    )


@rule(
    "OG616",
    "v0-only-flag-on-v1",
    title="Flag the V1 engine does not implement",
    severity=Severity.ERROR,
    needs=(),
    why="""Some flags survived the move to the V1 engine in the parser but not in the engine:
    `--max-num-partial-prefills` above 1 raises "Concurrent Partial Prefill is not supported"
    at start-up.""",
    fix="""Remove the flag.""",
    example="vllm serve MODEL --max-num-partial-prefills 4",
    use_instead="vllm serve MODEL",
    predicts=(F.CONFIG_ERROR,),
)
def v0_only(ctx):
    r = v0_only.rule
    n = ctx.flags.get("max_num_partial_prefills")
    v0 = ctx.version_tuple < (0, 8, 0) or (ctx.version_tuple < (0, 11, 0) and str(ctx.env.get("VLLM_USE_V1", "1")) == "0")
    if not isinstance(n, int) or n <= 1 or v0:
        return
    yield r.finding(
        ctx,
        f"--max-num-partial-prefills {n}: the V1 engine of vLLM {ctx.release.version} raises 'Concurrent Partial Prefill is not supported'.",
        dests=["max_num_partial_prefills"],
        fix=[ctx.edit("max_num_partial_prefills", None)],
    )
