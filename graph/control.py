"""Run control from outside the run's process: pause, resume, stop, approval mode, start and extend.

A chat (or any other process) writes flags into the run's archive; the running process reads them
at generation boundaries (when a generation's `collect` has stored its results), so a request never
lands in the middle of an experiment and the run's state stays whole:

- meta `control`: "run", "pause" (the run waits at the next boundary until it is "run" again) or
  "stop" (the run ends at the next boundary, resumable with `--resume RUN --more N`);
- meta `approval`: when true, the run stops before each generation's experiments until the plans
  are accepted, edited or rejected (`graph/approval.py`).

A run whose process has ended is started again with `kernel-scientist run --resume RUN` in a
detached process (`launch_run_process`); `extend_run` raises a finished run's generation budget and
reopens its LangGraph checkpoint so that the resumed run goes on to another generation.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from graph.archive import Archive
from graph.run_handle import RunHandle

if TYPE_CHECKING:  # graph.context imports LangGraph; only its type is needed here
    from graph.context import RunContext

log = logging.getLogger(__name__)

Control = Literal["run", "pause", "stop"]
CONTROLS: tuple[Control, ...] = ("run", "pause", "stop")
POLL_S = 0.25  # how often a paused run looks at its flags again
ACTIVE = ("starting", "running", "paused", "awaiting_approval")  # statuses of a run that has a process


def request(archive: Archive, control: Control) -> None:
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {', '.join(CONTROLS)}, not {control!r}")
    archive.set_meta("control", control)


def current(archive: Archive) -> Control:
    value = archive.get_meta("control", "run")
    return value if value in CONTROLS else "run"


def set_approval(archive: Archive, on: bool) -> None:
    archive.set_meta("approval", bool(on))


def approval_enabled(archive: Archive) -> bool:
    return bool(archive.get_meta("approval", False))


def process_alive(pid: int | None) -> bool:
    """Whether a process with this id runs (a zombie, ended but not reaped, does not)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        # The state letter follows the command name in parentheses, which may itself hold spaces.
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class RunStatus(BaseModel):
    """Where a run stands, as another process sees it in the archive."""

    status: str  # created, starting, running, paused, awaiting_approval, finished, interrupted
    alive: bool  # a process is executing the run
    pid: int | None = None
    control: Control = "run"
    approval: bool = False
    stop_reason: str | None = None
    generations_done: int = 0
    generation_budget: int | None = None
    pending_generation: int | None = None  # a generation whose plans await approval

    @property
    def running(self) -> bool:
        return self.alive and self.status in ACTIVE


def run_status(archive: Archive) -> RunStatus:
    status = archive.get_meta("status", "created")
    pid = archive.get_meta("pid")
    alive = status in ACTIVE and process_alive(pid)
    if status in ACTIVE and not alive:
        status = "interrupted"  # the process died without saying so (a kill, a crash)
    pending = archive.get_meta("pending_approval") if alive else None
    config = archive.get_meta("config") or {}
    generations = archive.generations()
    return RunStatus(
        status=status,
        alive=alive,
        pid=pid,
        control=current(archive),
        approval=approval_enabled(archive),
        stop_reason=archive.get_meta("stop_reason") if status == "finished" else None,
        generations_done=max((g["generation"] for g in generations), default=0),
        generation_budget=(config.get("budgets") or {}).get("generations"),
        pending_generation=pending.get("generation") if isinstance(pending, dict) else None,
    )


def at_boundary(ctx: RunContext, stop_reason: str | None = None) -> str | None:
    """Called when a generation has finished, with the budgets' stop reason if any: holds the run
    while a pause is requested, and returns a stop reason when a stop is requested. A stop request
    is consumed when the run stops, so that a resumed run goes on."""
    archive = ctx.archive
    if stop_reason is not None:
        if current(archive) == "stop":
            archive.set_meta("control", "run")
        return stop_reason
    paused = False
    try:
        while True:
            control = current(archive)
            if control == "stop" or ctx.stop.is_set():
                archive.set_meta("control", "run")
                return "stopped on request"
            if control != "pause":
                return None
            if not paused:
                paused = True
                archive.set_meta("status", "paused")
                ctx.progress.event("paused", run=ctx.run_id)
                log.info("run %s paused at a generation boundary", ctx.run_id)
            time.sleep(POLL_S)
    finally:
        if paused:
            archive.set_meta("status", "running")
            ctx.progress.event("resumed", run=ctx.run_id)


def pending_plans(archive: Archive) -> dict[str, Any] | None:
    """The plans awaiting review, if the run waits for one."""
    if archive.get_meta("status") != "awaiting_approval":
        return None
    pending = archive.get_meta("pending_approval")
    return pending if isinstance(pending, dict) else None


# -- starting and extending --------------------------------------------------------------------------


def _checkpoint_app(handle: RunHandle) -> tuple[Any, sqlite3.Connection, dict[str, Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.build import build_graph

    conn = sqlite3.connect(handle.checkpoint_path, check_same_thread=False)
    app = build_graph().compile(checkpointer=SqliteSaver(conn))
    return app, conn, {"configurable": {"thread_id": handle.run_id}}


def extend_run(handle: RunHandle, more: int) -> RunHandle:
    """Allow `more` generations beyond the last finished one and reopen a run that ended, so that
    `execute` goes on with the next generation. The budget lives in run.json and the archive."""
    if more < 1:
        raise ValueError("more generations must be at least 1")
    archive = Archive(handle.archive_path)
    try:
        done = max((g["generation"] for g in archive.generations()), default=0)
        budgets = handle.config.budgets.model_copy(update={"generations": done + more})
        config = handle.config.model_copy(update={"budgets": budgets})
        (handle.run_dir / "run.json").write_text(config.model_dump_json(indent=2))
        archive.set_meta("config", config.model_dump(mode="json"))
        archive.set_meta("control", "run")
    finally:
        archive.close()
    if handle.checkpoint_path.is_file():
        app, conn, cfg = _checkpoint_app(handle)
        try:
            snapshot = app.get_state(cfg)
            if not snapshot.next and snapshot.values.get("stop_reason"):
                if snapshot.values.get("generation", 1) <= 1:
                    raise ValueError("the run stopped before its first generation (its seed failed); start a new run")
                # As if `collect` had not stopped: its edge leads on to `select`.
                app.update_state(cfg, {"stop_reason": None, "stale": 0}, as_node="collect")
        finally:
            conn.close()
    log.info("run %s extended to %d generations", handle.run_id, done + more)
    return RunHandle(handle.run_id, handle.run_dir, config)


def launch_run_process(handle: RunHandle, more: int | None = None) -> subprocess.Popen[bytes]:
    """`kernel-scientist run --resume RUN` in a detached process (it outlives the chat), logging to
    the run's `run.log`. The process reads the run's configuration from run.json and API keys from
    the environment it inherits."""
    run_dir = handle.run_dir.resolve()
    command = [sys.executable, "-m", "graph.cli", "run", "--resume", str(run_dir), "--plain"]
    if more:
        command += ["--more", str(more)]
    root = str(Path(__file__).resolve().parent.parent)  # so `-m graph.cli` works from a source checkout
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    log_file = (run_dir / "run.log").open("ab")
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    finally:
        log_file.close()
