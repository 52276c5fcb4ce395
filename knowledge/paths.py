"""Where the store lives, without importing Chroma: a run records the resolved path in its run.json."""

from __future__ import annotations

import os
from pathlib import Path

KB_DIR_ENV = "KS_KB_DIR"
WORKSPACE_ENV = "KS_WORKSPACE"


def default_store_path() -> Path:
    """$KS_KB_DIR, else <workspace>/knowledge where the workspace is $KS_WORKSPACE or ~/.kernel-scientist."""
    if os.environ.get(KB_DIR_ENV):
        return Path(os.environ[KB_DIR_ENV]).expanduser()
    workspace = Path(os.environ.get(WORKSPACE_ENV) or Path.home() / ".kernel-scientist").expanduser()
    return workspace / "knowledge"
