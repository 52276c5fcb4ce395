"""The population archive: one SQLite file per run holding every kernel, experiment and LLM call.

The archive is the run's memory outside LangGraph's checkpoints. It also memoises finished
steps (a Coder reply, a verdict) under stable keys, so a run resumed after a kill repeats no
LLM call and no evaluation that had finished. Other processes (a chat attached to a running
run, a report) read it and add directives while the run goes on; WAL mode lets them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kernels (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    generation INTEGER NOT NULL,
    experiment_id TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    origin TEXT NOT NULL,
    parents TEXT NOT NULL,
    plan TEXT,
    summary TEXT NOT NULL,
    source TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    geomean_us REAL,
    speedup REAL,
    benchmarks TEXT NOT NULL DEFAULT '{}',
    geomean_ci TEXT,
    noisy INTEGER NOT NULL DEFAULT 0,
    verdict TEXT,
    static TEXT,
    tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS kernels_sha ON kernels(sha256);
CREATE TABLE IF NOT EXISTS evaluations (sha256 TEXT PRIMARY KEY, verdict TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evaluation_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    seconds REAL NOT NULL,
    pid INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS experiments (
    id TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL,
    plan TEXT NOT NULL,
    base_id TEXT,
    reference_id TEXT,
    status TEXT NOT NULL,
    step TEXT NOT NULL DEFAULT '',
    kernel_id TEXT,
    finding TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS steps (key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS llm_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    step TEXT,
    role TEXT NOT NULL,
    model TEXT NOT NULL,
    method TEXT NOT NULL,
    ok INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    record TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS directives (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    active INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS generations (
    generation INTEGER PRIMARY KEY,
    base_id TEXT,
    reference_id TEXT,
    best_id TEXT,
    best_geomean_us REAL,
    experiments INTEGER NOT NULL,
    summary TEXT NOT NULL,
    finished_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS findings (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment_id TEXT UNIQUE,
    kernel_id TEXT,
    finding TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""


# Every kernel column but the verdict and static report, which only their own getters read.
_KERNEL_COLUMNS = (
    "id, generation, experiment_id, attempt, origin, parents, plan, summary, source, sha256, status, message,"
    " geomean_us, speedup, benchmarks, geomean_ci, noisy, tokens, cost_usd, created_at"
)
# Columns added after the first archives were written: (name, declaration), added where missing.
_ADDED_KERNEL_COLUMNS = (("geomean_ci", "TEXT"), ("noisy", "INTEGER NOT NULL DEFAULT 0"))


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class KernelRecord(BaseModel):
    """One member of the population, as prompts, the CLI and reports see it."""

    id: str
    generation: int
    experiment_id: str | None = None
    attempt: int = 0
    origin: str  # seed, llm, tune
    parents: list[str] = Field(default_factory=list)
    plan: dict[str, Any] | None = None
    summary: str
    source: str
    sha256: str
    status: str
    message: str = ""
    geomean_us: float | None = None
    geomean_ci_us: tuple[float, float] | None = None  # 95% interval of the geometric mean
    noisy: bool = False  # the host was contended while it was timed (sandbox/envinfo.py's host_state)
    speedup: float | None = None
    benchmarks: dict[str, float] = Field(default_factory=dict)  # shape label -> median µs
    tokens: int = 0
    cost_usd: float = 0.0
    created_at: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.geomean_us is not None


class ExperimentRecord(BaseModel):
    id: str
    generation: int
    idx: int
    kind: str
    plan: dict[str, Any]
    base_id: str | None = None
    reference_id: str | None = None
    status: str
    step: str = ""
    kernel_id: str | None = None
    finding: dict[str, Any] | None = None
    started_at: str
    finished_at: str | None = None


class Spend(BaseModel):
    calls: int = 0
    failed: int = 0  # calls that brought back no usable reply (an endpoint down, a reply that never validated)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Archive:
    """A run's SQLite archive. Safe to share between the threads of one run."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(SCHEMA)
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """An archive written before a column existed gets it (empty), so older runs still open."""
        have = {row["name"] for row in self._conn.execute("PRAGMA table_info(kernels)")}
        for name, declaration in _ADDED_KERNEL_COLUMNS:
            if name not in have:
                self._conn.execute(f"ALTER TABLE kernels ADD COLUMN {name} {declaration}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    # -- meta ------------------------------------------------------------------------

    def set_meta(self, key: str, value: Any) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0]["value"]) if rows else default

    # -- memoised steps --------------------------------------------------------------

    def get_step(self, key: str) -> Any | None:
        rows = self._query("SELECT value FROM steps WHERE key = ?", (key,))
        return json.loads(rows[0]["value"]) if rows else None

    def put_step(self, key: str, value: Any) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO steps VALUES (?, ?, ?)", (key, json.dumps(value), utc_now()))

    # -- evaluations -----------------------------------------------------------------

    def get_evaluation(self, sha256: str) -> str | None:
        rows = self._query("SELECT verdict FROM evaluations WHERE sha256 = ?", (sha256,))
        return rows[0]["verdict"] if rows else None

    def put_evaluation(self, sha256: str, verdict_json: str, status: str = "", seconds: float = 0.0) -> None:
        """Store a verdict, and log that the sandbox produced one (the log shows any repeat)."""
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO evaluations VALUES (?, ?, ?)", (sha256, verdict_json, utc_now()))
            c.execute(
                "INSERT INTO evaluation_log (sha256, status, seconds, pid, created_at) VALUES (?, ?, ?, ?, ?)",
                (sha256, status, seconds, os.getpid(), utc_now()),
            )

    def evaluation_log(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._query("SELECT * FROM evaluation_log ORDER BY seq")]

    def evaluation_count(self) -> int:
        return int(self._query("SELECT COUNT(*) AS n FROM evaluations")[0]["n"])

    # -- kernels ---------------------------------------------------------------------

    def add_kernel(self, record: KernelRecord, verdict_json: str | None = None, static: Any = None) -> KernelRecord:
        """Insert a kernel; its id is assigned here ("k<seq>", in insertion order) unless an
        attempt of the same experiment was already stored (then that one is returned)."""
        with self._tx() as c:
            if record.experiment_id is not None:
                row = c.execute(
                    f"SELECT {_KERNEL_COLUMNS} FROM kernels WHERE experiment_id = ? AND attempt = ?",
                    (record.experiment_id, record.attempt),
                ).fetchone()
                if row is not None:
                    return _kernel(row)
            seq = c.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM kernels").fetchone()[0]
            record = record.model_copy(update={"id": f"k{seq}", "created_at": record.created_at or utc_now()})
            c.execute(
                "INSERT INTO kernels (seq, id, generation, experiment_id, attempt, origin, parents, plan, summary,"
                " source, sha256, status, message, geomean_us, speedup, benchmarks, geomean_ci, noisy, verdict, static,"
                " tokens, cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    seq,
                    record.id,
                    record.generation,
                    record.experiment_id,
                    record.attempt,
                    record.origin,
                    json.dumps(record.parents),
                    json.dumps(record.plan) if record.plan is not None else None,
                    record.summary,
                    record.source,
                    record.sha256,
                    record.status,
                    record.message,
                    record.geomean_us,
                    record.speedup,
                    json.dumps(record.benchmarks),
                    json.dumps(record.geomean_ci_us) if record.geomean_ci_us else None,
                    int(record.noisy),
                    verdict_json,
                    json.dumps(static) if static is not None else None,
                    record.tokens,
                    record.cost_usd,
                    record.created_at,
                ),
            )
        return record

    def demote(self, kernel_id: str, status: str, message: str) -> None:
        """A kernel evaluated again whose new verdict is not `ok`: it leaves the leaderboard, saying why (its first
        verdict stays stored)."""
        with self._tx() as c:
            c.execute("UPDATE kernels SET status = ?, message = ? WHERE id = ?", (status, message, kernel_id))

    def kernel(self, kernel_id: str) -> KernelRecord | None:
        rows = self._query(f"SELECT {_KERNEL_COLUMNS} FROM kernels WHERE id = ?", (kernel_id,))
        return _kernel(rows[0]) if rows else None

    def kernel_verdict(self, kernel_id: str) -> str | None:
        rows = self._query("SELECT verdict FROM kernels WHERE id = ?", (kernel_id,))
        return rows[0]["verdict"] if rows else None

    def kernel_static(self, kernel_id: str) -> Any:
        rows = self._query("SELECT static FROM kernels WHERE id = ?", (kernel_id,))
        return json.loads(rows[0]["static"]) if rows and rows[0]["static"] else None

    def kernels(self) -> list[KernelRecord]:
        return [_kernel(r) for r in self._query(f"SELECT {_KERNEL_COLUMNS} FROM kernels ORDER BY seq")]

    def experiment_kernels(self, experiment_id: str) -> list[KernelRecord]:
        rows = self._query(
            f"SELECT {_KERNEL_COLUMNS} FROM kernels WHERE experiment_id = ? ORDER BY attempt", (experiment_id,)
        )
        return [_kernel(r) for r in rows]

    def leaderboard(self, limit: int | None = None) -> list[KernelRecord]:
        """Correct, timed kernels, fastest geometric mean first (ties: the older kernel)."""
        sql = f"SELECT {_KERNEL_COLUMNS} FROM kernels WHERE status = 'ok' AND geomean_us IS NOT NULL ORDER BY geomean_us, seq"
        rows = self._query(sql + (f" LIMIT {int(limit)}" if limit else ""))
        return [_kernel(r) for r in rows]

    def ranked(self, limit: int | None = None) -> list[tuple[int, KernelRecord]]:
        """(rank, kernel) of the leaderboard's top `limit`, and the seed at its own rank below them
        when it fell off: every leaderboard shows the yardstick the run started from."""
        rows = list(enumerate(self.leaderboard(), 1))
        top = rows[:limit] if limit else rows
        seed = next((row for row in rows if row[1].origin == "seed"), None)
        if seed is not None and seed not in top:
            top.append(seed)
        return top

    def best(self) -> KernelRecord | None:
        """The fastest single timing: the leaderboard's top, which a side-by-side timing may not confirm."""
        board = self.leaderboard(1)
        return board[0] if board else None

    def run_best(self) -> KernelRecord | None:
        """The kernel the run crowned (graph/verify.py: only a verified win replaces a best) at its
        last finished generation; the leaderboard's top before any generation finished."""
        rows = self._query("SELECT best_id FROM generations WHERE best_id IS NOT NULL ORDER BY generation DESC LIMIT 1")
        crowned = self.kernel(rows[0]["best_id"]) if rows else None
        return crowned if crowned is not None and crowned.ok else self.best()

    def seed(self) -> KernelRecord | None:
        rows = self._query(f"SELECT {_KERNEL_COLUMNS} FROM kernels WHERE origin = 'seed' ORDER BY seq LIMIT 1")
        return _kernel(rows[0]) if rows else None

    # -- experiments -----------------------------------------------------------------

    def start_experiment(self, record: ExperimentRecord) -> ExperimentRecord:
        """Register an experiment, or return the stored one when resuming."""
        with self._tx() as c:
            row = c.execute("SELECT * FROM experiments WHERE id = ?", (record.id,)).fetchone()
            if row is not None:
                return _experiment(row)
            c.execute(
                "INSERT INTO experiments (id, generation, idx, kind, plan, base_id, reference_id, status, step,"
                " started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.generation,
                    record.idx,
                    record.kind,
                    json.dumps(record.plan),
                    record.base_id,
                    record.reference_id,
                    record.status,
                    record.step,
                    record.started_at,
                ),
            )
        return record

    def update_experiment(self, experiment_id: str, **fields: Any) -> None:
        allowed = {"status", "step", "kernel_id", "finding", "finished_at"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot update experiment fields {sorted(unknown)}")
        if "finding" in fields and fields["finding"] is not None:
            fields["finding"] = json.dumps(fields["finding"])
        assignments = ", ".join(f"{name} = ?" for name in fields)
        with self._tx() as c:
            c.execute(f"UPDATE experiments SET {assignments} WHERE id = ?", (*fields.values(), experiment_id))

    def experiment(self, experiment_id: str) -> ExperimentRecord | None:
        rows = self._query("SELECT * FROM experiments WHERE id = ?", (experiment_id,))
        return _experiment(rows[0]) if rows else None

    def experiments(self, generation: int | None = None) -> list[ExperimentRecord]:
        if generation is None:
            rows = self._query("SELECT * FROM experiments ORDER BY generation, idx")
        else:
            rows = self._query("SELECT * FROM experiments WHERE generation = ? ORDER BY idx", (generation,))
        return [_experiment(r) for r in rows]

    # -- findings --------------------------------------------------------------------

    def add_finding(self, experiment_id: str, kernel_id: str | None, finding: dict[str, Any]) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO findings (experiment_id, kernel_id, finding, created_at) VALUES (?, ?, ?, ?)",
                (experiment_id, kernel_id, json.dumps(finding), utc_now()),
            )

    def findings(self, limit: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT finding FROM findings ORDER BY seq DESC" + (f" LIMIT {int(limit)}" if limit else "")
        return [json.loads(r["finding"]) for r in self._query(sql)]

    # -- LLM calls and spend -----------------------------------------------------------

    def add_llm_call(self, record: dict[str, Any], step: str | None = None) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO llm_calls (step, role, model, method, ok, input_tokens, output_tokens, cost_usd, record,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    step,
                    record.get("role", ""),
                    record.get("model", ""),
                    record.get("method", ""),
                    int(bool(record.get("ok"))),
                    int(record.get("input_tokens") or 0),
                    int(record.get("output_tokens") or 0),
                    float(record.get("cost_usd") or 0.0),
                    json.dumps(record, default=str),
                    utc_now(),
                ),
            )

    def llm_calls(self, role: str | None = None) -> list[dict[str, Any]]:
        """The calls' records, each with the step it belonged to ("g2e0/coder/0/0")."""
        if role is None:
            rows = self._query("SELECT step, record FROM llm_calls ORDER BY seq")
        else:
            rows = self._query("SELECT step, record FROM llm_calls WHERE role = ? ORDER BY seq", (role,))
        return [json.loads(r["record"]) | {"step": r["step"]} for r in rows]

    def spend(self, role: str | None = None) -> Spend:
        where, args = ("WHERE role = ?", (role,)) if role else ("", ())
        row = self._query(
            "SELECT COUNT(*) AS calls, COALESCE(SUM(1 - ok), 0) AS failed, COALESCE(SUM(input_tokens), 0) AS i,"
            f" COALESCE(SUM(output_tokens), 0) AS o, COALESCE(SUM(cost_usd), 0) AS c FROM llm_calls {where}",
            args,
        )[0]
        return Spend(
            calls=row["calls"], failed=row["failed"], input_tokens=row["i"], output_tokens=row["o"], cost_usd=row["c"]
        )

    def spend_by_role(self) -> dict[str, Spend]:
        rows = self._query(
            "SELECT role, COUNT(*) AS calls, SUM(1 - ok) AS failed, SUM(input_tokens) AS i, SUM(output_tokens) AS o,"
            " SUM(cost_usd) AS c FROM llm_calls GROUP BY role ORDER BY role"
        )
        return {
            r["role"]: Spend(
                calls=r["calls"], failed=r["failed"], input_tokens=r["i"], output_tokens=r["o"], cost_usd=r["c"]
            )
            for r in rows
        }

    # -- directives ------------------------------------------------------------------

    def add_directive(self, text: str) -> int:
        text = text.strip()
        if not text:
            raise ValueError("a directive needs some text")
        with self._tx() as c:
            cur = c.execute("INSERT INTO directives (text, created_at) VALUES (?, ?)", (text, utc_now()))
            return int(cur.lastrowid or 0)

    def retire_directive(self, seq: int) -> None:
        with self._tx() as c:
            c.execute("UPDATE directives SET active = 0 WHERE seq = ?", (seq,))

    def directives(self) -> list[str]:
        return [r["text"] for r in self._query("SELECT text FROM directives WHERE active = 1 ORDER BY seq")]

    # -- generations -----------------------------------------------------------------

    def finish_generation(self, generation: int, **summary: Any) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    generation,
                    summary.get("base_id"),
                    summary.get("reference_id"),
                    summary.get("best_id"),
                    summary.get("best_geomean_us"),
                    int(summary.get("experiments", 0)),
                    json.dumps(summary, default=str),
                    utc_now(),
                ),
            )

    def generations(self) -> list[dict[str, Any]]:
        rows = self._query("SELECT * FROM generations ORDER BY generation")
        return [dict(r) | {"summary": json.loads(r["summary"])} for r in rows]

    # -- for the chat and reports (issue 7) --------------------------------------------

    def directive_records(self, include_retired: bool = False) -> list[dict[str, Any]]:
        """Directives with their numbers (seq, to retire one), text, active flag and time."""
        where = "" if include_retired else " WHERE active = 1"
        sql = f"SELECT seq, text, active, created_at FROM directives{where} ORDER BY seq"
        return [dict(r) for r in self._query(sql)]


def _kernel(row: sqlite3.Row) -> KernelRecord:
    return KernelRecord(
        id=row["id"],
        generation=row["generation"],
        experiment_id=row["experiment_id"],
        attempt=row["attempt"],
        origin=row["origin"],
        parents=json.loads(row["parents"]),
        plan=json.loads(row["plan"]) if row["plan"] else None,
        summary=row["summary"],
        source=row["source"],
        sha256=row["sha256"],
        status=row["status"],
        message=row["message"],
        geomean_us=row["geomean_us"],
        speedup=row["speedup"],
        benchmarks=json.loads(row["benchmarks"]),
        geomean_ci_us=tuple(json.loads(row["geomean_ci"])) if row["geomean_ci"] else None,
        noisy=bool(row["noisy"]),
        tokens=row["tokens"],
        cost_usd=row["cost_usd"],
        created_at=row["created_at"],
    )


def _experiment(row: sqlite3.Row) -> ExperimentRecord:
    return ExperimentRecord(
        id=row["id"],
        generation=row["generation"],
        idx=row["idx"],
        kind=row["kind"],
        plan=json.loads(row["plan"]),
        base_id=row["base_id"],
        reference_id=row["reference_id"],
        status=row["status"],
        step=row["step"],
        kernel_id=row["kernel_id"],
        finding=json.loads(row["finding"]) if row["finding"] else None,
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )
