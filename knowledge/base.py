"""KnowledgeBase: ingest documents into the store, search them, keep the store tidy."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.chunking import (
    CHUNK_OVERLAP,
    CHUNK_SIZE,
    CHUNKER_VERSION,
    chunk_document,
    embedding_text,
    keyword_text,
)
from knowledge.embedding import get_embedder
from knowledge.loaders import LoadError, kind_of, load_document
from knowledge.models import (
    FileResult,
    FindingHit,
    Hit,
    IngestReport,
    KBStats,
    ResearchContext,
    SearchMode,
    SourceInfo,
    Target,
    utc_now,
)
from knowledge.primer import PREFIX as PRIMER_PREFIX
from knowledge.primer import ensure_primer
from knowledge.retrieval import HybridRetriever
from knowledge.stats import make_stats, source_infos
from knowledge.store import LITERATURE, Collection, default_store_path
from knowledge.targets import (
    TAGGER_VERSION,
    infer_targets,
    matches_target,
    parse_targets,
    target_metadata,
    target_where,
)

if TYPE_CHECKING:
    from knowledge.findings import FindingsMemory
    from knowledge.models import Finding

log = logging.getLogger(__name__)

PathLike = str | Path
ProgressCallback = Callable[[int, int, FileResult], None]

# Word pieces of each chunk that MiniLM embeds. Ingestion time is linear in it and a 2-core
# CPU embeds about 1,000-2,600 a second, so the dense side sees the section path and the
# chunk's first sentences (about 50 words), while BM25 indexes every word. 64 kept hybrid
# recall@5 at its best on bench/kb_questions.yml with cold ingestion near 15 s; raise it
# (up to 256) where ingestion time matters less.
DOC_MAX_TOKENS = 64

_SKIP_DIRS = {"__pycache__", "node_modules"}

# research_context's relevance floor: the cosine similarity of MiniLM vectors (query against a chunk's
# section path and first words) below which a chunk is not shown. Chosen on the primer (see
# docs/BENCHMARKS.md, "Prompt audit (issue 15)"): questions a primer section answers score above it,
# questions about another target's hardware below.
RELEVANCE_FLOOR = 0.3


def chunk_id(source: str, index: int) -> str:
    """Stable across runs: the same file, cut the same way, gets the same ids (upserts are idempotent)."""
    return f"{hashlib.sha1(source.encode()).hexdigest()[:16]}-{index:05d}"


def source_of(path: Path) -> str:
    return str(path.expanduser().resolve())


def _keyword_text(document: str, meta: dict) -> str:
    return keyword_text(meta.get("title", ""), meta.get("section", ""), document, meta.get("source_name", ""))


class KnowledgeBase:
    """GPU literature in a persistent Chroma store, searched by dense + keyword retrieval.

    `path` defaults to $KS_KB_DIR or ~/.kernel-scientist/knowledge. A new store receives the
    project's primer (MI300/CDNA3 and Hopper essentials) on first use unless `primer=False`.
    """

    def __init__(
        self,
        path: PathLike | None = None,
        *,
        primer: bool = True,
        chunk_size: int = CHUNK_SIZE,
        chunk_overlap: int = CHUNK_OVERLAP,
        doc_max_tokens: int = DOC_MAX_TOKENS,
        device: str = "cpu",
    ) -> None:
        self.path = Path(path).expanduser().resolve() if path else default_store_path().resolve()
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.doc_max_tokens = doc_max_tokens
        self.literature = Collection(self.path, LITERATURE, doc_max_tokens)
        self.embedder = get_embedder(device)
        self.retriever = HybridRetriever(self.literature, _keyword_text, self.embedder.embed_query)
        self._findings: FindingsMemory | None = None
        if primer:
            ensure_primer(self)

    # -- ingestion -------------------------------------------------------------------

    def collect(self, paths: Iterable[PathLike]) -> tuple[list[Path], list[str]]:
        """Files to ingest (folders walked in sorted order) and the files skipped for their type."""
        files: list[Path] = []
        skipped: list[str] = []
        for raw in paths:
            path = Path(raw).expanduser()
            if path.is_dir():
                for item in sorted(path.rglob("*")):
                    rel = item.relative_to(path).parts
                    if any(p.startswith(".") or p in _SKIP_DIRS for p in rel) or not item.is_file():
                        continue
                    if kind_of(item):
                        files.append(item)
                    else:
                        skipped.append(str(item))
            else:
                files.append(path)  # a missing or unsupported file is reported, not skipped
        return list(dict.fromkeys(files)), skipped

    def ingest(
        self,
        paths: PathLike | Iterable[PathLike],
        target: str | list[str] | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Ingest files and folders. Unchanged files are skipped by content hash; changed ones replaced.
        `target` ('amd', 'nvidia', 'amd,nvidia' or 'generic') overrides the inferred tags.
        A bad file is reported in the result and never stops the others."""
        started = time.perf_counter()
        if isinstance(paths, (str, Path)):
            paths = [paths]
        targets = parse_targets(target)
        files, skipped = self.collect(paths)
        report = IngestReport(skipped=skipped)
        for n, path in enumerate(files, 1):
            result = self.ingest_file(path, targets=targets)
            report.files.append(result)
            if on_progress is not None:
                on_progress(n, len(files), result)
        report.seconds = time.perf_counter() - started
        log.info(
            "ingested %d files in %.1f s: %d added, %d updated, %d unchanged, %d failed",
            len(files),
            report.seconds,
            report.count("added"),
            report.count("updated"),
            report.count("unchanged"),
            report.count("failed"),
        )
        return report

    def _fingerprint(self, content_hash: str, targets: list[Target] | None) -> str:
        settings = f"{CHUNKER_VERSION}|{TAGGER_VERSION}|{self.chunk_size}|{self.chunk_overlap}|{self.doc_max_tokens}|{targets}"
        return hashlib.sha256(f"{content_hash}|{settings}".encode()).hexdigest()

    def ingest_file(
        self, path: Path, source: str | None = None, targets: list[Target] | None = None
    ) -> FileResult:
        source = source or source_of(path)
        try:
            if not path.exists():
                raise LoadError("no such file or directory")
            if path.is_dir():
                raise LoadError("is a folder (pass it to ingest, not ingest_file)")
            if kind_of(path) is None:
                raise LoadError(f"unsupported file type {path.suffix or '(none)'!r}")
            data = path.read_bytes()
            content_hash = hashlib.sha256(data).hexdigest()
            fingerprint = self._fingerprint(content_hash, targets)
            existing = self.literature.get(where={"source": source})
            old_ids = list(existing["ids"])
            metas = existing["metadatas"] or []
            if (
                old_ids
                and all(m.get("fingerprint") == fingerprint for m in metas)
                and len(old_ids) == metas[0].get("n_chunks")
            ):
                return FileResult(
                    source=source,
                    status="unchanged",
                    chunks=len(old_ids),
                    kind=metas[0].get("kind"),
                    targets=str(metas[0].get("targets", "")).split(","),
                )
            result = self._write(path, source, data, content_hash, fingerprint, targets, old_ids)
            log.debug("%s %s: %d chunks", result.status, source, result.chunks)
            return result
        except LoadError as exc:
            log.info("cannot ingest %s: %s", source, exc)
            return FileResult(source=source, status="failed", error=str(exc))
        except Exception as exc:  # noqa: BLE001 - one bad file must not stop a folder
            log.warning("cannot ingest %s: %s", source, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            return FileResult(source=source, status="failed", error=f"{type(exc).__name__}: {exc}")

    def _write(
        self,
        path: Path,
        source: str,
        data: bytes,
        content_hash: str,
        fingerprint: str,
        targets: list[Target] | None,
        old_ids: list[str],
    ) -> FileResult:
        doc = load_document(path, data)
        chunks = chunk_document(doc, self.chunk_size, self.chunk_overlap)
        if not chunks:
            raise LoadError("no text to index")
        tags = (
            targets
            or parse_targets(doc.front_matter.get("targets"))
            or infer_targets(f"{doc.title}\n{doc.text}")
        )
        now = utc_now()
        ids = [chunk_id(source, c.index) for c in chunks]
        vectors = self.embedder.embed(
            [embedding_text(doc.title, c.section, c.text) for c in chunks], max_tokens=self.doc_max_tokens
        )
        common = {
            "source": source,
            "source_name": path.name,
            "title": doc.title,
            "kind": doc.kind,
            "language": doc.language or "",
            "n_chunks": len(chunks),
            "content_hash": content_hash,
            "fingerprint": fingerprint,
            "ingested_at": now,
            "tags_given": bool(targets),  # by `--target`: kept when `refresh` ingests it again
            **target_metadata(tags),
        }
        metas = [{**common, "section": c.section, "chunk_index": c.index} for c in chunks]
        self.literature.upsert(ids, [c.text for c in chunks], metas, vectors)
        stale = sorted(set(old_ids) - set(ids))
        self.literature.delete(ids=stale)
        return FileResult(
            source=source,
            status="updated" if old_ids else "added",
            chunks=len(chunks),
            kind=doc.kind,
            targets=list(tags),
        )

    # -- removal ---------------------------------------------------------------------

    def sources(self) -> list[SourceInfo]:
        return source_infos(self.literature.get()["metadatas"] or [])

    def remove(self, source: PathLike) -> list[str]:
        """Delete a source: its exact name, a path to it, or a folder (every source under it).
        Returns the sources removed."""
        wanted = str(source)
        candidates = {wanted}
        if not wanted.startswith(PRIMER_PREFIX):
            candidates.add(source_of(Path(wanted)))
        known = [s.source for s in self.sources()]
        folder = source_of(Path(wanted)).rstrip("/") + "/"
        removed = [s for s in known if s in candidates or s.startswith(folder)]
        for s in removed:
            self.literature.delete(where={"source": s})
        log.info("removed %d sources for %s", len(removed), wanted)
        return removed

    def refresh(self, on_progress: ProgressCallback | None = None) -> IngestReport:
        """Ingest every source again from its file: a changed file is replaced, and one cut or tagged
        by an older version of the chunker or the tagger (a store from before the `cpu` tag) is cut
        and tagged anew; the rest are unchanged. Tags given with `--target` are kept (sources from
        before that was recorded are tagged as inferred). A file that no longer exists is reported as
        failed and kept (`remove --missing` deletes it); the primer refreshes itself."""
        started = time.perf_counter()
        report = IngestReport()
        infos = [s for s in self.sources() if not s.source.startswith(PRIMER_PREFIX)]
        given = self._sources_with_given_tags()
        for n, info in enumerate(infos, 1):
            path = Path(info.source)
            targets = parse_targets(",".join(info.targets)) if info.source in given else None
            result = self.ingest_file(path, source=info.source, targets=targets) if path.exists() else \
                FileResult(source=info.source, status="failed", error="the file no longer exists (kb remove --missing)")
            report.files.append(result)
            if on_progress is not None:
                on_progress(n, len(infos), result)
        report.seconds = time.perf_counter() - started
        return report

    def _sources_with_given_tags(self) -> set[str]:
        metas = self.literature.get(where={"tags_given": True})["metadatas"] or []
        return {str(m["source"]) for m in metas}

    def prune_missing(self) -> list[str]:
        """Delete the sources whose files no longer exist (primer sources are kept)."""
        gone = [
            s.source
            for s in self.sources()
            if not s.source.startswith(PRIMER_PREFIX) and not Path(s.source).exists()
        ]
        for s in gone:
            self.literature.delete(where={"source": s})
        return gone

    # -- search ----------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        target: str | None = None,
        mode: SearchMode = "hybrid",
        min_similarity: float | None = None,
    ) -> list[Hit]:
        """The k best chunks for a query. `target` (amd, nvidia, cpu) keeps that target's documents
        and generic ones; `min_similarity` (cosine, e.g. RELEVANCE_FLOOR) drops chunks less similar
        to the query than that, so fewer than k, or none, may come back."""
        where = target_where(target)  # also validates: one known target
        tags = parse_targets(target)
        tag = tags[0] if tags else None
        keep: Callable[[dict], bool] | None = (lambda m: matches_target(m, tag)) if tag else None
        ranked = self.retriever.search(query, k, mode=mode, where=where, keep=keep, min_similarity=min_similarity)
        hits = []
        for r in ranked:
            meta = r.metadata
            hits.append(
                Hit(
                    chunk_id=r.id,
                    text=r.document,
                    source=meta["source"],
                    title=meta.get("title", ""),
                    section=meta.get("section", ""),
                    kind=meta.get("kind", ""),
                    targets=str(meta.get("targets", "")).split(","),
                    score=r.score,
                    dense_rank=r.dense_rank,
                    keyword_rank=r.keyword_rank,
                    similarity=r.similarity,
                )
            )
        return hits

    # -- findings ----------------------------------------------------------------------

    @property
    def findings(self) -> FindingsMemory:
        if self._findings is None:
            from knowledge.findings import FindingsMemory

            self._findings = FindingsMemory(self.path, device=self.embedder.device)
        return self._findings

    def add_finding(self, finding: Finding) -> str:
        return self.findings.add(finding)

    def search_findings(
        self, query: str, k: int = 5, problem: str | None = None, target: str | None = None
    ) -> list[FindingHit]:
        return self.findings.search(query, k=k, problem=problem, target=target)

    def research_context(
        self,
        query: str,
        k: int = 5,
        k_findings: int = 5,
        target: str | None = None,
        problem: str | None = None,
        findings_target: str | None = None,
        min_similarity: float | None = RELEVANCE_FLOOR,
    ) -> ResearchContext:
        """Literature and earlier findings for the Researcher, in one call.
        `target` filters literature (amd/nvidia/cpu); `findings_target` and `problem` filter findings.
        Literature below `min_similarity` is left out, and so is a document's bare opening (Hit.hollow):
        none relevant is an answer the prompt states."""
        hits = self.search(query, k=k, target=target, min_similarity=min_similarity)
        return ResearchContext(
            query=query,
            literature=[hit for hit in hits if not hit.hollow],
            findings=self.search_findings(query, k=k_findings, problem=problem, target=findings_target),
        )

    # -- stats -------------------------------------------------------------------------

    def stats(self) -> KBStats:
        return make_stats(self.path, self.literature.count(), self.sources(), self.findings.count())
