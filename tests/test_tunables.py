"""Tunable declarations: parsing, rendering, the neighbourhood search, and the bundled seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate
from sandbox.problem import bundled_problems, load_problem
from sandbox.tunables import (
    Tunable,
    TunableError,
    assignment_key,
    current_assignment,
    describe,
    neighbours,
    parse_tunables,
    plan_tuning,
    render,
    skeleton,
)
from sandbox.verdict import Status

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted((ROOT / "problems").glob("*/seeds/*.py"))

EMBEDDED = '''
import torch
from sandbox.native import load_cpp

SOURCE = r"""
#include <cstdint>
// @tunable BLOCK_M: 16, 32, 64, 128
#define BLOCK_M 64
// @tunable THREADS: 128, 256, 512  // a trailing comment
static constexpr int THREADS = 256;  // why 256
const int threads = 3;
"""

# @tunable NUM_WARPS: 2, 4, 8
NUM_WARPS: int = 4
'''


def _one(source: str) -> Tunable:
    (tunable,) = parse_tunables(source)
    return tunable


# Parsing


@pytest.mark.parametrize(
    ("site", "value"),
    [
        ("#define BLOCK 64", "64"),
        ("  #  define BLOCK 64  // the block", "64"),
        ("constexpr int BLOCK = 64;", "64"),
        ("static constexpr int BLOCK = 64;  // why", "64"),
        ("const int BLOCK = 64;", "64"),
        ("    const int64_t BLOCK = 64;", "64"),
        ("static constexpr std::size_t BLOCK = 64;", "64"),
        ("constexpr unsigned long BLOCK = 64ul;", "64ul"),
        ("BLOCK = 64", "64"),
        ("BLOCK: int = 64  # why", "64"),
        ("BLOCK = True", "True"),
        ('BLOCK = "ieee"', '"ieee"'),
        ("constexpr float BLOCK = 0.5f;", "0.5f"),
        ("#define BLOCK 0x40", "0x40"),
    ],
)
def test_definition_site_forms(site: str, value: str) -> None:
    comment = "//" if ";" in site or "define" in site else "#"
    source = f"x = 1\n{comment} @tunable BLOCK: 32, {value}, 128\n\n{site}\n"
    tunable = _one(source)
    assert tunable == Tunable("BLOCK", ("32", value, "128"), value, 4)


def test_not_definition_sites() -> None:
    # A plain C assignment, an indented Python assignment and an expression are not sites.
    for line in ("int BLOCK = 64;", "BLOCK = 64;", "    BLOCK = 64", "BLOCK = 64 * 2", "constexpr int BLOCK = A / B;"):
        with pytest.raises(TunableError, match="no definition site"):
            parse_tunables(f"# @tunable BLOCK: 32, 64\n{line}\n")


def test_directives_inside_an_embedded_kernel_string() -> None:
    tunables = parse_tunables(EMBEDDED)
    assert [t.name for t in tunables] == ["BLOCK_M", "THREADS", "NUM_WARPS"]  # declared order
    assert current_assignment(tunables) == {"BLOCK_M": "64", "THREADS": "256", "NUM_WARPS": "4"}
    assert [t.line for t in tunables] == [8, 10, 15]
    assert tunables[1].values == ("128", "256", "512")  # the trailing comment is not a value


def test_no_directives() -> None:
    assert parse_tunables("BLOCK = 64\n") == []
    assert plan_tuning("BLOCK = 64\n") == []


def test_current_value_outside_the_list() -> None:
    # Added at its sorted place in an ascending numeric list, first otherwise.
    assert _one("# @tunable B: 32, 64, 128\nB = 48\n").values == ("32", "48", "64", "128")
    assert _one("# @tunable B: 128, 64, 32\nB = 48\n").values == ("128", "64", "48", "32")
    assert _one("# @tunable B: 32, 64, 128\nB = 256\n").values == ("32", "64", "128", "256")
    assert _one("# @tunable B: 64, 32, 128\nB = 48\n").values == ("48", "64", "32", "128")
    assert _one('# @tunable P: "ieee", "tf32"\nP = "tf32x3"\n').values == ('"tf32x3"', '"ieee"', '"tf32"')
    with pytest.raises(TunableError, match="not in the list"):
        parse_tunables("# @tunable B: 32, 64\nB = 48\n", strict=True)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("# @tunable B: 32, 64\n", "no definition site"),
        ("# @tunable B: 32, 64\nB = 32\nB = 64\n", r"more than once \(lines 2, 3\)"),
        ('# @tunable B: 32, 64\nB = 32\nS = r"""\n#define B 64\n"""\n', "more than once"),
        ("# @tunable B: 32, 64\n# @tunable B: 1, 2\nB = 32\n", "declared twice"),
        ("# @tunable B:\nB = 32\n", "lists no values"),
        ("# @tunable B: 32, , 64\nB = 32\n", "is not a value"),
        ("# @tunable B: 32, 32\nB = 32\n", "lists a value twice"),
        ("# @tunable 2B: 32, 64\n", "not an identifier"),
        ("# @tunable B 32, 64\nB = 32\n", "expected '@tunable NAME"),
        ("# @tunable B: 32 + 1, 64\nB = 64\n", "is not a value"),
    ],
)
def test_declaration_errors(source: str, message: str) -> None:
    with pytest.raises(TunableError, match=message):
        parse_tunables(source)


# Rendering


def test_render_round_trip() -> None:
    out = render(EMBEDDED, {"BLOCK_M": "128", "NUM_WARPS": "8"})
    assert current_assignment(parse_tunables(out)) == {"BLOCK_M": "128", "THREADS": "256", "NUM_WARPS": "8"}
    changed = [(a, b) for a, b in zip(EMBEDDED.splitlines(), out.splitlines(), strict=True) if a != b]
    assert changed == [("#define BLOCK_M 64", "#define BLOCK_M 128"), ("NUM_WARPS: int = 4", "NUM_WARPS: int = 8")]
    assert render(out, {"BLOCK_M": "64", "NUM_WARPS": "4"}) == EMBEDDED
    assert render(EMBEDDED, {}) == EMBEDDED


def test_skeleton_is_the_same_for_every_variant() -> None:
    source = "# @tunable B: 64, 32, 128\nB = 48\n# @tunable W: 2, 4\nW = 2\nx = 1\n"
    assert parse_tunables(source)[0].values == ("48", "64", "32", "128")  # the current value, added first
    variant = render(source, {"B": "32", "W": "4"})
    assert parse_tunables(variant)[0].values == ("64", "32", "128")  # ... and gone once rendered away
    assert (
        skeleton(source)
        == skeleton(variant)
        == "# @tunable B: 64, 32, 128\nB = <B>\n# @tunable W: 2, 4\nW = <W>\nx = 1\n"
    )
    assert skeleton(variant.replace("x = 1", "x = 2")) != skeleton(source)
    assert skeleton("x = 1\n") == "x = 1\n"


def test_render_keeps_comments_and_line_endings() -> None:
    source = "// @tunable T: 1, 2\r\nstatic constexpr int T = 1;  // why\r\n"
    assert render(source, {"T": "2"}) == "// @tunable T: 1, 2\r\nstatic constexpr int T = 2;  // why\r\n"


def test_render_errors() -> None:
    with pytest.raises(TunableError, match="unknown tunable NOPE"):
        render(EMBEDDED, {"NOPE": "1"})
    with pytest.raises(TunableError, match="not one of 16, 32, 64, 128"):
        render(EMBEDDED, {"BLOCK_M": "48"})


# Search


def test_assignment_key_and_describe() -> None:
    assert assignment_key({"NUM_WARPS": "4", "BLOCK_M": "64"}) == "BLOCK_M=64,NUM_WARPS=4"
    base = {"BLOCK_M": "64", "NUM_WARPS": "4"}
    assert describe({"BLOCK_M": "128", "NUM_WARPS": "4"}, base) == "BLOCK_M 64→128"
    assert describe({"BLOCK_M": "32", "NUM_WARPS": "8"}, base) == "BLOCK_M 64→32, NUM_WARPS 4→8"
    assert describe(base, base) == "unchanged"


def test_neighbours_order_and_tried() -> None:
    tunables = parse_tunables(EMBEDDED)
    around = current_assignment(tunables)
    got = [describe(a, around) for a in neighbours(tunables, around, set())]
    # Declared order; for each, the next value in the list before the previous one.
    assert got == [
        "BLOCK_M 64→128",
        "BLOCK_M 64→32",
        "THREADS 256→512",
        "THREADS 256→128",
        "NUM_WARPS 4→8",
        "NUM_WARPS 4→2",
    ]
    # Ends of lists have one neighbour; tried ones are skipped, in any of the accepted forms.
    corner = {"BLOCK_M": "128", "THREADS": "128", "NUM_WARPS": "4"}
    tried = [
        frozenset({**corner, "NUM_WARPS": "8"}.items()),  # frozenset of items
        {**corner, "BLOCK_M": "64"},  # dict
        assignment_key({**corner, "THREADS": "256"}),  # key
    ]
    assert [describe(a, corner) for a in neighbours(tunables, corner, tried)] == ["NUM_WARPS 4→2"]
    # Names missing from `around` keep their current value.
    assert neighbours(tunables, {"BLOCK_M": "16"}, ())[0] == {"BLOCK_M": "32", "THREADS": "256", "NUM_WARPS": "4"}
    with pytest.raises(TunableError):
        neighbours(tunables, {"BLOCK_M": "48"}, ())


def test_plan_tuning_falls_back_to_distance_two_and_exhausts() -> None:
    source = "# @tunable A: 1, 2, 3\nA = 2\n# @tunable B: x, y\nB = x\n"
    first = plan_tuning(source, tried=(), limit=2)
    assert first == [{"A": "3", "B": "x"}, {"A": "1", "B": "x"}]
    # Neighbours first, then distance 2, nearest first.
    assert plan_tuning(source, tried=(), limit=10) == [
        {"A": "3", "B": "x"},
        {"A": "1", "B": "x"},
        {"A": "2", "B": "y"},
        {"A": "3", "B": "y"},
        {"A": "1", "B": "y"},
    ]
    tried = [*first, {"A": "2", "B": "y"}]  # every neighbour tried
    assert plan_tuning(source, tried=tried, limit=10) == [{"A": "3", "B": "y"}, {"A": "1", "B": "y"}]
    # Every assignment but the current one is proposed exactly once, then nothing.
    seen: list[dict[str, str]] = []
    while batch := plan_tuning(source, tried=seen, limit=2):
        seen += batch
    assert len(seen) == len({assignment_key(a) for a in seen}) == 3 * 2 - 1
    assert {"A": "2", "B": "x"} not in seen
    assert plan_tuning(source, tried=(), limit=0) == []


def test_plan_tuning_on_a_large_space_is_lazy() -> None:
    # 10 parameters of 10 values: 10^10 assignments; the plan only walks the nearest rings.
    source = "".join(f"# @tunable P{i}: {', '.join(map(str, range(10)))}\nP{i} = 5\n" for i in range(10))
    plan = plan_tuning(source, tried=(), limit=25)
    assert len(plan) == 25
    assert sum(describe(a, current_assignment(parse_tunables(source))).count("→") for a in plan[:20]) == 20
    assert describe(plan[20], current_assignment(parse_tunables(source))) == "P0 5→6, P1 5→6"


# Bundled seeds


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_bundled_seed_tunables_parse_and_render(seed: Path) -> None:
    source = seed.read_text()
    tunables = parse_tunables(source, strict=True)
    if seed.stem != "cpu" or seed.parent.parent.name != "softmax":
        assert tunables, "every seed but the softmax CPU one (bound by scalar exp) declares tunables"
    for tunable in tunables:
        for value in tunable.values:
            out = render(source, {tunable.name: value})
            assert current_assignment(parse_tunables(out))[tunable.name] == value
            assert render(out, {tunable.name: tunable.current}) == source


CPU_SEEDS = [
    (name, seed)
    for name, path in bundled_problems().items()
    if "cpu" in load_problem(path, "cpu").targets
    and parse_tunables((seed := load_problem(path, "cpu").seed_for("cpu")).read_text())
]


@pytest.mark.slow
@pytest.mark.parametrize("end", ["first", "last"])
@pytest.mark.parametrize(("name", "seed"), CPU_SEEDS, ids=[name for name, _ in CPU_SEEDS])
def test_cpu_seed_extremes_pass_the_check(name: str, seed: Path, end: str, tmp_path: Path) -> None:
    """Every tunable at the first (or last) value of its list at once builds and passes."""
    source = seed.read_text()
    tunables = parse_tunables(source)
    assignment = {t.name: t.values[0 if end == "first" else -1] for t in tunables}
    candidate = tmp_path / "submission.py"
    candidate.write_text(render(source, assignment))
    options = EvalOptions(target="cpu", mode="check", limits=PhaseLimits(build=300, check=120, time=120))
    verdict = evaluate(name, candidate, options)
    assert verdict.status == Status.ok, f"{assignment_key(assignment)}: {verdict.message}"
