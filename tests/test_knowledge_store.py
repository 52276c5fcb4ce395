"""Knowledge base with the real model: ingestion, idempotence, replacement, removal, search."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knowledge import KnowledgeBase
from knowledge.base import chunk_id
from tests.test_knowledge_loaders import make_pdf

pytestmark = pytest.mark.slow  # loads the embedding model

AMD_MD = """# MFMA on MI300

How to keep matrix cores busy on AMD CDNA3 GPUs with ROCm.

## Matrix instructions

The v_mfma_f32_32x32x16_fp8_fp8 instruction multiplies fp8 tiles on MI300X; a wavefront of
64 lanes issues it and the result lands in AGPRs. Compile with hipcc for gfx942.

## LDS layout

Pad each LDS row so that lanes of a wavefront reading a column hit different banks; bank
conflicts serialise the reads of the wavefront.
"""

NVIDIA_MD = """# Hopper GEMM notes

Notes on H100 kernels written with CUDA for sm_90a.

## Tensor cores

A warpgroup of four warps issues wgmma.mma_async; operand B comes from shared memory. Build
with nvcc and check the SASS for HGMMA instructions.

## Tensor memory accelerator

TMA copies tiles from global to shared memory asynchronously, tracked by an mbarrier; on
Hopper one thread issues the copy.
"""

RST = """Roofline basics
===============

Arithmetic intensity
--------------------

Divide the floating point operations by the bytes moved to get the arithmetic intensity of
a kernel; compare it with the ridge point of the machine.
"""

CUDA = """#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

HTML = """<html><head><title>Occupancy guide</title></head><body><h1>Occupancy guide</h1>
<h2>Registers limit occupancy</h2><p>Each extra register per thread can reduce the number of
resident warps; spills go to local memory.</p></body></html>"""


def _write_corpus(root: Path) -> Path:
    docs = root / "docs"
    (docs / "vendor").mkdir(parents=True)
    (docs / ".hidden").mkdir()
    (docs / "vendor" / "amd.md").write_text(AMD_MD)
    (docs / "vendor" / "nvidia.md").write_text(NVIDIA_MD)
    (docs / "roofline.rst").write_text(RST)
    (docs / "saxpy.cu").write_text(CUDA)
    (docs / "guide.html").write_text(HTML)
    (docs / "notes.txt").write_text(
        "\n\n".join(f"Note {i}: tune the tile size and measure again. " * 8 for i in range(8))
    )
    (docs / "paper.pdf").write_bytes(
        make_pdf(["Stream-K balances the tail of a GEMM across SMs."], title="Stream-K")
    )
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (docs / "data.bin").write_bytes(b"\x00\x01")
    (docs / ".hidden" / "secret.md").write_text("# hidden\n\nnot ingested")
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_corpus(tmp_path_factory.mktemp("kb-corpus"))


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> KnowledgeBase:
    base = KnowledgeBase(tmp_path_factory.mktemp("kb-store"), primer=False)
    base.first_report = base.ingest([corpus])  # type: ignore[attr-defined]
    return base


def test_ingest_reports_every_file_and_survives_a_bad_one(kb: KnowledgeBase, corpus: Path) -> None:
    report = kb.first_report  # type: ignore[attr-defined]
    status = {Path(f.source).name: f.status for f in report.files}
    assert status == {
        "amd.md": "added",
        "nvidia.md": "added",
        "roofline.rst": "added",
        "saxpy.cu": "added",
        "guide.html": "added",
        "notes.txt": "added",
        "paper.pdf": "added",
        "broken.pdf": "failed",
    }
    broken = next(f for f in report.files if f.status == "failed")
    assert "PDF" in (broken.error or "")
    assert [Path(s).name for s in report.skipped] == ["data.bin"]
    kinds = {Path(f.source).name: f.kind for f in report.files if f.status == "added"}
    assert kinds["roofline.rst"] == "rst" and kinds["saxpy.cu"] == "code" and kinds["paper.pdf"] == "pdf"


def test_chunk_metadata(kb: KnowledgeBase, corpus: Path) -> None:
    source = str((corpus / "vendor" / "amd.md").resolve())
    got = kb.literature.get(where={"source": source})
    metas = sorted(got["metadatas"], key=lambda m: m["chunk_index"])
    assert [m["section"] for m in metas] == ["", "Matrix instructions", "LDS layout"]
    first = metas[0]
    assert (
        first["title"] == "MFMA on MI300" and first["kind"] == "markdown" and first["source_name"] == "amd.md"
    )
    assert first["targets"] == "amd" and first["target_amd"] is True and first["target_nvidia"] is False
    assert first["ingested_at"].startswith("20") and len(first["content_hash"]) == 64
    assert sorted(got["ids"]) == [chunk_id(source, i) for i in range(3)]


def test_reingesting_unchanged_files_skips_them_without_the_model(
    kb: KnowledgeBase, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = kb.literature.count()

    def no_embedding(*args: object, **kwargs: object) -> None:
        raise AssertionError("unchanged files must not be embedded again")

    monkeypatch.setattr(kb.embedder, "embed", no_embedding)
    report = kb.ingest([corpus])
    assert {f.status for f in report.files if not f.source.endswith("broken.pdf")} == {"unchanged"}
    assert kb.literature.count() == before


def test_search_cites_source_and_section(kb: KnowledgeBase) -> None:
    hits = kb.search("which instruction does a warpgroup issue for tensor cores on Hopper", k=3)
    assert hits[0].source.endswith("nvidia.md") and hits[0].section == "Tensor cores"
    assert hits[0].citation().endswith("nvidia.md § Tensor cores")
    assert hits[0].title == "Hopper GEMM notes" and hits[0].targets == ["nvidia"]
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_exact_identifier_found_by_keyword_side(kb: KnowledgeBase) -> None:
    hits = kb.search("v_mfma_f32_32x32x16_fp8_fp8", k=3)
    assert hits[0].source.endswith("amd.md") and hits[0].section == "Matrix instructions"
    assert hits[0].keyword_rank == 1
    code = kb.search("saxpy kernel", k=2)
    assert code[0].source.endswith("saxpy.cu") and code[0].section.startswith("saxpy > lines 1-6")


def test_target_filter(kb: KnowledgeBase) -> None:
    for target, other in (("amd", "nvidia"), ("nvidia", "amd")):
        for mode in ("hybrid", "dense", "keyword"):
            hits = kb.search(
                "matrix multiply instructions and shared memory tiles", k=10, target=target, mode=mode
            )
            assert hits, (target, mode)
            assert all(other not in h.targets or target in h.targets for h in hits), (target, mode)
    generic = kb.search("arithmetic intensity", k=10, target="generic")
    assert generic and all(h.targets == ["generic"] for h in generic)
    with pytest.raises(ValueError):
        kb.search("x", target="intel")


def test_changed_file_is_replaced(kb: KnowledgeBase, corpus: Path) -> None:
    notes = corpus / "notes.txt"
    source = str(notes.resolve())
    old_ids = set(kb.literature.get(where={"source": source})["ids"])
    assert len(old_ids) > 1
    notes.write_text("Persistent kernels launch one block per multiprocessor and loop over tiles.")
    report = kb.ingest([notes])
    assert report.files[0].status == "updated" and report.files[0].chunks == 1
    got = kb.literature.get(where={"source": source}, include=("documents",))
    assert got["ids"] == [chunk_id(source, 0)] and "Persistent kernels" in got["documents"][0]
    assert all("Note 3" not in h.text for h in kb.search("tune the tile size and measure again", k=5))


def test_target_override_and_back(kb: KnowledgeBase, corpus: Path) -> None:
    html = corpus / "guide.html"
    assert kb.ingest([html], target="amd").files[0].status == "updated"
    assert kb.search("registers limit occupancy", k=1)[0].targets == ["amd"]
    assert kb.ingest([html], target="amd").files[0].status == "unchanged"
    assert kb.ingest([html]).files[0].status == "updated"  # inference again
    assert kb.search("registers limit occupancy", k=1)[0].targets == ["generic"]


def test_same_file_gets_same_ids_in_another_store(tmp_path: Path, corpus: Path, kb: KnowledgeBase) -> None:
    other = KnowledgeBase(tmp_path / "other", primer=False)
    other.ingest([corpus / "roofline.rst"])
    source = str((corpus / "roofline.rst").resolve())
    assert (
        other.literature.get(where={"source": source})["ids"]
        == kb.literature.get(where={"source": source})["ids"]
    )


def test_reopen_with_a_bare_chroma_client_uses_the_registered_function(kb: KnowledgeBase) -> None:
    from knowledge.embedding import EF_NAME
    from knowledge.store import open_client

    collection = open_client(kb.path).get_collection("literature")  # no embedding function passed
    assert collection.configuration["embedding_function"].name() == EF_NAME
    result = collection.query(query_texts=["wgmma warpgroup"], n_results=1)
    assert result["metadatas"][0][0]["source_name"] == "nvidia.md"


def test_remove_prune_and_stats(tmp_path: Path, corpus: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(corpus, docs)
    store = KnowledgeBase(tmp_path / "store", primer=False)
    store.ingest([docs / "vendor", docs / "roofline.rst", docs / "saxpy.cu"])
    stats = store.stats()
    assert len(stats.sources) == 4 and stats.by_kind == {"markdown": 2, "rst": 1, "code": 1}
    assert stats.by_target == {"amd": 1, "nvidia": 1, "generic": 2} and stats.findings == 0
    assert stats.chunks == sum(s.chunks for s in stats.sources)
    # A folder removes every source under it; a path removes one; unknown names remove nothing.
    assert sorted(Path(s).name for s in store.remove(docs / "vendor")) == ["amd.md", "nvidia.md"]
    assert store.remove("no/such/source") == []
    (docs / "saxpy.cu").unlink()
    assert [Path(s).name for s in store.prune_missing()] == ["saxpy.cu"]
    assert [Path(s.source).name for s in store.sources()] == ["roofline.rst"]
    assert store.remove(str(docs / "roofline.rst")) and store.literature.count() == 0
    assert store.search("anything") == []
