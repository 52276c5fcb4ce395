"""Pydantic models at the knowledge base's boundary: what callers pass in and get back."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, Field

Target = Literal["amd", "nvidia", "cpu", "generic"]
TARGETS: tuple[Target, ...] = ("amd", "nvidia", "cpu", "generic")
DocKind = Literal["markdown", "rst", "html", "pdf", "text", "code"]
SearchMode = Literal["hybrid", "dense", "keyword"]


def utc_now(timespec: str = "seconds") -> str:
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def _precise_now() -> str:
    # Findings are listed in the order they happened; several can land within a second.
    return utc_now("microseconds")


# An excerpt this short under a document's title alone is its opening, not its content (Hit.hollow).
HOLLOW_CHARS = 300


class Hit(BaseModel):
    """One retrieved chunk of literature, with what is needed to cite it."""

    chunk_id: str
    text: str
    source: str
    title: str
    section: str = Field(
        description="Section path, e.g. 'Hipify tools > Hipify-perl'; '' before the first heading."
    )
    kind: str
    targets: list[str]
    score: float = Field(description="Fused score (reciprocal rank fusion); only its order is meaningful.")
    dense_rank: int | None = None
    keyword_rank: int | None = None
    similarity: float | None = Field(
        default=None, description="Cosine similarity of the query and the chunk (when the dense side saw it)."
    )

    @property
    def section_path(self) -> list[str]:
        return [part for part in self.section.split(" > ") if part] if self.section else []

    def citation(self) -> str:
        return f"{self.source} § {self.section}" if self.section else f"{self.source} § {self.title}"

    @property
    def hollow(self) -> bool:
        """A document's opening lines under its title alone (what the document is, not what it
        teaches): it matches a query through the title's words and fills a slot with nothing."""
        return len(self.section_path) <= 1 and len(self.text.strip()) < HOLLOW_CHARS

    def excerpt(self, max_chars: int) -> str:
        """The text up to `max_chars`, ending at a whole line (a bullet cut mid-word reads as a
        different claim), marked where something was left out."""
        if len(self.text) <= max_chars:
            return self.text
        cut = self.text.rfind("\n", 0, max_chars)
        return self.text[: cut if cut > max_chars // 2 else max_chars].rstrip() + "\n[...]"


class FileResult(BaseModel):
    source: str
    status: Literal["added", "updated", "unchanged", "failed"]
    chunks: int = 0
    kind: str | None = None
    targets: list[str] = Field(default_factory=list)
    error: str | None = None


class IngestReport(BaseModel):
    files: list[FileResult] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list, description="Files in folders with unsupported types.")
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "failed"]

    @property
    def chunks(self) -> int:
        return sum(f.chunks for f in self.files if f.status in ("added", "updated"))


# The embedding model every store is embedded with (knowledge/embedding.py loads it); here, where
# reading a store's statistics finds it without importing Chroma.
MODEL_NAME = "all-MiniLM-L6-v2"


class SourceInfo(BaseModel):
    source: str
    title: str
    kind: str
    targets: list[str]
    chunks: int
    ingested_at: str


class KBStats(BaseModel):
    path: str
    chunks: int
    sources: list[SourceInfo]
    by_kind: dict[str, int]
    by_target: dict[str, int]
    findings: int
    embedding_model: str


class Finding(BaseModel):
    """The written outcome of one experiment: what was tried, what was expected, what happened, why."""

    id: str | None = Field(
        default=None,
        description="Stable id, short within its run (its experiment's, g1e0); derived from the content when omitted.",
    )
    run_id: str | None = Field(
        default=None, description="The run it came from: with `id` it names the finding in the store (`store_key`)."
    )
    hypothesis: str
    change: str = Field(description="The code change that was made (the plan's rubric, summarised).")
    expected_speedup_min: float | None = None
    expected_speedup_max: float | None = None
    measured_speedup: float | None = Field(
        default=None, description="None when it did not build or was wrong."
    )
    explanation: str = Field(default="", description="The Critic's explanation of the result.")
    lesson: str = Field(default="", description="What the next experiments should take from it, kept apart.")
    kernel_id: str
    parent_id: str | None = None
    problem: str
    target: str = Field(description="Where it was measured: amd, nvidia, cpu or a device name.")
    status: str = Field(
        default="ok", description="The sandbox verdict's status (ok, build_error, wrong_output, ...)."
    )
    created_at: str = Field(default_factory=_precise_now)

    @property
    def store_key(self) -> str | None:
        """Its key in the findings store: unique across runs (`run:g1e0`), where its id is short."""
        return f"{self.run_id}:{self.id}" if self.run_id and self.id else self.id

    def label(self, run_id: str | None = None) -> str:
        """How prompts cite it: its short id within run `run_id` (or when it has no run), else the id
        with a tag of its run (`g1e0@3fa2`), so that two runs' g1e0 are not one citation."""
        if not self.id:
            return "-"
        if not self.run_id or self.run_id == run_id:
            return self.id
        return f"{self.id}@{hashlib.sha1(self.run_id.encode()).hexdigest()[:4]}"

    def render(self, explanation_chars: int | None = None) -> str:
        """The text that is embedded (whole) and shown to the Researcher (the explanation cut at a
        sentence within `explanation_chars`; the lesson on its own line, whole)."""
        expected = _speedup_range(self.expected_speedup_min, self.expected_speedup_max)
        measured = f"{self.measured_speedup:.3g}x" if self.measured_speedup is not None else "none"
        explanation = self.explanation if explanation_chars is None else concise(self.explanation, explanation_chars)
        lesson = f"Lesson: {self.lesson}\n" if self.lesson else ""
        return (
            f"Hypothesis: {self.hypothesis}\n"
            f"Change: {self.change}\n"
            f"Expected speed-up: {expected}; measured: {measured} (status {self.status})\n"
            f"Explanation: {explanation}\n"
            f"{lesson}"
            f"Kernel {self.kernel_id} (parent {self.parent_id or '-'}), "
            f"problem {self.problem}, target {self.target}"
        )


_SENTENCE_END = re.compile(r"(?<=[.;!?])\s")


def concise(text: str, max_chars: int) -> str:
    """`text` up to `max_chars`, ending after a whole sentence where one ends in the second half,
    marked with ' [...]' where something was left out."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    ends = [m.start() for m in _SENTENCE_END.finditer(text, 0, max_chars + 1) if m.start() > max_chars // 2]
    cut = ends[-1] if ends else text.rfind(" ", 0, max_chars)
    return text[: cut if cut > max_chars // 2 else max_chars].rstrip() + " [...]"


def _speedup_range(lo: float | None, hi: float | None) -> str:
    if lo is None and hi is None:
        return "not stated"
    if lo is None or hi is None or lo == hi:
        return f"{(lo if lo is not None else hi):.3g}x"
    return f"{lo:.3g}x-{hi:.3g}x"


class FindingHit(BaseModel):
    finding: Finding
    score: float


# How much of a finding's explanation a prompt shows: its first sentences (a model's explanation ran to
# about a kilobyte); the lesson, on its own line, is shown whole.
FINDING_EXPLANATION_CHARS = 400


class ResearchContext(BaseModel):
    """Literature and earlier findings retrieved together for the Researcher."""

    query: str
    literature: list[Hit]
    findings: list[FindingHit]

    def to_prompt(self, max_chars_per_hit: int = 1500, run_id: str | None = None,
                  explanation_chars: int = FINDING_EXPLANATION_CHARS) -> str:
        """Literature, then findings cited by their short ids (`run_id`: the run reading them, whose
        findings are cited by experiment id alone), each explanation cut to `explanation_chars`."""
        parts = ["## Literature"]
        if not self.literature:
            parts.append("No relevant literature found for this question (no excerpt passed the relevance floor).")
        for i, hit in enumerate(self.literature, 1):
            parts.append(f"[{i}] {hit.citation()}\n{hit.excerpt(max_chars_per_hit)}")
        parts.append("## Findings from earlier experiments")
        if not self.findings:
            parts.append("(none yet)")
        for i, fh in enumerate(self.findings, 1):
            # The finding's own id, so a citation means the same finding in every prompt and run.
            label = fh.finding.label(run_id) if fh.finding.id else str(i)
            parts.append(f"[F {label}] {fh.finding.render(explanation_chars)}")
        return "\n\n".join(parts)
