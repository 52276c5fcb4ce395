"""Hybrid retrieval: dense (MiniLM in Chroma) plus keyword (BM25), fused by reciprocal rank.

Dense search finds paraphrases; BM25 finds the exact identifiers kernel work is full
of (`v_mfma_f32_32x32x8f16`, `hipMemcpyAsync`, `__launch_bounds__`, `gfx942`), which a
small sentence model blurs. Reciprocal rank fusion needs no score calibration between
the two: each list contributes 1 / (k + rank).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from knowledge.models import SearchMode
from knowledge.store import Collection

log = logging.getLogger(__name__)

RRF_K = 60
CANDIDATES = 50

_STOPWORDS = frozenset(
    "a an and are as at be but by can do does for from has have how i if in into is it its of on or our so "
    "such that the their then there these this to was we what when where which while who why will with "
    "you your use used using about also more most should would could than them they not no any all each "
    "other".split()
)
_WORD = re.compile(r"[A-Za-z0-9]+(?:[_.][A-Za-z0-9]+)*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _stem(word: str) -> str:
    # Plurals only: enough to match "registers" with "register", never wrong on identifiers.
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and word.isalpha():
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Words and identifiers, lowercased; compound identifiers also yield their parts
    (`hipMemcpyAsync` -> hipmemcpyasync, hip, memcpy, async; `v_mfma_f32` -> v_mfma_f32, v, mfma, f32)."""
    tokens: list[str] = []
    for match in _WORD.finditer(text):
        raw = match.group(0)
        whole = raw.lower()
        if whole in _STOPWORDS:
            continue
        tokens.append(_stem(whole))
        parts = [p for piece in re.split(r"[_.]", raw) for p in _CAMEL.findall(piece)]
        if len(parts) > 1:
            tokens.extend(_stem(p.lower()) for p in parts if p.lower() not in _STOPWORDS)
    return tokens


class BM25:
    """Okapi BM25 over an inverted index (Lucene's idf, never negative)."""

    def __init__(self, documents: Sequence[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.n = len(documents)
        self.lengths = np.array([len(d) for d in documents], dtype=np.float32)
        self.avgdl = float(self.lengths.mean()) if self.n else 1.0
        postings: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        for i, doc in enumerate(documents):
            for term, tf in Counter(doc).items():
                docs, tfs = postings[term]
                docs.append(i)
                tfs.append(tf)
        self.postings = {
            t: (np.array(d, dtype=np.int64), np.array(f, dtype=np.float32)) for t, (d, f) in postings.items()
        }
        self.norm = self.k1 * (1 - self.b + self.b * self.lengths / max(self.avgdl, 1e-9))

    def scores(self, query: list[str]) -> np.ndarray:
        scores = np.zeros(self.n, dtype=np.float32)
        for term in set(query):
            posting = self.postings.get(term)
            if posting is None:
                continue
            docs, tf = posting
            idf = math.log(1 + (self.n - len(docs) + 0.5) / (len(docs) + 0.5))
            scores[docs] += idf * tf * (self.k1 + 1) / (tf + self.norm[docs])
        return scores


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    fused: dict[str, float] = defaultdict(float)
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            fused[item] += 1.0 / (k + rank)
    return fused


@dataclass
class Ranked:
    id: str
    score: float
    dense_rank: int | None
    keyword_rank: int | None
    document: str
    metadata: dict
    similarity: float | None = None  # cosine similarity of the query and the chunk's vector


@dataclass(frozen=True)
class _Snapshot:
    """Everything a search reads, swapped whole so a concurrent refresh never mixes two states."""

    generation: str | None
    ids: list[str]
    documents: list[str]
    metadatas: list[dict]
    position: dict[str, int]
    bm25: BM25


class HybridRetriever:
    """Dense + BM25 over one collection; the keyword index lives in memory, rebuilt when the store changes."""

    def __init__(
        self,
        collection: Collection,
        keyword_text: Callable[[str, dict], str],
        embed_query: Callable[[str], Any],
    ) -> None:
        self.collection = collection
        self.keyword_text = keyword_text
        self.embed_query = embed_query
        self._lock = threading.Lock()
        self._snapshot = _Snapshot(None, [], [], [], {}, BM25([]))

    def refresh(self) -> _Snapshot:
        with self._lock:
            snap = self._snapshot
            generation = self.collection.generation()
            if snap.generation == generation and len(snap.ids) == self.collection.count():
                return snap
            ids, docs, metas = self.collection.all_records()
            bm25 = BM25([tokenize(self.keyword_text(d, m)) for d, m in zip(docs, metas, strict=True)])
            self._snapshot = _Snapshot(generation, ids, docs, metas, {c: i for i, c in enumerate(ids)}, bm25)
            log.debug("keyword index of %s rebuilt: %d records", self.collection.name, len(ids))
            return self._snapshot

    @staticmethod
    def _keyword(snap: _Snapshot, query: str, n: int, keep: Callable[[dict], bool] | None) -> list[str]:
        scores = snap.bm25.scores(tokenize(query))
        if keep is not None:
            mask = np.array([keep(m) for m in snap.metadatas], dtype=bool)
            scores = np.where(mask, scores, 0.0)
        order = np.argsort(-scores, kind="stable")[:n]
        return [snap.ids[i] for i in order if scores[i] > 0]

    def search(
        self,
        query: str,
        k: int,
        mode: SearchMode = "hybrid",
        where: dict | None = None,
        keep: Callable[[dict], bool] | None = None,
        candidates: int = CANDIDATES,
        min_similarity: float | None = None,
    ) -> list[Ranked]:
        """`where` filters the dense side in Chroma; `keep` is the same filter on metadata in memory.
        `min_similarity` drops results whose vector's cosine similarity to the query's is below it
        (a relevance floor: fusion ranks by order only, so the best of nothing relevant would pass)."""
        snap = self.refresh()
        if not snap.ids or not query.strip():
            return []
        depth = max(candidates, k)
        dense: list[str] = []
        similarity: dict[str, float] = {}
        vector = None
        if mode in ("hybrid", "dense") or min_similarity is not None:
            vector = self.embed_query(query)
        if mode in ("hybrid", "dense"):
            nearest = self.collection.query(vector, depth, where)
            # Written after the snapshot: found at the next refresh.
            dense = [cid for cid, _ in nearest if cid in snap.position]
            similarity = {cid: sim for cid, sim in nearest}
        keyword = self._keyword(snap, query, depth, keep) if mode in ("hybrid", "keyword") else []
        fused = rrf([r for r in (dense, keyword) if r])
        d_rank = {cid: r for r, cid in enumerate(dense, 1)}
        k_rank = {cid: r for r, cid in enumerate(keyword, 1)}
        # Ties (same fused score) break by dense rank, then id: results are reproducible.
        order = sorted(fused, key=lambda cid: (-fused[cid], d_rank.get(cid, 10**9), cid))
        if min_similarity is not None and vector is not None:
            # A floor needs every candidate's similarity, those the keyword side alone found too.
            missing = [cid for cid in order if cid not in similarity]
            for cid, stored in self.collection.embeddings(missing).items():
                similarity[cid] = float(np.dot(np.asarray(stored, dtype=np.float32), vector))
            order = [cid for cid in order if similarity.get(cid, -1.0) >= min_similarity]
        return [
            Ranked(cid, fused[cid], d_rank.get(cid), k_rank.get(cid), *self._record(snap, cid), similarity.get(cid))
            for cid in order[:k]
        ]

    @staticmethod
    def _record(snap: _Snapshot, chunk_id: str) -> tuple[str, dict]:
        i = snap.position[chunk_id]
        return snap.documents[i], snap.metadatas[i]
