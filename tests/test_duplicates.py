"""A candidate whose normalised source the run has evaluated is recognised before review."""

from __future__ import annotations

from types import SimpleNamespace

from graph.archive import KernelRecord, sha256_text
from graph.experiment import duplicate_feedback, evaluated_twin, normalised_source
from knowledge.models import Finding, FindingHit, ResearchContext

SOURCE = """#include <cmath>
// one row per thread
#define BLOCK 4
void f() {
  int x = 1;   
}
x = 2  # python
"""


def record(kid: str, source: str, experiment_id: str = "g1e0") -> KernelRecord:
    return KernelRecord(id=kid, generation=1, origin="llm", summary="rows", source=source, experiment_id=experiment_id,
                        sha256=sha256_text(source), status="ok", geomean_us=12.5)


def test_normalised_source_ignores_comments_and_blank_lines_but_not_code() -> None:
    same = SOURCE.replace("// one row per thread\n", "\n\n# a new comment\n").replace("int x = 1;   ", "int x = 1;")
    assert normalised_source(same) == normalised_source(SOURCE)
    assert "#include <cmath>" in normalised_source(SOURCE) and "#define BLOCK 4" in normalised_source(SOURCE)
    assert normalised_source(SOURCE.replace("#define BLOCK 4", "#define BLOCK 8")) != normalised_source(SOURCE)


def test_the_twin_is_found_in_other_experiments_only() -> None:
    ctx = SimpleNamespace(population=lambda: [record("k0", "other\n", "seed"), record("k3", SOURCE, "g1e0")])
    edited = SOURCE.replace("// one row per thread", "// rows")
    twin = evaluated_twin(ctx, edited, "g2e1")  # type: ignore[arg-type]
    assert twin is not None and twin.id == "k3"
    # Its own kernel, read back on a resume, is no twin.
    assert evaluated_twin(ctx, edited, "g1e0") is None  # type: ignore[arg-type]
    assert evaluated_twin(ctx, "new code\n", "g2e1") is None  # type: ignore[arg-type]
    assert "same code as kernel k3" in duplicate_feedback(twin) and "12.5 µs" in duplicate_feedback(twin)


def test_findings_keep_their_own_id_in_every_prompt() -> None:
    def hit(fid: str) -> FindingHit:
        return FindingHit(finding=Finding(id=fid, hypothesis="h", change="c", kernel_id="k1", problem="p",
                                          target="cpu"), score=1.0)

    first = ResearchContext(query="q", literature=[], findings=[hit("run1-g1e0"), hit("run1-g2e0")]).to_prompt()
    second = ResearchContext(query="q", literature=[], findings=[hit("run1-g2e0")]).to_prompt()
    assert "[F run1-g2e0]" in first and "[F run1-g2e0]" in second and "F1" not in second
