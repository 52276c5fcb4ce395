"""Every time is shown with its interval, and the run's best with how its speed-up was measured:
the archive keeps the interval, screens and prompts print it, and a verified win says so."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agents.critic import RunOutcome, fallback_explanation
from agents.schemas import ExperimentPlan
from agents.views import KernelView, population_table
from graph import verify
from graph.archive import SCHEMA, Archive, KernelRecord
from graph.run_data import headline


def _kernel(archive: Archive, origin: str, geomean: float, ci: tuple[float, float] | None, noisy: bool = False) -> KernelRecord:
    record = KernelRecord(id="", generation=0 if origin == "seed" else 1, origin=origin, summary=f"{origin} {geomean}",
                          source=f"# {origin} {geomean}\n", sha256=f"{origin}{geomean}", status="ok",
                          geomean_us=geomean, geomean_ci_us=ci, noisy=noisy, benchmarks={"n=1": geomean})
    return archive.add_kernel(record)


def test_an_archive_from_before_the_interval_columns_opens_and_keeps_new_intervals(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old_schema = SCHEMA.replace("    geomean_ci TEXT,\n", "").replace("    noisy INTEGER NOT NULL DEFAULT 0,\n", "")
    assert "geomean_ci" not in old_schema
    with sqlite3.connect(path) as conn:
        conn.executescript(old_schema)
        conn.execute("INSERT INTO kernels (seq, id, generation, origin, parents, summary, source, sha256, status,"
                     " geomean_us, created_at) VALUES (0, 'k0', 0, 'seed', '[]', 's', 'src', 'abc', 'ok', 10.0, 'now')")
    archive = Archive(path)
    old = archive.kernel("k0")
    assert old is not None and old.geomean_ci_us is None and not old.noisy
    new = _kernel(archive, "llm", 8.0, (7.5, 8.6), noisy=True)
    again = archive.kernel(new.id)
    assert again is not None and again.geomean_ci_us == (7.5, 8.6) and again.noisy


def test_the_runs_best_is_the_crowned_kernel_and_its_gain_says_how_it_was_measured(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "run.sqlite")
    seed = _kernel(archive, "seed", 100.0, (98.0, 102.0))
    crowned = _kernel(archive, "llm", 80.0, (78.0, 82.0))
    _kernel(archive, "llm", 70.0, (50.0, 95.0))  # fastest single timing, never confirmed side by side
    archive.finish_generation(1, best_id=crowned.id, best_geomean_us=80.0)
    assert archive.best().geomean_us == 70.0 and archive.run_best().id == crowned.id
    top = headline(archive)
    assert top.best.id == crowned.id and not top.verified
    assert "1.25x [1.20–1.31] the seed (faster, unverified: two separate timings)" == top.seed_text()
    assert top.best_text() == f"best {crowned.id}: 80.0 [78.0–82.0] µs"
    verify.record(archive, verify.Verification(
        kernel_id=crowned.id, base_id=seed.id, kernel_sha256=crowned.sha256, base_sha256=seed.sha256, status="ok",
        ratio=1.22, ratio_ci=(1.19, 1.26), difference="faster"))
    top = headline(archive)
    assert top.verified and top.seed_text() == "1.22x [1.19–1.26] the seed (faster, verified side by side)"


def test_every_leaderboard_shows_the_side_by_side_figure_and_marks_it(tmp_path: Path) -> None:
    from graph.chat_tools import RunTools
    from graph.progress import leaderboard_table
    from graph.report import _leaderboard
    from graph.report_data import collect_report
    from graph.run_data import VERIFIED_NOTE, seed_ratios

    archive = Archive(tmp_path / "run.sqlite")
    seed = _kernel(archive, "seed", 100.0, (98.0, 102.0))
    verified = _kernel(archive, "llm", 18.0, (12.0, 27.0))  # 5.56x apart on a busy host
    apart = _kernel(archive, "llm", 50.0, (48.0, 52.0))
    verify.record(archive, verify.Verification(
        kernel_id=verified.id, base_id=seed.id, kernel_sha256=verified.sha256, base_sha256=seed.sha256, status="ok",
        ratio=5.2, ratio_ci=(3.7, 7.2), difference="faster"))
    over_seed = seed_ratios(archive)
    assert over_seed(verified) == (5.2, True) and over_seed(apart) == (2.0, False) and over_seed(seed) == (1.0, False)
    # The terminal's table, the chat's tool and the HTML report say the same thing.
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    Console(file=out, width=160).print(leaderboard_table(archive, width=160))
    terminal = out.getvalue()
    chat = RunTools(None, archive).leaderboard()  # type: ignore[arg-type]  # the leaderboard reads the archive only
    html = _leaderboard(collect_report(archive, "run", "cpu"))
    for text in (terminal, chat, html):
        assert "5.20x ✓" in text and "5.56x" not in text and "2.00x" in text and "2.00x ✓" not in text, text
        assert VERIFIED_NOTE in " ".join(text.split()), text


def test_roles_see_intervals_and_a_difference_within_noise_is_no_lesson() -> None:
    base = KernelView(id="k1", status="ok", geomean_us=100.0, geomean_ci_us=(90.0, 110.0), benchmarks={"n": 100.0})
    tight = KernelView(id="k2", status="ok", geomean_us=80.0, geomean_ci_us=(79.0, 81.0), benchmarks={"n": 80.0})
    loose = KernelView(id="k3", status="ok", geomean_us=97.0, geomean_ci_us=(85.0, 108.0), noisy=True,
                       benchmarks={"n": 97.0})
    table = population_table([base, tight, loose])
    assert "100.0 [90.0–110.0]" in table and "97.0 [85.0–108.0] (timed on a busy host)" in table
    assert "not measurably different" in table
    assert RunOutcome(tight, base).difference == "faster"
    within = RunOutcome(loose, base)
    assert within.difference == "no measurable difference"
    assert "no measurable difference" in within.describe() and "[90.0–110.0]" in within.describe()
    plan = ExperimentPlan(title="unroll", description="unroll by 4", est_min_speedup=1.1, est_max_speedup=1.3)
    assert "No measurable effect" in fallback_explanation(plan, within).lesson
    assert "helps" in fallback_explanation(plan, RunOutcome(tight, base)).lesson


def test_a_side_by_side_timing_is_the_figure_the_critic_reads() -> None:
    # A relay run read 7.36x from two timings minutes apart on a busy host, and 3.52x side by side:
    # the finding is written from the side-by-side figure, and its reading decides the lesson.
    from agents.critic import SideBySide

    base = KernelView(id="k0", status="ok", geomean_us=4373.0, geomean_ci_us=(3911.0, 4890.0), noisy=True,
                      benchmarks={"n": 4373.0})
    fast = KernelView(id="k1", status="ok", geomean_us=594.3, geomean_ci_us=(503.8, 700.9), benchmarks={"n": 594.3})
    apart = RunOutcome(fast, base)
    assert apart.difference == "faster" and apart.speedup == pytest.approx(7.36, abs=0.01)
    paired = RunOutcome(fast, base, paired=SideBySide(3.52, (2.93, 4.22), "faster"))
    assert paired.speedup == 3.52
    text = paired.describe()
    assert "side by side" in text and "3.52x [2.93–4.22], faster" in text and "timed apart (7.36x)" in text
    # Apart the candidate looked faster; side by side it was not measurably different: no lesson.
    level = RunOutcome(fast, base, paired=SideBySide(1.004, (0.97, 1.04), "no measurable difference"))
    assert level.difference == "no measurable difference"
    plan = ExperimentPlan(title="avx512", description="intrinsics", est_min_speedup=3.0, est_max_speedup=10.0)
    assert "No measurable effect" in fallback_explanation(plan, level).lesson
    # The shape table carries each shape's own side-by-side ratio where the pair was timed so.
    per_shape = RunOutcome(fast, base, paired=SideBySide(3.52, (2.93, 4.22), "faster", {"n": (3.4, 2.9, 4.0)}))
    assert "| n | 594.3 | 4373 | 3.40x [2.90–4.00] |" in per_shape.shape_table()
    assert "side by side" not in apart.shape_table()
