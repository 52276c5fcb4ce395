"""Findings memory, the primer, and literature plus findings together for the Researcher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledge import Finding, KnowledgeBase
from knowledge.findings import FindingsMemory, finding_id
from knowledge.primer import PREFIX, ensure_primer, primer_files

FINDINGS = [
    Finding(
        hypothesis="Padding the LDS tile removes bank conflicts in the B loads",
        change="pad each LDS row of B by 4 bytes",
        expected_speedup_min=1.05,
        expected_speedup_max=1.2,
        measured_speedup=1.12,
        explanation="ds_read stalls dropped; the MFMA pipe stayed busier",
        kernel_id="k7",
        parent_id="k3",
        problem="fp8_blockscale_gemm",
        target="amd",
    ),
    Finding(
        hypothesis="A 256x256 tile raises reuse",
        change="double the output tile per workgroup",
        expected_speedup_min=1.1,
        expected_speedup_max=1.4,
        measured_speedup=0.7,
        explanation="VGPR spills to scratch: occupancy fell to one wave per SIMD",
        kernel_id="k8",
        problem="fp8_blockscale_gemm",
        target="amd",
    ),
    Finding(
        hypothesis="TMA multicast halves L2 traffic",
        change="cluster of 2 CTAs with multicast loads of A",
        measured_speedup=None,
        status="build_error",
        explanation="needs sm_90a; built for sm_90",
        kernel_id="k9",
        problem="matmul_bf16",
        target="nvidia",
    ),
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    base = KnowledgeBase(tmp_path_factory.mktemp("kb-findings"))  # with the primer
    for finding in FINDINGS:
        base.add_finding(finding)
    return base


@pytest.mark.slow
def test_findings_are_stored_whole_with_stable_ids(kb: KnowledgeBase) -> None:
    memory = kb.findings
    assert memory.count() == 3
    fid = finding_id(FINDINGS[0])
    stored = memory.get(fid)
    assert stored is not None and stored.id == fid
    assert stored.model_dump(exclude={"id"}) == FINDINGS[0].model_dump(exclude={"id"})
    assert kb.add_finding(FINDINGS[0]) == fid and memory.count() == 3  # recording twice updates one entry
    assert [f.kernel_id for f in memory.history(problem="fp8_blockscale_gemm")] == ["k7", "k8"]
    assert [f.kernel_id for f in memory.history(target="nvidia")] == ["k9"]


@pytest.mark.slow
def test_search_findings_with_filters(kb: KnowledgeBase) -> None:
    hits = kb.search_findings("LDS bank conflicts padding", k=2)
    assert hits[0].finding.kernel_id == "k7"
    spills = kb.search_findings("register spills lowered occupancy", k=3, problem="fp8_blockscale_gemm")
    assert spills[0].finding.kernel_id == "k8" and all(
        h.finding.problem == "fp8_blockscale_gemm" for h in spills
    )
    nvidia = kb.search_findings("tile", k=3, target="nvidia")
    assert [h.finding.kernel_id for h in nvidia] == ["k9"]
    assert kb.search_findings("anything", problem="no_such_problem") == []


@pytest.mark.slow
def test_findings_live_apart_from_literature(kb: KnowledgeBase) -> None:
    hits = kb.search("LDS bank conflicts padding", k=10)
    assert hits and all(h.source.startswith(PREFIX) for h in hits)  # only the primer is literature here


@pytest.mark.slow
def test_research_context_brings_both(kb: KnowledgeBase) -> None:
    context = kb.research_context(
        "avoid LDS bank conflicts in an fp8 GEMM on MI300",
        target="amd",
        problem="fp8_blockscale_gemm",
        findings_target="amd",
    )
    assert context.literature and all(
        "nvidia" not in h.targets or "amd" in h.targets for h in context.literature
    )
    assert context.findings[0].finding.kernel_id == "k7"
    prompt = context.to_prompt()
    assert "## Literature" in prompt and "[1] primer:" in prompt and " § " in prompt
    assert "Hypothesis: Padding the LDS tile" in prompt and "measured: 1.12x" in prompt
    json.loads(context.model_dump_json())  # serialisable for the graph state


def test_an_excerpt_ends_at_a_whole_line_and_a_bare_opening_is_no_excerpt() -> None:
    from knowledge.models import Hit, ResearchContext

    def hit(text: str, section: str) -> Hit:
        return Hit(chunk_id="c", text=text, source="primer:x.md", title="X", section=section, kind="md",
                   targets=["cpu"], score=1.0)

    long = hit("\n".join(f"- bullet {i}: " + "word " * 20 for i in range(30)), "X > Caches")
    excerpt = long.excerpt(1500)
    assert len(excerpt) <= 1500 + 6 and excerpt.endswith("\n[...]")
    assert all(line.startswith("- bullet") and line.rstrip().endswith("word") for line in excerpt.splitlines()[:-1])
    assert hit("short", "X > Caches").excerpt(1500) == "short"
    prompt = ResearchContext(query="q", literature=[long], findings=[]).to_prompt()
    assert excerpt in prompt and long.text not in prompt
    # The document's title and its opening lines: hollow. A short section deeper in: not.
    assert hit("Written by the project as a starting point.", "X").hollow
    assert not hit("Written by the project as a starting point.", "X > Caches").hollow
    assert not hit("- a fact\n" * 60, "X").hollow


def test_render_states_expected_and_measured() -> None:
    text = FINDINGS[2].render()
    assert "Expected speed-up: not stated; measured: none (status build_error)" in text
    assert "Expected speed-up: 1.05x-1.2x; measured: 1.12x" in FINDINGS[0].render()


@pytest.mark.slow
def test_a_findings_memory_alone(tmp_path: Path) -> None:
    memory = FindingsMemory(tmp_path)
    assert memory.count() == 0 and memory.search("x") == []
    fid = memory.add(FINDINGS[1].model_copy(update={"id": "custom-id"}))
    assert fid == "custom-id" and memory.get("custom-id").kernel_id == "k8"  # type: ignore[union-attr]
    memory.remove("custom-id")
    assert memory.count() == 0


# --- primer -------------------------------------------------------------------------------


@pytest.mark.slow
def test_primer_is_loaded_on_first_use_with_its_targets(kb: KnowledgeBase) -> None:
    names = {p.name for p in primer_files()}
    assert names == {"mi300-cdna3.md", "hopper-h100.md", "gpu-kernel-basics.md", "cpu-kernels.md"}
    targets = {s.source: s.targets for s in kb.sources()}
    assert targets == {
        f"{PREFIX}mi300-cdna3.md": ["amd"],
        f"{PREFIX}hopper-h100.md": ["nvidia"],
        f"{PREFIX}gpu-kernel-basics.md": ["amd", "nvidia"],
        f"{PREFIX}cpu-kernels.md": ["cpu"],
    }
    top = kb.search("which compile target does wgmma need", k=1, target="nvidia")[0]
    assert top.source == f"{PREFIX}hopper-h100.md" and top.section == "Tensor cores: wgmma"
    top = kb.search("e4m3fnuz largest value", k=1, target="amd")[0]
    assert top.source == f"{PREFIX}mi300-cdna3.md"


@pytest.mark.slow
def test_a_cpu_search_reads_cpu_literature_above_the_floor_or_none(kb: KnowledgeBase) -> None:
    """Issue 15: CPU prompts got five GPU excerpts ('Hopper wgmma'). The cpu filter keeps CPU and
    generic documents; the relevance floor may leave none, and the prompt says so."""
    from knowledge.base import RELEVANCE_FLOOR

    hits = kb.search("softmax CPU SIMD AVX2 vectorised exp, working set fits in cache", k=5, target="cpu",
                     min_similarity=RELEVANCE_FLOOR)
    assert hits and all(h.source == f"{PREFIX}cpu-kernels.md" for h in hits)
    assert all(h.similarity is not None and h.similarity >= RELEVANCE_FLOOR for h in hits)
    # Without the floor the k best come back whatever they are; with it, nothing relevant is an answer.
    assert len(kb.search("fp8 block-scale GEMM MFMA tiles in LDS", k=5, target="cpu")) == 5
    context = kb.research_context("fp8 block-scale GEMM MFMA tiles in LDS", target="cpu", problem="softmax")
    assert context.literature == []
    assert "No relevant literature found" in context.to_prompt()
    # A keyword-only match is held to the floor too.
    for hit in kb.search("which compile target does wgmma need", k=5, target="nvidia", min_similarity=0.3):
        assert hit.similarity is not None and hit.similarity >= 0.3


@pytest.mark.slow
def test_primer_is_not_reloaded_and_a_removed_file_stays_removed(kb: KnowledgeBase) -> None:
    assert ensure_primer(kb) is False
    assert kb.remove(f"{PREFIX}gpu-kernel-basics.md") == [f"{PREFIX}gpu-kernel-basics.md"]
    reopened = KnowledgeBase(kb.path)
    assert f"{PREFIX}gpu-kernel-basics.md" not in {s.source for s in reopened.sources()}


def test_primer_states_the_target_facts() -> None:
    text = {p.name: p.read_text() for p in primer_files()}
    for fact in (
        "gfx942",
        "304 compute units",
        "wave64",
        "64 KB of LDS",
        "256 architectural VGPRs",
        "2.6 PFLOP/s",
        "5.3 TB/s",
        "v_mfma_f32_32x32x16_fp8_fp8",
        "rocprofv3",
        "e4m3fnuz",
    ):
        assert fact in text["mi300-cdna3.md"], fact
    for fact in (
        "132 streaming multiprocessors",
        "227 KB",
        "wgmma",
        "sm_90a",
        "990 TFLOP/s",
        "3.35 TB/s",
        "-Xptxas -v",
        "705 TFLOP/s",
    ):
        assert fact in text["hopper-h100.md"], fact
