"""Finding a run's directory: by id, by path, or the latest one. Kept free of LangGraph and the
roles so that `status`, `export` and `show` start at once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from graph.config import RunConfig


class RunError(RuntimeError):
    pass


def default_runs_dir() -> Path:
    return Path(os.environ.get("KS_RUNS_DIR", "runs"))


@dataclass
class RunHandle:
    run_id: str
    run_dir: Path
    config: RunConfig

    @property
    def archive_path(self) -> Path:
        return self.run_dir / "archive.sqlite"

    @property
    def checkpoint_path(self) -> Path:
        return self.run_dir / "checkpoints.sqlite"


def latest_run(runs_dir: Path | None = None) -> str:
    """The run whose archive changed last: what a user means by "the run" after starting one."""
    root = runs_dir or default_runs_dir()
    runs = [p.parent for p in root.glob("*/archive.sqlite") if (p.parent / "run.json").is_file()]
    if not runs:
        raise RunError(f"no runs in {root}; start one with `kernel-scientist run PROBLEM`")
    return str(max(runs, key=lambda d: (d / "archive.sqlite").stat().st_mtime))


# What names the latest run where a run must be given, as in `run --resume latest`: an option's value
# cannot be left out the way the other commands leave out RUN.
LATEST = "latest"


def open_run(run: str | Path | None, runs_dir: Path | None = None) -> RunHandle:
    """A run by id (under the runs directory) or by its directory; None or "latest": the latest run
    (run ids are PROBLEM-DATE-TIME-HEX, so no run is called that)."""
    if run is None or run == LATEST:
        run = latest_run(runs_dir)
    candidates = [Path(run), (runs_dir or default_runs_dir()) / str(run)]
    for run_dir in candidates:
        if (run_dir / "run.json").is_file() and (run_dir / "archive.sqlite").is_file():
            config = RunConfig.model_validate_json((run_dir / "run.json").read_text())
            return RunHandle(run_dir.name, run_dir, config)
    raise RunError(f"no run {run!r} (looked in {', '.join(str(c) for c in candidates)})")
