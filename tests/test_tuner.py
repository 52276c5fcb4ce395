"""The Tuner's proposals: untried assignments around the base, read from the population."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from graph.archive import KernelRecord, sha256_text
from graph.tuner import (
    family_key,
    flat_tunables,
    frozen_reasons,
    frozen_tunables,
    render_variant,
    settled_by_findings,
    tune_plans,
)
from sandbox.tunables import current_assignment, parse_tunables

SOURCE = """// @tunable BLOCK: 64, 128, 256
#define BLOCK 100
// @tunable UNROLL: 1, 2
#define UNROLL 1
"""


def kernel(kid: str, source: str, geomean_us: float = 1.0) -> KernelRecord:
    return KernelRecord(id=kid, generation=0, origin="tune", summary="", source=source, sha256=sha256_text(source),
                        status="ok", geomean_us=geomean_us)


def test_variants_share_a_family_even_when_the_current_value_was_not_declared() -> None:
    variant = render_variant(SOURCE, {"BLOCK": "256"})
    assert family_key(variant) == family_key(SOURCE) is not None
    assert family_key("x = 1\n") is None


def test_tuner_never_repeats_an_assignment_and_runs_dry() -> None:
    population = [kernel("k0", SOURCE)]
    seen = {tuple(sorted(current_assignment(parse_tunables(SOURCE)).items()))}
    while True:
        plans = tune_plans(population[0], population, limit=2)
        if not plans:
            break
        for entry in plans:
            key = tuple(sorted(entry["assignment"].items()))
            assert key not in seen
            seen.add(key)
            # Times that differ: values that measure the same would freeze their tunable (flat_tunables).
            population.append(kernel(f"k{len(population)}", render_variant(SOURCE, entry["assignment"]),
                                     1.0 + 0.1 * len(population)))
            assert entry["plan"]["title"].startswith("tune ")
    assert len(seen) == 4 * 2  # BLOCK gained the undeclared 100: {64, 100, 128, 256} x {1, 2}


def test_a_directive_freezes_the_tunable_it_names() -> None:
    base = kernel("k0", SOURCE)
    free = tune_plans(base, [base], limit=3)
    assert any(entry["assignment"]["UNROLL"] != "1" for entry in free)
    plans = tune_plans(base, [base], limit=3, directives=["stop tuning the unroll factor"])
    assert plans and all(entry["assignment"]["UNROLL"] == "1" for entry in plans)
    assert all(entry["assignment"]["BLOCK"] != "100" for entry in plans)
    # A directive that does not tell the Tuner to stop leaves the search as it was.
    assert tune_plans(base, [base], limit=3, directives=["try a larger UNROLL"]) == free
    assert frozen_tunables(["BLOCK", "ROWS_PER_TASK"], ["keep rows per task fixed", "stop BLOCK"]) == {
        "BLOCK", "ROWS_PER_TASK"}


def test_a_finding_that_a_tunable_made_no_difference_freezes_it() -> None:
    base = kernel("k0", SOURCE)
    finding = {"experiment_id": "g2e3", "kind": "tune", "hypothesis": "a larger unroll hides latency",
               "change": "UNROLL 1 -> 2", "explanation": "The loop is bound by exp, not by branches.",
               "lesson": "UNROLL made no difference; spend generations on the exp instead."}
    plans = tune_plans(base, [base], limit=3, findings=[finding])
    assert plans and all(entry["assignment"]["UNROLL"] == "1" for entry in plans)
    assert frozen_reasons(base, [base], findings=[finding]) == {"UNROLL": "finding g2e3"}
    # The tunable and the verdict must share a sentence: a finding that names UNROLL beside another
    # tunable's lack of effect freezes only that one.
    mixed = {"experiment_id": "g2e4", "explanation": "UNROLL 2 gave 1.3x. BLOCK had no measurable effect."}
    assert settled_by_findings(["BLOCK", "UNROLL"], [mixed]) == {"BLOCK": "g2e4"}
    # Findings that say a tunable mattered change nothing.
    helped = {"experiment_id": "g2e5", "lesson": "UNROLL = 2 was 1.3x faster than 1; try 4 next."}
    assert tune_plans(base, [base], limit=3, findings=[helped]) == tune_plans(base, [base], limit=3)


def test_measured_values_that_did_not_differ_freeze_their_tunable() -> None:
    base = kernel("k0", SOURCE, 100.0)
    # Three BLOCK values within 3% of each other (UNROLL at the base's value): BLOCK is flat.
    population = [base] + [kernel(f"k{i}", render_variant(SOURCE, {"BLOCK": b}), t)
                           for i, (b, t) in enumerate((("64", 101.0), ("128", 99.5)), 1)]
    assert set(flat_tunables(base, population)) == {"BLOCK"}
    plans = tune_plans(base, population, limit=3)
    assert plans and all(entry["assignment"]["BLOCK"] == "100" for entry in plans)
    # Two values are not enough to call a tunable flat, and a spread beyond noise is a difference.
    assert flat_tunables(base, population[:2]) == {}
    spread = population[:2] + [kernel("k9", render_variant(SOURCE, {"BLOCK": "128"}), 80.0)]
    assert flat_tunables(base, spread) == {}
    # A kernel that moved two tunables at once says nothing about either.
    both = population[:2] + [kernel("k9", render_variant(SOURCE, {"BLOCK": "128", "UNROLL": "2"}), 100.0)]
    assert flat_tunables(base, both) == {}


def test_a_generation_s_tuner_reads_the_run_s_findings(tmp_path: Path) -> None:
    """graph/nodes.py hands the archive's findings to the Tuner beside the directives."""
    from graph.archive import Archive
    from graph.nodes import _design

    archive = Archive(tmp_path / "archive.sqlite")
    base = archive.add_kernel(kernel("", SOURCE).model_copy(update={"experiment_id": "seed", "origin": "seed"}))
    archive.add_finding("g1e1", None, {"experiment_id": "g1e1", "kind": "tune",
                                        "lesson": "Stop tuning UNROLL: it made no difference."})
    ctx = SimpleNamespace(config=SimpleNamespace(tuner_per_generation=0, parallel=3), llm_enabled=False,
                          archive=archive, population=archive.kernels)
    entries = _design(ctx, 2, {"base_id": base.id})  # type: ignore[arg-type]
    assert len(entries) == 3 and all(e["kind"] == "tune" and e["assignment"]["UNROLL"] == "1" for e in entries)
