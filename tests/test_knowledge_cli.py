"""`kb ingest | search | stats | remove` through Typer's test runner, on the sub-app alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knowledge.cli import kb_app

pytestmark = pytest.mark.slow  # loads the embedding model

runner = CliRunner()


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kb-cli-docs")
    (root / "mfma.md").write_text(
        "# MFMA\n\n## Fp8 instructions\n\nv_mfma_f32_32x32x16_fp8_fp8 on MI300X with ROCm, "
        "issued per wavefront; hipcc for gfx942.\n"
    )
    (root / "tma.md").write_text(
        "# TMA\n\n## Bulk copies\n\nOn H100 the tensor memory accelerator copies tiles "
        "with CUDA; nvcc for sm_90a; warps wait on an mbarrier.\n"
    )
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kb-cli-store")


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(kb_app, list(args))
    return result.exit_code, result.output


def test_ingest_then_unchanged(docs: Path, store: Path) -> None:
    code, out = invoke("ingest", str(docs), "--store", str(store))
    assert code == 0, out
    assert "2 added, 0 updated, 0 unchanged, 0 failed" in out
    # Not on a terminal, so no progress bar: a line per file as it is done.
    assert f"1/2 added {docs / 'mfma.md'}" in out and f"2/2 added {docs / 'tma.md'}" in out
    code, out = invoke("ingest", str(docs), "--store", str(store), "--json")
    assert code == 0
    report = json.loads(out)
    assert [f["status"] for f in report["files"]] == ["unchanged", "unchanged"]


def test_bad_file_is_reported_and_exit_code_is_1(docs: Path, store: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 broken")
    code, out = invoke(
        "ingest", str(bad), str(tmp_path / "missing.md"), str(docs / "mfma.md"), "--store", str(store)
    )
    assert code == 1
    assert "0 added, 0 updated, 1 unchanged, 2 failed" in out
    assert "bad.pdf: unreadable PDF" in out and "missing.md: no such file or directory" in out


def test_unknown_target_is_rejected(docs: Path, store: Path) -> None:
    code, out = invoke("ingest", str(docs), "--target", "intel", "--store", str(store))
    assert code == 2 and "unknown target" in out


def test_search_with_target_and_json(store: Path) -> None:
    code, out = invoke(
        "search", "tile copies with the tensor memory accelerator", "--store", str(store), "-k", "3"
    )
    assert code == 0
    assert "tma.md § Bulk copies" in out.replace("\n", "")
    code, out = invoke("search", "matrix instructions", "--target", "amd", "--json", "--store", str(store))
    assert code == 0
    hits = json.loads(out)["hits"]
    assert hits and all("nvidia" not in h["targets"] or "amd" in h["targets"] for h in hits)
    assert {"source", "section", "title", "text", "score"} <= set(hits[0])
    code, out = invoke("search", "x", "--mode", "fuzzy", "--store", str(store))
    assert code == 2


def test_stats(store: Path) -> None:
    code, out = invoke("stats", "--json", "--store", str(store))
    assert code == 0
    stats = json.loads(out)
    sources = {Path(s["source"]).name for s in stats["sources"]}
    assert {"mfma.md", "tma.md", "primer:mi300-cdna3.md"} <= sources  # the primer came with the new store
    assert stats["embedding_model"] == "all-MiniLM-L6-v2"
    from knowledge.primer import primer_files

    code, out = invoke("stats", "--store", str(store))
    assert code == 0 and f"{2 + len(primer_files())} sources" in out  # the two notes and every primer file


def test_stats_read_from_the_file_equal_chromas(store: Path) -> None:
    """`kb stats` reads Chroma's SQLite file itself (no Chroma import); the figures are Chroma's."""
    from knowledge import Finding, KnowledgeBase
    from knowledge.stats import read_stats

    kb = KnowledgeBase(store, primer=False)
    kb.add_finding(Finding(hypothesis="wider loads", change="float4", kernel_id="k1", problem="softmax", target="amd"))
    direct = read_stats(store.resolve())
    assert direct is not None and direct.findings == 1
    assert direct == kb.stats()


def test_remove(docs: Path, store: Path) -> None:
    code, out = invoke("remove", str(docs / "tma.md"), "--store", str(store))
    assert code == 0 and "1 sources removed" in out
    code, out = invoke("remove", "no-such-source", "--store", str(store))
    assert code == 1 and "no source matches" in out
    code, out = invoke("remove", "--store", str(store))
    assert code == 2


def test_refresh_retags_what_an_older_tagger_left_keeps_given_tags_and_names_missing_files(tmp_path: Path) -> None:
    from knowledge.base import KnowledgeBase

    docs, store = tmp_path / "docs", tmp_path / "store"
    docs.mkdir()
    (docs / "mfma.md").write_text("# MFMA\n\n## Fp8\n\nv_mfma_f32_32x32x16_fp8_fp8 on MI300X with ROCm; hipcc for gfx942.\n")
    (docs / "notes.md").write_text("# Notes\n\n## Tiles\n\nLDS tiles on MI300X, wavefronts of 64 lanes, ROCm.\n")
    (docs / "gone.md").write_text("# Gone\n\n## Text\n\nTensor cores on H100 with CUDA.\n")
    assert invoke("ingest", str(docs), "--store", str(store))[0] == 0
    assert invoke("ingest", str(docs / "notes.md"), "--target", "cpu", "--store", str(store))[0] == 0
    # What a store written by an older tagger holds: other settings in the fingerprint, other tags.
    kb = KnowledgeBase(store, primer=False)
    stale = kb.literature.get(where={"source": str(docs / "mfma.md")})
    kb.literature.col.update(ids=stale["ids"], metadatas=[
        {**m, "fingerprint": "tagger 1", "targets": "nvidia", "target_amd": False, "target_nvidia": True}
        for m in stale["metadatas"]])
    del kb
    (docs / "gone.md").unlink()
    code, out = invoke("refresh", "--store", str(store), "--json")
    assert code == 1, out  # a file is gone
    status = {Path(f["source"]).name: (f["status"], f.get("targets")) for f in json.loads(out)["files"]}
    assert status["mfma.md"] == ("updated", ["amd"])  # tagged anew
    assert status["notes.md"] == ("unchanged", ["cpu"])  # its given tag kept
    assert status["gone.md"][0] == "failed"
    code, out = invoke("stats", "--store", str(store), "--json")
    targets = {Path(s["source"]).name: s["targets"] for s in json.loads(out)["sources"]}
    assert targets["mfma.md"] == ["amd"] and targets["notes.md"] == ["cpu"]
