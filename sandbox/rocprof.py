"""Kernel timings from AMD's profilers, per call of the candidate.

Readers for what the ROCm profilers write:

- rocprofv3 `--kernel-trace --output-format csv`: `<prefix>_kernel_trace.csv`,
  one row per dispatch with Start_Timestamp/End_Timestamp in ns; `--marker-trace`
  adds `<prefix>_marker_api_trace.csv` with the ROCTx ranges;
- rocprofv3's default on ROCm 7 and later, a SQLite database (the "rocpd"
  schema: `rocpd_kernel_dispatch`, `rocpd_info_kernel_symbol`, `rocpd_region`,
  `rocpd_string`, and in newer schemas `rocpd_timestamp`), and the CSV that
  `rocpd convert` makes of it (a leading Guid column, other casing);
- `--stats` summaries (`<prefix>_kernel_stats.csv`) and the legacy rocprof's
  `results.stats.csv` (5 columns) and `results.csv` (BeginNs/EndNs).

Columns are always found by name, case-insensitively, never by position:
releases add and reorder them. `per_call_durations` turns a trace into one
duration per call of the candidate: the candidate's own kernels of one call
are summed, and the harness's fills, copies and L2 flush are left out.

Where no profiler is installed, timing falls back to device events
(`timing_method()` says which applies and why).

Worker side: the standard library only.
"""

from __future__ import annotations

import csv
import logging
import re
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# The ROCTx range the harness opens around each timed call of the candidate.
CALL_MARKER = "ks_call"

# Kernels the harness itself launches around a call: the NaN poisoning and
# L2 flush fills, input copies, and its own named helpers. PyTorch's names for
# these (FillFunctor, copy kernels) are matched loosely on purpose.
HARNESS_KERNELS: tuple[str, ...] = (
    r"FillFunctor",
    r"\bfill_kernel",
    r"copy_kernel",
    r"CopyFunctor",
    r"direct_copy_kernel",
    r"\bks_(flush|fill|poison)",
    r"l2_flush",
)


@dataclass
class KernelDispatch:
    name: str
    start_ns: int
    end_ns: int
    dispatch_id: int | None = None
    correlation_id: int | None = None
    queue_id: int | None = None
    stream_id: int | None = None
    agent_id: str | None = None
    kernel_id: int | None = None
    region: str | None = None  # the ROCTx range the dispatch was made in, where the trace says

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass
class Marker:
    name: str
    start_ns: int
    end_ns: int


@dataclass
class KernelStat:
    name: str
    calls: int
    total_ns: float
    average_ns: float
    percentage: float | None = None
    min_ns: float | None = None
    max_ns: float | None = None
    stddev_ns: float | None = None


@dataclass
class Trace:
    dispatches: list[KernelDispatch]
    markers: list[Marker] = field(default_factory=list)
    source: str = ""  # which format it came from


@dataclass
class CallDurations:
    """One duration per call of the candidate."""

    durations_ns: list[int]
    kernels_per_call: list[list[str]]
    method: str  # markers | regions | runs
    spans_ns: list[int] = field(default_factory=list)  # first start to last end: shows overlap and gaps
    excluded: dict[str, int] = field(default_factory=dict)  # harness kernels left out, by name
    notes: list[str] = field(default_factory=list)

    @property
    def durations_us(self) -> list[float]:
        return [d / 1000.0 for d in self.durations_ns]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["durations_us"] = self.durations_us
        return data


def clean_kernel_name(name: str) -> str:
    """Drop the decorations profilers add: ' [clone .kd]', a trailing '.kd'."""
    name = name.strip()
    name = re.sub(r"\s*\[clone \.kd\]$", "", name)
    return re.sub(r"\.kd$", "", name)


# -- CSV -------------------------------------------------------------------------------


def _norm(column: str) -> str:
    return re.sub(r"[^a-z0-9]", "", column.lower())


class _Row:
    """A CSV row addressed by any of several column names, case and '_' ignored."""

    def __init__(self, row: dict[str, str]) -> None:
        self._data = {_norm(k): v for k, v in row.items() if k is not None}

    def get(self, *names: str) -> str | None:
        for name in names:
            value = self._data.get(_norm(name))
            if value not in (None, ""):
                return value
        return None

    def int(self, *names: str) -> int | None:
        value = self.get(*names)
        if value is None:
            return None
        try:
            return int(float(value)) if not value.lstrip("-").isdigit() else int(value)
        except ValueError:
            return None

    def float(self, *names: str) -> float | None:
        value = self.get(*names)
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None


def _read_csv(path: Path) -> tuple[list[str], list[_Row]]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [_Row(r) for r in reader]
        return [_norm(c) for c in reader.fieldnames or []], rows


def read_kernel_trace_csv(path: str | Path) -> list[KernelDispatch]:
    """rocprofv3 kernel_trace.csv, its rocpd-converted form, or legacy rocprof results.csv."""
    columns, rows = _read_csv(Path(path))
    if not ({"starttimestamp", "beginns", "start"} & set(columns)):
        raise ValueError(f"{path}: not a kernel trace (columns: {', '.join(columns)})")
    dispatches = []
    for row in rows:
        start = row.int("Start_Timestamp", "BeginNs", "start")
        end = row.int("End_Timestamp", "EndNs", "end")
        name = row.get("Kernel_Name", "KernelName", "Name")
        if start is None or end is None or name is None:
            continue
        dispatches.append(
            KernelDispatch(
                name=clean_kernel_name(name),
                start_ns=start,
                end_ns=end,
                dispatch_id=row.int("Dispatch_Id", "Index", "Dispatch_ID"),
                correlation_id=row.int("Correlation_Id"),
                queue_id=row.int("Queue_Id", "queue-id"),
                stream_id=row.int("Stream_Id"),
                agent_id=row.get("Agent_Id", "gpu-id"),
                kernel_id=row.int("Kernel_Id"),
                region=row.get("Region", "Region_Name"),
            )
        )
    dispatches.sort(key=lambda d: (d.start_ns, d.end_ns))
    return dispatches


def read_marker_trace_csv(path: str | Path) -> list[Marker]:
    """rocprofv3 marker_api_trace.csv: ROCTx ranges (the range's message is in Function)."""
    _, rows = _read_csv(Path(path))
    markers = []
    for row in rows:
        start, end = row.int("Start_Timestamp", "start"), row.int("End_Timestamp", "end")
        name = row.get("Function", "Message", "Name")
        if start is None or end is None or name is None:
            continue
        markers.append(Marker(name=name, start_ns=start, end_ns=end))
    markers.sort(key=lambda m: m.start_ns)
    return markers


def read_stats_csv(path: str | Path) -> list[KernelStat]:
    """rocprofv3 `--stats` (8 columns) or legacy rocprof results.stats.csv (5 columns)."""
    columns, rows = _read_csv(Path(path))
    if not ({"name", "calls"} <= set(columns)):
        raise ValueError(f"{path}: not a stats file (columns: {', '.join(columns)})")
    stats = []
    for row in rows:
        name, calls = row.get("Name"), row.int("Calls")
        total = row.float("TotalDurationNs", "TotalDuration")
        if name is None or calls is None or total is None:
            continue
        average = row.float("AverageNs", "Average")
        stats.append(
            KernelStat(
                name=clean_kernel_name(name),
                calls=calls,
                total_ns=total,
                average_ns=average if average is not None else total / max(calls, 1),
                percentage=row.float("Percentage"),
                min_ns=row.float("MinNs"),
                max_ns=row.float("MaxNs"),
                stddev_ns=row.float("StdDev", "StdDevNs"),
            )
        )
    return stats


# -- SQLite (rocpd) ------------------------------------------------------------------------


def _objects(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]


def _pick(objects: Sequence[str], base: str) -> list[str]:
    """The plain view `base` if present, else the tables `base_<uuid>` (one per process)."""
    if base in objects:
        return [base]
    # Tables carry the writer's uuid as a suffix; nothing else may follow the base name.
    return [o for o in objects if o.startswith(base) and re.fullmatch(r"_?[0-9a-fA-F_-]+", o[len(base):])]


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def _lookup(conn: sqlite3.Connection, tables: Sequence[str], columns: Sequence[str]) -> dict[Any, tuple[Any, ...]]:
    """id -> the first of `columns` each table has (rocpd_string, rocpd_timestamp, ...)."""
    found: dict[Any, tuple[Any, ...]] = {}  # ids, looked up with whatever a row holds (None too)
    for table in tables:
        have = _columns(conn, table)
        wanted = [c for c in columns if c in have]
        if "id" not in have or not wanted:
            continue
        for row in conn.execute(f'SELECT id, {", ".join(wanted)} FROM "{table}"'):
            found[row[0]] = row[1:]
    return found


def read_rocpd(path: str | Path) -> Trace:
    """Kernel dispatches and ROCTx ranges from a rocprofv3 SQLite database.

    Handles both layouts of the rocpd schema: start/end stored in the dispatch
    and region rows, or as ids into `rocpd_timestamp`.
    """
    conn = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        objects = _objects(conn)
        strings = {k: v[0] for k, v in _lookup(conn, _pick(objects, "rocpd_string"), ["string"]).items()}
        stamps = {k: v[0] for k, v in _lookup(conn, _pick(objects, "rocpd_timestamp"), ["value"]).items()}
        symbols = _lookup(conn, _pick(objects, "rocpd_info_kernel_symbol"), ["kernel_name", "display_name"])

        def times(row: dict[str, Any]) -> tuple[int | None, int | None]:
            if row.get("start") is not None:
                return row["start"], row.get("end")
            return stamps.get(row.get("start_id")), stamps.get(row.get("end_id"))

        dispatches: list[KernelDispatch] = []
        for table in _pick(objects, "rocpd_kernel_dispatch"):
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cursor.description]
            for values in cursor:
                row = dict(zip(names, values, strict=True))
                start, end = times(row)
                if start is None or end is None:
                    continue
                symbol = symbols.get(row.get("kernel_id"), (None, None))
                name = symbol[0] or symbol[1] or f"kernel_{row.get('kernel_id')}"
                dispatches.append(
                    KernelDispatch(
                        name=clean_kernel_name(name),
                        start_ns=int(start),
                        end_ns=int(end),
                        dispatch_id=row.get("dispatch_id"),
                        queue_id=row.get("queue_id"),
                        stream_id=row.get("stream_id"),
                        agent_id=str(row["agent_id"]) if row.get("agent_id") is not None else None,
                        kernel_id=row.get("kernel_id"),
                        region=strings.get(row.get("region_name_id")),
                    )
                )
        markers: list[Marker] = []
        for table in _pick(objects, "rocpd_region"):
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cursor.description]
            for values in cursor:
                row = dict(zip(names, values, strict=True))
                start, end = times(row)
                name = strings.get(row.get("name_id"))
                if start is None or end is None or name is None:
                    continue
                markers.append(Marker(name=name, start_ns=int(start), end_ns=int(end)))
    finally:
        conn.close()
    dispatches.sort(key=lambda d: (d.start_ns, d.end_ns))
    markers.sort(key=lambda m: m.start_ns)
    return Trace(dispatches, markers, source="rocpd")


# -- finding and loading a profiler's output ---------------------------------------------


def load_trace(path: str | Path) -> Trace:
    """A kernel trace from a file (.db, .csv) or from a profiler's output folder."""
    path = Path(path)
    if path.is_dir():
        dbs = sorted(path.rglob("*.db"))
        if dbs:
            traces = [read_rocpd(db) for db in dbs]
            return Trace(
                [d for t in traces for d in t.dispatches],
                [m for t in traces for m in t.markers],
                source="rocpd",
            )
        kernel_csvs = sorted(path.rglob("*kernel_trace.csv")) or sorted(path.rglob("results.csv"))
        if not kernel_csvs:
            raise FileNotFoundError(f"{path}: no rocprof kernel trace (*.db, *kernel_trace.csv, results.csv)")
        dispatches = [d for f in kernel_csvs for d in read_kernel_trace_csv(f)]
        markers = [m for f in sorted(path.rglob("*marker_api_trace.csv")) for m in read_marker_trace_csv(f)]
        dispatches.sort(key=lambda d: (d.start_ns, d.end_ns))
        return Trace(dispatches, markers, source="csv")
    if path.suffix in (".db", ".sqlite", ".rpd"):
        return read_rocpd(path)
    return Trace(read_kernel_trace_csv(path), [], source="csv")


# -- per-call durations ------------------------------------------------------------------------


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(re.search(p, name) for p in patterns)


def per_call_durations(
    trace: Trace | Sequence[KernelDispatch] | str | Path,
    *,
    markers: Sequence[Marker] | None = None,
    marker_name: str = CALL_MARKER,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = HARNESS_KERNELS,
) -> CallDurations:
    """One duration per call of the candidate, in ns (and `durations_us`).

    A call's duration is the sum of its kernels' durations: time between the
    kernels of one call (launch gaps) is not counted, as with device events
    placed around the kernels. Kernels are the candidate's when they match
    `include` (regular expressions, e.g. the kernel names of its static report;
    everything if None) and do not match `exclude` (the harness's own fills,
    copies and flush). Calls are found, in order of preference:

    1. `regions`: dispatches the trace tags with the ROCTx range `marker_name`
       they were launched in (rocpd databases record this);
    2. `markers`: dispatches lying inside a `marker_name` range in time (the
       harness synchronises before closing the range, so they finish inside);
    3. `runs`: without markers, each maximal run of candidate kernels between
       harness kernels is one call (the L2 flush fill precedes every call).
    """
    if isinstance(trace, (str, Path)):
        trace = load_trace(trace)
    if isinstance(trace, Trace):
        dispatches = list(trace.dispatches)
        if markers is None:
            markers = trace.markers
    else:
        dispatches = list(trace)
    dispatches.sort(key=lambda d: (d.start_ns, d.end_ns))
    excluded: dict[str, int] = {}

    def own(d: KernelDispatch) -> bool:
        if _matches(d.name, exclude) or (include is not None and not _matches(d.name, include)):
            excluded[d.name] = excluded.get(d.name, 0) + 1
            return False
        return True

    def result(groups: list[list[KernelDispatch]], method: str, notes: list[str]) -> CallDurations:
        empty = sum(1 for g in groups if not g)
        if empty:
            notes.append(f"{empty} call(s) had no kernel of the candidate")
        return CallDurations(
            durations_ns=[sum(d.duration_ns for d in g) for g in groups],
            kernels_per_call=[[d.name for d in g] for g in groups],
            method=method,
            spans_ns=[(max(d.end_ns for d in g) - min(d.start_ns for d in g)) if g else 0 for g in groups],
            excluded=excluded,
            notes=notes,
        )

    tagged = [d for d in dispatches if d.region == marker_name]
    calls = [m for m in (markers or []) if m.name == marker_name]
    if tagged and calls:
        # Regions name the range, not its instance: split by the ranges' times.
        groups = [[d for d in tagged if m.start_ns <= d.start_ns <= m.end_ns and own(d)] for m in calls]
        return result(groups, "regions", [])
    if calls:
        groups = [
            [d for d in dispatches if m.start_ns <= d.start_ns and d.end_ns <= m.end_ns and own(d)]
            for m in calls
        ]
        return result(groups, "markers", [])
    groups = []
    current: list[KernelDispatch] = []
    for d in dispatches:
        if own(d):
            current.append(d)
        elif current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    notes = [] if markers else [f"no '{marker_name}' ranges in the trace: calls split at harness kernels"]
    return result(groups, "runs", notes)


def mean_call_from_stats(
    stats: Sequence[KernelStat],
    *,
    calls: int | None = None,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = HARNESS_KERNELS,
) -> dict[str, Any]:
    """The mean time per call from a `--stats` summary, which has no per-call detail.

    The candidate's kernels' total time divided by the number of calls (given,
    else the most calls of any of its kernels).
    """
    own = [
        s for s in stats
        if not _matches(s.name, exclude) and (include is None or _matches(s.name, include))
    ]
    if not own:
        return {"mean_ns": None, "calls": 0, "kernels": [], "note": "no kernel of the candidate in the stats"}
    count = calls or max(s.calls for s in own)
    total = sum(s.total_ns for s in own)
    return {
        "mean_ns": total / count,
        "mean_us": total / count / 1000.0,
        "calls": count,
        "kernels": [s.name for s in own],
        "note": "mean over calls from a stats summary; per-call durations need a kernel trace",
    }


# -- which timing applies here -----------------------------------------------------------------


def find_profiler() -> tuple[str, str] | None:
    """('rocprofv3', path) or ('rocprof', path) where installed, else None."""
    for tool in ("rocprofv3", "rocprof"):
        rocm = Path("/opt/rocm/bin") / tool
        path = shutil.which(tool) or (str(rocm) if rocm.is_file() else None)
        if path:
            return tool, path
    return None


def timing_method() -> dict[str, str]:
    """How kernels will be timed on this host, and why: for the verdict."""
    found = find_profiler()
    if found is None:
        return {
            "method": "device_events",
            "note": "no rocprofv3 or rocprof installed: timed with device events around each call",
        }
    tool, path = found
    if tool != "rocprofv3":
        return {
            "method": "device_events",
            "note": f"only the legacy {tool} is installed ({path}); naming calls needs rocprofv3: "
            "timed with device events around each call",
        }
    return {"method": tool, "path": path, "note": f"kernel durations from {tool} ({path})"}


def profile_command(argv: Sequence[str], out_dir: str | Path, tool: str = "rocprofv3") -> list[str]:
    """The profiler command line that runs `argv` and writes a kernel trace to `out_dir`.

    rocprofv3 writes CSV here (its ROCm 7 default is SQLite, which load_trace
    reads too) and records ROCTx ranges, so calls can be told apart.
    """
    out_dir = str(out_dir)
    if tool == "rocprofv3":
        return [
            "rocprofv3", "--kernel-trace", "--marker-trace", "--stats",
            "--output-format", "csv", "-d", out_dir, "-o", "ks", "--", *argv,
        ]
    if tool == "rocprof":
        return ["rocprof", "--stats", "--timestamp", "on", "-o", f"{out_dir}/results.csv", *argv]
    raise ValueError(f"unknown profiler {tool!r}")
