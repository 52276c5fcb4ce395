"""Retrieval quality on the shared ROCm blogs corpus (read in place; skipped where it is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.kb_bench import QUESTIONS, load_questions, quality
from knowledge import KnowledgeBase

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "rocm-blogs"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}"),
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    base = KnowledgeBase(tmp_path_factory.mktemp("kb-corpus-store"))
    report = base.ingest([CORPUS])
    assert report.count("failed") == 0 and report.count("added") == 15
    return base


def test_question_set_is_well_formed() -> None:
    questions = load_questions(QUESTIONS)
    assert len(questions) >= 30
    files = {p.name for p in CORPUS.iterdir()}
    assert {q["source"] for q in questions} <= files


def test_hybrid_beats_dense(kb: KnowledgeBase) -> None:
    questions = load_questions(QUESTIONS)
    dense = quality(kb, questions, "dense")
    hybrid = quality(kb, questions, "hybrid")
    assert hybrid["recall_at_5"] > dense["recall_at_5"], (dense, hybrid)
    assert hybrid["recall_at_5"] >= 0.9 and hybrid["mrr_at_5"] >= 0.75, hybrid


def test_every_expected_section_exists(kb: KnowledgeBase) -> None:
    """A typo in the question set would make a question unanswerable."""
    sections: dict[str, set[str]] = {}
    for meta in kb.literature.get()["metadatas"]:
        leaf = meta["section"].split(" > ")[-1] if meta["section"] else ""
        sections.setdefault(meta["source_name"], set()).add(leaf)
    for q in load_questions(QUESTIONS):
        assert set(q["sections"]) & sections[q["source"]], q
