"""The project's own primer (knowledge/primer/*.md), loaded into a store on first use.

A new user's store is never empty: the Researcher always has the essentials of the
targets. The primer is ingested again only when its text (or the chunking settings)
change; a primer file the user removed stays removed until then.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.chunking import CHUNKER_VERSION

if TYPE_CHECKING:
    from knowledge.base import KnowledgeBase

log = logging.getLogger(__name__)

PRIMER_DIR = Path(__file__).resolve().parent / "primer"
PREFIX = "primer:"


def primer_files() -> list[Path]:
    files = sorted(PRIMER_DIR.glob("*.md"))
    if not files:  # an install that left out the package data
        log.warning("no primer files under %s", PRIMER_DIR)
    return files


def primer_digest(kb: KnowledgeBase) -> str:
    h = hashlib.sha256(f"{CHUNKER_VERSION}|{kb.chunk_size}|{kb.chunk_overlap}|{kb.doc_max_tokens}".encode())
    for path in primer_files():
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def ensure_primer(kb: KnowledgeBase) -> bool:
    """Ingest the primer if this store has not seen this version of it. Returns whether it did."""
    state = kb.path / "primer.json"
    digest = primer_digest(kb)
    try:
        if json.loads(state.read_text()).get("digest") == digest:
            return False
    except (OSError, ValueError):
        pass
    for path in primer_files():
        result = kb.ingest_file(path, source=PREFIX + path.name)
        if result.status == "failed":
            log.error("primer %s failed to load: %s", path.name, result.error)
    tmp = state.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"digest": digest}))
    os.replace(tmp, state)
    log.info("primer loaded into %s", kb.path)
    return True
