"""Findings memory: each experiment's outcome, searchable by the Researcher beside the literature.

Findings live in their own collection of the same store, so literature searches never
return them by accident, and they are searched with the same hybrid retrieval. The
whole Finding is kept as JSON in the metadata; the rendered text is what is embedded.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from knowledge.embedding import get_embedder
from knowledge.models import Finding, FindingHit, SearchMode
from knowledge.retrieval import HybridRetriever
from knowledge.store import FINDINGS, Collection, default_store_path

log = logging.getLogger(__name__)

# A finding is short; embed all of it (about 150 word pieces at most).
FINDING_MAX_TOKENS = 192


def finding_id(finding: Finding) -> str:
    """Derived from what identifies an experiment, so recording it twice updates one entry."""
    key = "|".join([finding.kernel_id, finding.problem, finding.target, finding.hypothesis, finding.change])
    return "f-" + hashlib.sha1(key.encode()).hexdigest()[:16]


def _where(problem: str | None, target: str | None) -> dict | None:
    clauses = [{k: v} for k, v in (("problem", problem), ("target", target)) if v]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class FindingsMemory:
    def __init__(self, path: str | Path | None = None, device: str = "cpu") -> None:
        self.path = Path(path).expanduser().resolve() if path else default_store_path().resolve()
        self.collection = Collection(self.path, FINDINGS, FINDING_MAX_TOKENS)
        self.embedder = get_embedder(device)
        self.retriever = HybridRetriever(self.collection, lambda doc, meta: doc, self.embedder.embed_query)

    def add(self, finding: Finding) -> str:
        """Store (or update) a finding under its `store_key` (the run and the short id) or, without
        an id, one derived from its content; returns the key."""
        if not finding.id:
            finding = finding.model_copy(update={"id": finding_id(finding)})
        fid = finding.store_key or finding_id(finding)
        meta: dict[str, str | float | bool] = {
            "run_id": finding.run_id or "",
            "problem": finding.problem,
            "target": finding.target,
            "kernel_id": finding.kernel_id,
            "status": finding.status,
            "created_at": finding.created_at,
            "json": finding.model_dump_json(),
        }
        if finding.measured_speedup is not None:
            meta["measured_speedup"] = float(finding.measured_speedup)
        text = finding.render()
        vector = self.embedder.embed([text], max_tokens=FINDING_MAX_TOKENS)
        self.collection.upsert([fid], [text], [meta], vector)
        log.info("finding %s recorded for %s on %s", fid, finding.problem, finding.target)
        return fid

    def get(self, fid: str) -> Finding | None:
        got = self.collection.get(ids=[fid])
        metas = got["metadatas"] or []
        return Finding.model_validate_json(metas[0]["json"]) if metas else None

    def history(self, problem: str | None = None, target: str | None = None) -> list[Finding]:
        got = self.collection.get(where=_where(problem, target))
        findings = [Finding.model_validate_json(m["json"]) for m in got["metadatas"] or []]
        return sorted(findings, key=lambda f: (f.created_at, f.id or ""))

    def remove(self, fid: str) -> None:
        self.collection.delete(ids=[fid])

    def count(self) -> int:
        return self.collection.count()

    def search(
        self,
        query: str,
        k: int = 5,
        problem: str | None = None,
        target: str | None = None,
        mode: SearchMode = "hybrid",
    ) -> list[FindingHit]:
        def keep(meta: dict) -> bool:
            return (not problem or meta.get("problem") == problem) and (
                not target or meta.get("target") == target
            )

        ranked = self.retriever.search(query, k, mode=mode, where=_where(problem, target), keep=keep)
        hits = []
        for r in ranked:
            hits.append(FindingHit(finding=Finding.model_validate_json(r.metadata["json"]), score=r.score))
        return hits
