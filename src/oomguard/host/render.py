"""Output of ``oomguard host``: the JSON document and the rich text report.

JSON contract (keep these names): ``findings`` (each ``id``, ``severity``,
``message``, ``fix_command``) and ``facts``; the launch's host-RAM estimate
sits under ``facts.launch`` when a launch was given. rich is imported only
when text is printed.
"""

from __future__ import annotations

import json
from typing import IO

from oomguard.host.facts import HostFacts
from oomguard.host.findings import Finding, Severity
from oomguard.host.launchview import LaunchView
from oomguard.units import GiB, MiB

__all__ = ["to_json", "render_text"]


def document(facts: HostFacts, findings: list[Finding], launch: LaunchView | None) -> dict:
    data = facts.to_dict()
    data["launch"] = launch.to_dict() if launch else None
    # The same object as `check --format json`'s host_ram (oomguard.host.ram_model.host_ram_summary).
    host_ram = launch.ram.summary() if launch else None
    return {"findings": [f.to_dict() for f in findings], "host_ram": host_ram, "facts": data}


def to_json(facts: HostFacts, findings: list[Finding], launch: LaunchView | None) -> str:
    from oomguard.redact import redact_data

    return json.dumps(redact_data(document(facts, findings, launch)), indent=2, sort_keys=False)


def _gib(n: int | None) -> str:
    if n is None:
        return "?"
    if 0 < n < GiB:
        return f"{n / MiB:.0f} MiB"
    return f"{n / GiB:.1f} GiB"


def _range(lo: int, hi: int) -> str:
    if hi < GiB:
        return f"{lo / MiB:.0f}-{hi / MiB:.0f} MiB"
    return f"{lo / GiB:.1f}-{hi / GiB:.1f} GiB"


def _known(value) -> str:
    """A fact as text; one this machine did not show (no /proc/sys entry, no permission) says so."""
    return "not readable here" if value is None else str(value)


def fact_rows(facts: HostFacts) -> list[tuple[str, str]]:
    m = facts.meminfo
    rows = [
        ("RAM", f"{_gib(m.mem_total_bytes)} total, {_gib(m.mem_available_bytes)} available"),
    ]
    cg = facts.cgroup
    if cg:
        limit = "no limit" if cg.limit_bytes is None else _gib(cg.limit_bytes)
        extra = f", memory.high {_gib(cg.high_bytes)}" if cg.high_bytes is not None else ""
        used = f", using {_gib(cg.current_bytes)}" if cg.current_bytes is not None else ""
        rows.append((f"cgroup {cg.version.value}", f"{limit}{extra}{used} ({cg.path})"))
    rows.append(("container", facts.container.value))
    rows.append(("RAM budget", _gib(facts.ram_budget_bytes) + (" (--host-ram-gib)" if facts.host_ram_override_bytes is not None else "")))
    rows.append(("vm.overcommit_memory", _known(facts.overcommit_memory)))
    rows.append(("vm.max_map_count", _known(facts.max_map_count)))
    rows.append(("swap", _gib(facts.swap_total_bytes) if facts.swap_total_bytes else "off"))
    rows.append(("/dev/shm", _gib(facts.shm.size_bytes) if facts.shm.size_bytes is not None else facts.shm.source))
    rows.append(("open files (soft/hard)", f"{facts.nofile_soft or 'unlimited'} / {facts.nofile_hard or 'unlimited'}"))
    if facts.numa_nodes:
        rows.append(
            ("NUMA nodes", "; ".join(f"{n.node}: cpus {n.cpulist}, {_gib(n.mem_total_bytes)}" for n in facts.numa_nodes))
        )
    if facts.gpus:
        for d in facts.gpus.devices:
            procs = facts.gpus.processes_on(d.index)
            rows.append(
                (f"GPU{d.index}", f"{d.name or '?'}: {_gib(d.used_bytes)} used of {_gib(d.total_bytes)}, {len(procs)} process(es)")
            )
    if facts.topology:
        topo = facts.topology
        kinds = sorted({str(topo.link(a, b)) for a in topo.gpus for b in topo.gpus if a < b})
        rows.append(("GPU links", ", ".join(kinds) or "single GPU"))
    for p in facts.vllm_processes:
        rows.append((f"vLLM pid {p.pid}", f"oom_score_adj {_known(p.oom_score_adj)}"))
    return rows


_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def render_text(facts: HostFacts, findings: list[Finding], launch: LaunchView | None, file: IO[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from oomguard.textwidth import output_width

    console = Console(file=file, highlight=False, soft_wrap=False, width=output_width(file))
    table = Table(title="host facts", show_header=False, title_justify="left")
    table.add_column("fact", style="bold")
    table.add_column("value")
    for key, value in fact_rows(facts):
        table.add_row(key, value)
    console.print(table)

    if launch is not None:
        ram = Table(title=f"host RAM of {launch.source}", title_justify="left")
        ram.add_column("component")
        ram.add_column("kind")
        ram.add_column("expected", justify="right")
        ram.add_column("range", justify="right")
        ram.add_column("how")
        for c in launch.ram.components:
            ram.add_row(c.name, c.kind.value, _gib(c.expected_bytes), _range(c.low_bytes, c.high_bytes), c.formula)
        ram.add_row(
            "resident total", "", _gib(launch.ram.expected_bytes), _range(launch.ram.low_bytes, launch.ram.high_bytes),
            f"against {_gib(facts.ram_budget_bytes)} allowed",
        )
        console.print(ram)
        for note in launch.ram.notes + launch.notes:
            console.print(Text(f"note: {note}", style="dim"))

    if not findings:
        console.print(Text("no findings", style="green"))
    for f in findings:
        line = Text()
        line.append(f"{f.severity.value.upper():7} ", style=_STYLE[f.severity])
        line.append(f"{f.id} {f.name}", style="bold")
        console.print(line)
        console.print(Text("  " + f.message))
        for cmd in f.fix_command.splitlines():
            console.print(Text("  fix: " + cmd, style="green"))
        if f.fix_checked:
            console.print(Text("  " + f.fix_checked, style="dim"))
    for note in facts.notes:
        console.print(Text(f"note: {note}", style="dim"))
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    console.print(
        Text(
            f"{counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]} warning(s), {counts[Severity.INFO]} info; "
            "oomguard changes nothing: run the fixes yourself.",
            style="bold",
        )
    )
