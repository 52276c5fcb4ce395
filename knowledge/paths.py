"""Where a store lives and what its collections are called: apart from knowledge/store.py, which
imports Chroma, so that commands that only read a store's statistics need not."""

from __future__ import annotations

import os
from pathlib import Path

KB_DIR_ENV = "KS_KB_DIR"
WORKSPACE_ENV = "KS_WORKSPACE"
LITERATURE = "literature"
FINDINGS = "findings"


def default_store_path() -> Path:
    """$KS_KB_DIR, else <workspace>/knowledge where the workspace is $KS_WORKSPACE or ~/.kernel-scientist."""
    if os.environ.get(KB_DIR_ENV):
        return Path(os.environ[KB_DIR_ENV]).expanduser()
    workspace = Path(os.environ.get(WORKSPACE_ENV) or Path.home() / ".kernel-scientist").expanduser()
    return workspace / "knowledge"
