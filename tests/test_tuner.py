"""The Tuner's proposals: untried assignments around the base, read from the population."""

from __future__ import annotations

from graph.archive import KernelRecord, sha256_text
from graph.tuner import family_key, frozen_tunables, render_variant, tune_plans
from sandbox.tunables import current_assignment, parse_tunables

SOURCE = """// @tunable BLOCK: 64, 128, 256
#define BLOCK 100
// @tunable UNROLL: 1, 2
#define UNROLL 1
"""


def kernel(kid: str, source: str) -> KernelRecord:
    return KernelRecord(id=kid, generation=0, origin="tune", summary="", source=source, sha256=sha256_text(source),
                        status="ok", geomean_us=1.0)


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
            population.append(kernel(f"k{len(population)}", render_variant(SOURCE, entry["assignment"])))
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
