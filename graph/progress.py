"""Live progress of a run in the terminal: the step of each experiment, the best so far, spend."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from graph.archive import Archive
from graph.run_data import VERIFIED_NOTE, baselines, headline, num, num_interval, ratio, seed_ratio_text, seed_ratios


class LiveProgress:
    """A Rich live panel fed by the graph's progress events (called from worker threads)."""

    def __init__(self, archive: Archive, console: Console | None = None, run_id: str = "") -> None:
        self.archive = archive
        self.console = console or Console()
        self.run_id = run_id
        self._lock = threading.Lock()
        self._steps: dict[str, tuple[str, str]] = {}  # experiment -> (title, step)
        self._generation = 0
        self._headline = "starting"
        self._started = time.time()
        self._live: Live | None = None

    def __enter__(self) -> LiveProgress:
        self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(*exc)
            self._live = None

    def event(self, kind: str, **data: Any) -> None:
        with self._lock:
            if kind == "generation":
                self._generation = data["generation"]
                self._steps = {}
                self._headline = "selecting base and reference"
            elif kind == "selected":
                self._headline = f"base {data.get('base_id')}, reference {data.get('reference_id') or '-'}"
            elif kind == "planned":
                self._headline += f"; {len(data.get('plans', []))} experiments"
            elif kind == "experiment_step":
                self._steps[data["experiment"]] = (data.get("title", ""), data["step"])
            elif kind == "experiment_done":
                title = self._steps.get(data["experiment"], ("", ""))[0]
                outcome = data["status"]
                if data.get("geomean_us"):
                    outcome += f" {num(data['geomean_us'])} µs ({data.get('kernel')})"
                self._steps[data["experiment"]] = (title, f"done: {outcome}")
            elif kind == "seed":
                self._headline = data.get("step", "seed")
            elif kind == "generation_done" and data.get("stop_reason"):
                self._headline = f"stopping: {data['stop_reason']}"
            elif kind == "awaiting_approval":
                self._headline = (
                    f"waiting for approval of {len(data.get('plans', []) or [])} plans: "
                    f"kernel-scientist chat {self.run_id}"
                )
            elif kind in ("reviewed", "paused", "resumed"):
                self._headline = kind + "".join(f" {k}={v}" for k, v in data.items() if k in ("decision", "generation"))
            elif kind == "resume":
                self._headline = f"resuming at {', '.join(data.get('next', []))}"
        if self._live is not None:
            self._live.update(self._render())
        else:
            self.console.log(kind, data)

    def _render(self) -> Group:
        top = headline(self.archive)
        spend = self.archive.spend()
        elapsed = time.time() - self._started
        head = Text.assemble(
            (f"{self.run_id}  ", "bold"),
            f"generation {self._generation}  ·  ",
            (top.best_text(), "green"),
            f" ({top.seed_text()})" if top.seed_text() else "",
            f"  ·  {spend.calls} LLM calls" + (f" ({spend.failed} failed)" if spend.failed else ""),
            f", {spend.tokens} tokens, ${spend.cost_usd:.4f}  ·  {elapsed:.0f} s",
        )
        table = Table(show_header=True, header_style="bold", expand=False, box=None)
        table.add_column("experiment")
        table.add_column("plan", max_width=60, overflow="ellipsis")
        table.add_column("step")
        with self._lock:
            for eid, (title, step) in sorted(self._steps.items()):
                table.add_row(eid, title, step)
            latest = self._headline
        return Group(head, Text(latest, style="dim"), table)


def describe(kind: str, data: dict[str, Any]) -> str:
    """One progress event as a line a person reads in a log file or a CI job."""
    if kind == "seed":
        return data.get("step", "evaluating the seed kernel")
    if kind == "seed_done":
        return f"seed {data.get('kernel')}: {num(data.get('geomean_us'))} µs"
    if kind == "generation":
        return f"generation {data['generation']}: selecting a base and a reference"
    if kind == "selected":
        return f"generation {data['generation']}: base {data.get('base_id')}, reference {data.get('reference_id') or '-'}"
    if kind == "planned":
        plans = data.get("plans") or []
        return f"generation {data['generation']}: {len(plans)} experiments: " + "; ".join(str(p) for p in plans)
    if kind == "experiment_step":
        return f"{data['experiment']}: {data['step']}"
    if kind == "experiment_done":
        timed = f" {num(data['geomean_us'])} µs ({data.get('kernel')})" if data.get("geomean_us") else ""
        return f"{data['experiment']}: done, {data['status']}{timed}"
    if kind == "generation_done":
        best = f"best {data.get('best')} {num(data.get('best_geomean_us'))} µs" if data.get("best") else "no best yet"
        line = f"generation {data['generation']} done: {best}" + (", improved" if data.get("improved") else "")
        return line + (f"; stopping: {data['stop_reason']}" if data.get("stop_reason") else "")
    if kind == "awaiting_approval":
        return f"generation {data['generation']}: {len(data.get('plans') or [])} plans await approval (kernel-scientist chat)"
    if kind == "resume":
        return f"resuming at {', '.join(data.get('next', []))}"
    shown = {k: num(v) if isinstance(v, float) else v for k, v in data.items() if k != "run"}
    return kind + "".join(f" {k}={v}" for k, v in shown.items())


class LineProgress:
    """A line per run step, for a log file, a pipe or `--plain`: the live panel only draws on a terminal."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._lock = threading.Lock()

    def event(self, kind: str, **data: Any) -> None:
        line = describe(kind, data)
        with self._lock:  # experiments report from worker threads
            self.console.print(f"{time.strftime('%H:%M:%S')} {line}", markup=False, highlight=False, soft_wrap=True)


def leaderboard_table(archive: Archive, limit: int = 10, width: int = 120) -> Table:
    """The best kernels; the summary column only where the terminal is wide enough for it."""
    over_seed = seed_ratios(archive)
    base = baselines(archive)
    table = Table(title="Leaderboard", header_style="bold", caption=VERIFIED_NOTE, caption_justify="left")
    for name in ("#", "kernel", "gen", "origin", "parents", "geomean µs [95%]", "vs seed", "vs PyTorch"):
        table.add_column(name, no_wrap=True)
    # The other columns take about 100 characters with their borders; the summary gets what is left.
    wide = width >= 120
    if wide:
        table.add_column("summary", overflow="ellipsis", no_wrap=True, max_width=width - 100)
    for rank, k in archive.ranked(limit):
        vs_seed = seed_ratio_text(*over_seed(k))
        table.add_row(
            str(rank),
            k.id,
            str(k.generation),
            k.origin,
            ",".join(k.parents) or "-",
            num_interval(k.geomean_us, k.geomean_ci_us) + (" busy" if k.noisy else ""),
            vs_seed,
            ratio(base.vs_reference(k)),
            *([k.summary] if wide else []),
        )
    return table
