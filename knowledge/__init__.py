"""The knowledge base: GPU literature and experiment findings in Chroma.

    from knowledge import KnowledgeBase, Finding

    kb = KnowledgeBase()                       # $KS_KB_DIR or ~/.kernel-scientist/knowledge
    kb.ingest(["docs/", "paper.pdf"], target="amd")
    for hit in kb.search("LDS bank conflicts", k=5, target="amd"):
        print(hit.citation(), hit.score)
    kb.add_finding(Finding(hypothesis=..., change=..., kernel_id="k12", problem="fp8_gemm", target="amd"))
    context = kb.research_context("raise MFMA utilisation", target="amd", problem="fp8_gemm")

Importing this package is cheap: Chroma, LangChain and the embedding model load on
first use (the CLI imports it for every command).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from knowledge.base import KnowledgeBase
    from knowledge.findings import FindingsMemory
    from knowledge.models import (
        FileResult,
        Finding,
        FindingHit,
        Hit,
        IngestReport,
        KBStats,
        ResearchContext,
        SourceInfo,
    )

# Even the pydantic models load on first use: `kernel-scientist --help` imports this package.
_MODELS = {"FileResult", "Finding", "FindingHit", "Hit", "IngestReport", "KBStats", "ResearchContext", "SourceInfo"}

__all__ = [
    "FileResult",
    "Finding",
    "FindingHit",
    "FindingsMemory",
    "Hit",
    "IngestReport",
    "KBStats",
    "KnowledgeBase",
    "ResearchContext",
    "SourceInfo",
]


def __getattr__(name: str) -> Any:
    if name in _MODELS:
        from knowledge import models

        return getattr(models, name)
    if name == "KnowledgeBase":
        from knowledge.base import KnowledgeBase

        return KnowledgeBase
    if name == "FindingsMemory":
        from knowledge.findings import FindingsMemory

        return FindingsMemory
    raise AttributeError(f"module 'knowledge' has no attribute {name!r}")
