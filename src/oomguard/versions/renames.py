"""Hand-written notes on flags that vLLM renamed, inverted or removed.

The generated tables say *where* an option exists; they cannot say what replaced
it. Each entry here records that, with the releases it happened in (as seen in
the supported tables: ``deprecated_in`` = first table that marks it deprecated,
``removed_in`` = first table without it) and the source that shows it.
``tests/unit/versions/test_renames.py`` checks every version here against the
tables, so an entry cannot drift from the data.
"""

from __future__ import annotations

from enum import Enum

from oomguard.records import record


class ChangeKind(str, Enum):
    RENAMED = "renamed"          # same meaning, new spelling
    INVERTED = "inverted"        # replaced by the opposite switch; the old default became the default
    REPLACED = "replaced"        # folded into another flag (often a JSON config key)
    REMOVED = "removed"          # gone, nothing to use instead
    NO_OP = "no-op"              # still accepted, deprecated, has no effect


@record(frozen=True)
class FlagChange:
    """How one flag changed between releases (renamed, inverted, replaced, removed, made a no-op), with its source."""

    old: str
    kind: ChangeKind
    new: str | None = None
    deprecated_in: str | None = None
    removed_in: str | None = None
    note: str = ""
    source: str = ""
    suggest: bool = True          # offer ``new`` as "did you mean"

    def describe(self) -> str:
        parts = []
        if self.kind is ChangeKind.NO_OP:
            parts.append(f"deprecated in {self.deprecated_in}, has no effect")
        elif self.removed_in:
            text = f"removed in {self.removed_in}"
            if self.new:
                verb = "renamed to" if self.kind is ChangeKind.RENAMED else "replaced by"
                text = f"{verb} {self.new} in {self.removed_in}"
            parts.append(text)
        elif self.deprecated_in:
            parts.append(f"deprecated since {self.deprecated_in}" + (f", use {self.new}" if self.new else ""))
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)


_AE = "vllm/engine/arg_utils.py"

CHANGES: tuple[FlagChange, ...] = (
    FlagChange("--cuda-graph-sizes", ChangeKind.RENAMED, "--cudagraph-capture-sizes", "0.11.1", "0.13.0",
               "the largest size alone is --max-cudagraph-capture-size",
               f"{_AE} @0.11.1 (deprecated) vs @0.13.0; config/compilation.py @0.13.0"),
    FlagChange("--disable-log-requests", ChangeKind.INVERTED, "--enable-log-requests", "0.10.1", "0.17.0",
               "request logging is off by default since 0.10.1; drop the flag (0.33 accepts it again as "
               "the --no form of --enable-log-requests)",
               f"{_AE}::AsyncEngineArgs.add_cli_args @0.10.1 (deprecated), absent @0.17.0, "
               "EnableDisableAction inverse @0.33.0", suggest=False),
    FlagChange("--swap-space", ChangeKind.REMOVED, None, None, "0.18.0",
               "CPU swap for V0 preemption (4 GiB per GPU by default); the V1 engine recomputes instead",
               "config/cache.py::CacheConfig.swap_space @0.17.0, absent @0.18.0"),
    FlagChange("--use-v2-block-manager", ChangeKind.REMOVED, None, "0.6.3.post1", "0.10.0",
               "a no-op since 0.6.3", f"{_AE} @0.6.3.post1 (deprecated) vs @0.10.0"),
    FlagChange("--max-seq-len-to-capture", ChangeKind.REPLACED, "--max-cudagraph-capture-size", None, "0.11.0",
               "CUDA graphs are now sized by batch (capture sizes), not sequence length",
               f"{_AE} @0.10.2 vs @0.11.0; --max-cudagraph-capture-size from 0.11.2", suggest=False),
    FlagChange("--num-scheduler-steps", ChangeKind.REMOVED, None, None, "0.10.1.1",
               "V0 multi-step scheduling", f"{_AE} @0.10.0 vs @0.10.1.1"),
    FlagChange("--multi-step-stream-outputs", ChangeKind.REMOVED, None, None, "0.10.1.1",
               "V0 multi-step scheduling", f"{_AE} @0.10.0 vs @0.10.1.1"),
    FlagChange("--preemption-mode", ChangeKind.REMOVED, None, None, "0.11.0",
               "V1 always preempts by recomputation", f"{_AE} @0.10.2 vs @0.11.0"),
    FlagChange("--num-lookahead-slots", ChangeKind.REMOVED, None, None, "0.12.0", "",
               f"{_AE} @0.11.2 vs @0.12.0"),
    FlagChange("--task", ChangeKind.REPLACED, "--runner", "0.10.1", "0.13.0",
               "use --runner (generate/pooling) and --convert (embed/classify/reward)",
               f"{_AE} @0.10.1 (deprecated) vs @0.13.0"),
    FlagChange("--guided-decoding-backend", ChangeKind.REPLACED, "--structured-outputs-config", "0.11.0",
               "0.12.0", "set the backend as --structured-outputs-config.backend",
               f"{_AE} @0.11.0 (deprecated) vs @0.12.0"),
    FlagChange("--disable-mm-preprocessor-cache", ChangeKind.REPLACED, "--mm-processor-cache-gb", "0.10.1",
               "0.13.0", "use --mm-processor-cache-gb 0", f"{_AE} @0.10.1 (deprecated) vs @0.13.0"),
    FlagChange("--override-pooler-config", ChangeKind.RENAMED, "--pooler-config", "0.11.0", "0.12.0", "",
               f"{_AE} @0.11.0 (deprecated) vs @0.12.0"),
    FlagChange("--speculative-model", ChangeKind.REPLACED, "--speculative-config", None, "0.8.5.post1",
               'use --speculative-config \'{"model": ..., "num_speculative_tokens": ...}\'',
               f"{_AE} @0.8.0 vs @0.8.5.post1"),
    FlagChange("--num-speculative-tokens", ChangeKind.REPLACED, "--speculative-config", None, "0.8.5.post1",
               "now a key of --speculative-config", f"{_AE} @0.8.0 vs @0.8.5.post1"),
    FlagChange("--tokenizer-pool-size", ChangeKind.REMOVED, None, "0.8.5", "0.10.0", "",
               f"{_AE} @0.8.5 (deprecated) vs @0.10.0"),
    FlagChange("--enable-reasoning", ChangeKind.REMOVED, None, "0.9.0", "0.10.0",
               "--reasoning-parser alone enables it", f"{_AE} @0.9.0 (deprecated) vs @0.10.0"),
    FlagChange("--device", ChangeKind.REMOVED, None, "0.9.0", "0.10.0", "the device is detected",
               f"{_AE} @0.9.0 (deprecated) vs @0.10.0"),
    FlagChange("--worker-use-ray", ChangeKind.REPLACED, "--distributed-executor-backend", "0.6.0", "0.7.0",
               "use --distributed-executor-backend ray", f"{_AE} @0.6.6.post1 (deprecated) vs @0.7.0"),
    FlagChange("--rope-scaling", ChangeKind.REPLACED, "--hf-overrides", None, "0.11.2",
               'use --hf-overrides \'{"rope_scaling": {...}}\'', f"{_AE} @0.11.0 vs @0.11.2"),
    FlagChange("--rope-theta", ChangeKind.REPLACED, "--hf-overrides", None, "0.11.2",
               'use --hf-overrides \'{"rope_theta": ...}\'', f"{_AE} @0.11.0 vs @0.11.2"),
    FlagChange("--calculate-kv-scales", ChangeKind.REMOVED, None, "0.19.0", "0.28.0",
               "fp8 KV scales come from the checkpoint (else 1.0)",
               "config/cache.py::CacheConfig.calculate_kv_scales docstring @0.19.0; absent @0.28.0"),
    FlagChange("--max-num-partial-prefills", ChangeKind.REMOVED, None, None, "0.27.0", "",
               "config/scheduler.py @0.26.0 vs @0.27.0"),
    FlagChange("--max-long-partial-prefills", ChangeKind.REMOVED, None, None, "0.27.0", "",
               "config/scheduler.py @0.26.0 vs @0.27.0"),
    FlagChange("--disable-cascade-attn", ChangeKind.NO_OP, None, "0.32.0", None,
               "cascade attention was removed; vLLM says it goes in 0.33 but 0.33.0 still accepts it",
               f"{_AE}::_DISABLE_CASCADE_ATTN_DEPRECATION_MESSAGE @0.32.0"),
    FlagChange("--mamba-cache-mode", ChangeKind.NO_OP, None, "0.33.0", None,
               "Mamba prefix caching follows --enable-prefix-caching",
               f"{_AE}::_MAMBA_CACHE_MODE_DEPRECATION_MESSAGE @0.33.0"),
)

_BY_OLD = {c.old: c for c in CHANGES}


def rename_for(option: str) -> FlagChange | None:
    """The recorded change for an option string (dashes, not underscores), if any."""
    return _BY_OLD.get(option)
