"""The persistent Chroma store: one client per folder, collections with our embedding function.

Chroma's telemetry is switched off and every collection is bound to the registered
MiniLM function, so nothing here ever reaches the network. A generation counter in
`state.json` changes on every write; searchers compare it to know when their
in-memory keyword index is stale, even when another process wrote.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import chromadb
from chromadb.config import Settings

from knowledge.embedding import MiniLMEmbeddingFunction
from knowledge.paths import FINDINGS, KB_DIR_ENV, LITERATURE, WORKSPACE_ENV, default_store_path

__all__ = ["FINDINGS", "KB_DIR_ENV", "LITERATURE", "WORKSPACE_ENV", "Collection", "default_store_path", "open_client"]

log = logging.getLogger(__name__)

_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def open_client(path: Path) -> Any:
    """One Chroma client per folder and process (Chroma refuses two with different settings)."""
    path = Path(path).expanduser().resolve()
    key = str(path)
    with _clients_lock:
        if key not in _clients:
            path.mkdir(parents=True, exist_ok=True)
            settings = Settings(anonymized_telemetry=False, allow_reset=True, is_persistent=True)
            _clients[key] = chromadb.PersistentClient(path=key, settings=settings)
        return _clients[key]


class Collection:
    """A Chroma collection of chunks (or findings) with the calls the knowledge base needs."""

    def __init__(self, path: Path, name: str, doc_max_tokens: int = 256) -> None:
        self.path = Path(path).expanduser().resolve()
        self.name = name
        self.client = open_client(self.path)
        self.embedding_function = MiniLMEmbeddingFunction(max_tokens=doc_max_tokens)
        self.col = self.client.get_or_create_collection(
            name=name,
            embedding_function=self.embedding_function,
            configuration={"hnsw": {"space": "cosine"}},
        )
        self._state_file = self.path / f"{name}.state.json"

    # -- change tracking -------------------------------------------------------------

    def generation(self) -> str:
        try:
            return str(json.loads(self._state_file.read_text()).get("generation", ""))
        except (OSError, ValueError):
            return ""

    def _touch(self) -> None:
        tmp = self._state_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"generation": uuid.uuid4().hex}))
        os.replace(tmp, self._state_file)

    # -- writes ----------------------------------------------------------------------

    def upsert(self, ids: list[str], documents: list[str], metadatas: list[dict], embeddings: Any) -> None:
        step = max(1, int(self.client.get_max_batch_size()))
        for i in range(0, len(ids), step):
            self.col.upsert(
                ids=ids[i : i + step],
                documents=documents[i : i + step],
                metadatas=metadatas[i : i + step],
                embeddings=embeddings[i : i + step],
            )
        self._touch()

    def delete(self, ids: list[str] | None = None, where: dict | None = None) -> None:
        if ids is not None and not ids:
            return
        self.col.delete(ids=ids, where=where)
        self._touch()

    # -- reads -----------------------------------------------------------------------

    def count(self) -> int:
        return int(self.col.count())

    def get(
        self,
        where: dict | None = None,
        ids: list[str] | None = None,
        include: tuple[str, ...] = ("metadatas",),
        limit: int | None = None,
    ) -> dict[str, Any]:
        return self.col.get(ids=ids, where=where, include=list(include), limit=limit)

    def all_records(self) -> tuple[list[str], list[str], list[dict]]:
        """Every id, document and metadata (paged, so a large store does not hit SQLite's limits)."""
        ids: list[str] = []
        docs: list[str] = []
        metas: list[dict] = []
        total, page = self.count(), 5000
        for offset in range(0, total, page):
            got = self.col.get(include=["documents", "metadatas"], limit=page, offset=offset)
            ids += got["ids"]
            docs += got["documents"]
            metas += got["metadatas"]
        return ids, docs, metas

    def query(self, embedding: Any, n: int, where: dict | None = None) -> list[tuple[str, float]]:
        """(id, cosine similarity) of the n nearest chunks, best first."""
        total = self.count()
        if total == 0 or n <= 0:
            return []
        got = self.col.query(
            query_embeddings=[embedding], n_results=min(n, total), where=where, include=["distances"]
        )
        return [(cid, 1.0 - float(d)) for cid, d in zip(got["ids"][0], got["distances"][0], strict=True)]

    def embeddings(self, ids: list[str]) -> dict[str, Any]:
        """The stored vectors of these ids (those that exist)."""
        if not ids:
            return {}
        got = self.col.get(ids=ids, include=["embeddings"])
        return dict(zip(got["ids"], got["embeddings"], strict=True))
