"""What a store holds, summarised from its chunks' metadata; and `kb stats` without Chroma.

Importing Chroma takes about a second (over two on a loaded 2-core machine), more than everything
else `kernel-scientist kb stats` does. The statistics are metadata only, which Chroma keeps in its
SQLite file, so `read_stats` reads that file itself (read-only). It answers only when the file is
as this reader expects and Chroma has applied every write it logged; otherwise it returns None
and the caller asks Chroma (a store not made yet, a primer never loaded, another Chroma layout).
A primer whose text changed since it was loaded is shown as loaded: the next command that opens
the store (ingest, search, a run) loads the new one (`kb stats` used to load it itself).
Standard library and the pydantic models only.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from knowledge.models import MODEL_NAME, KBStats, SourceInfo
from knowledge.paths import FINDINGS, LITERATURE

log = logging.getLogger(__name__)


class _Behind(Exception):
    """Chroma logged writes its metadata segment has not applied yet."""

_FIELDS = ("source", "title", "kind", "targets", "ingested_at")


def source_infos(metadatas: Iterable[Mapping[str, Any]]) -> list[SourceInfo]:
    """One entry per source, from its chunks' metadata."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for meta in metadatas:
        grouped.setdefault(meta["source"], []).append(meta)
    infos = []
    for source, metas in sorted(grouped.items()):
        first = metas[0]
        infos.append(
            SourceInfo(
                source=source,
                title=first.get("title", ""),
                kind=first.get("kind", ""),
                targets=str(first.get("targets", "")).split(","),
                chunks=len(metas),
                ingested_at=max(m.get("ingested_at", "") for m in metas),
            )
        )
    return infos


def make_stats(path: Path, chunks: int, sources: list[SourceInfo], findings: int) -> KBStats:
    by_kind: Counter[str] = Counter()
    by_target: Counter[str] = Counter()
    for s in sources:
        by_kind[s.kind] += 1
        for t in s.targets:
            by_target[t] += 1
    return KBStats(
        path=str(path),
        chunks=chunks,
        sources=sources,
        by_kind=dict(by_kind),
        by_target=dict(by_target),
        findings=findings,
        embedding_model=MODEL_NAME,
    )


def read_stats(path: Path) -> KBStats | None:
    """The store's statistics from Chroma's SQLite file, or None where Chroma must answer."""
    database = path / "chroma.sqlite3"
    if not database.is_file() or not (path / "primer.json").is_file():
        return None
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
            metadatas = _metadatas(conn, LITERATURE)
            findings = _metadatas(conn, FINDINGS)
    except (sqlite3.Error, _Behind) as exc:  # another layout, a locked or damaged file, unapplied writes
        log.debug("reading %s directly failed (%r); asking Chroma", database, exc)
        return None
    if metadatas is None:
        return None
    return make_stats(path, len(metadatas), source_infos(metadatas), len(findings or []))


def _metadatas(conn: sqlite3.Connection, collection: str) -> list[dict[str, Any]] | None:
    """The collection's chunks' metadata, or None when it has no metadata segment; _Behind when that
    segment has not applied every write in Chroma's log yet (Chroma would apply them before answering)."""
    row = conn.execute(
        "SELECT s.id, c.id FROM segments s JOIN collections c ON s.collection = c.id "
        "WHERE c.name = ? AND s.scope = 'METADATA'",
        (collection,),
    ).fetchone()
    if row is None:
        return None
    segment, collection_id = row
    applied = conn.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (segment,)).fetchone()
    logged = conn.execute(
        "SELECT MAX(seq_id) FROM embeddings_queue WHERE topic LIKE ?", (f"%/{collection_id}",)
    ).fetchone()[0]
    if logged is not None and (applied is None or not isinstance(applied[0], int) or applied[0] < logged):
        raise _Behind(collection)
    chunks: dict[int, dict[str, Any]] = {}
    for (chunk,) in conn.execute("SELECT id FROM embeddings WHERE segment_id = ?", (segment,)):
        chunks[chunk] = {}
    marks = ",".join("?" * len(_FIELDS))
    query = (
        "SELECT m.id, m.key, m.string_value FROM embedding_metadata m JOIN embeddings e ON m.id = e.id "
        f"WHERE e.segment_id = ? AND m.key IN ({marks})"
    )
    for chunk, key, value in conn.execute(query, (segment, *_FIELDS)):
        chunks[chunk][key] = value
    return list(chunks.values())
