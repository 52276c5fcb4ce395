"""Issue 15's smaller defects in what a run records and shows: build errors at the Coder's own lines
and listed once, parents, leaderboards that keep the seed, the knowledge base a run used."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.schemas import ExperimentPlan
from graph.archive import Archive, KernelRecord, sha256_text
from graph.config import RunConfig
from graph.evaluation import embedded_source_line, verdict_message
from graph.experiment import _lineage
from sandbox.verdict import Diagnostic, Status, SubmissionInfo, Verdict

SUBMISSION = '''# a kernel
import torch
from sandbox.native import load_cpp

SOURCE = r"""
#include <cmath>
extern "C" void f(float* y) {
  float total = 0.0f
  y[0] = total;
}
"""

lib = load_cpp(SOURCE, name="softmax")
'''


def build_error() -> Verdict:
    return Verdict(
        status=Status.build_error, target="cpu", submission=SubmissionInfo(path="s.py", sha256="0"),
        message="build of 'softmax' failed: softmax.cpp:4: error: expected ';' before 'y'",
        diagnostics=[Diagnostic(file="softmax.cpp", line=4, column=3, severity="error",
                                message="expected ';' before 'y'"),
                     Diagnostic(file="/usr/include/c++/12/cmath", line=1, severity="warning", message="w")],
    )


def test_build_errors_point_at_the_coder_s_file_and_are_listed_once() -> None:
    assert embedded_source_line(SUBMISSION) == 5  # the r\"\"\" line: the compiled file's line 1 (empty)
    text = verdict_message(build_error(), source=SUBMISSION)
    assert text.count("expected ';' before 'y'") == 1, text
    assert "softmax.cpp:4 (line 8 of your file): error:" in text
    assert SUBMISSION.splitlines()[8 - 1].strip() == "float total = 0.0f"
    assert "/usr/include/c++/12/cmath:1: warning" in text  # a system header's line is left alone
    # No source (or one that embeds none): the compiler's lines as they were.
    assert "softmax.cpp:4: error:" in verdict_message(build_error())
    assert embedded_source_line("x = 1\n") is None and embedded_source_line("def (:") is None


def test_an_llm_kernel_lists_the_reference_as_a_parent_only_when_its_plan_used_it() -> None:
    base = KernelRecord(id="k3", generation=1, origin="llm", summary="", source="", sha256="", status="ok")
    spec = {"id": "g2e0", "generation": 2, "reference_id": "k1", "assignment": None}
    for uses, parents in ((False, ["k3"]), (True, ["k3", "k1"])):
        plan = ExperimentPlan(title="p", description="d", uses_reference=uses)
        assert _lineage(spec, base, "llm", 0, "s", plan).parents == parents  # type: ignore[arg-type]
    assert _lineage(spec, base, "tune", 0, "s", ExperimentPlan(title="t", description="d", uses_reference=True)
                    ).parents == ["k3"]  # type: ignore[arg-type]


def test_leaderboards_keep_the_seed_at_its_rank(tmp_path: Path) -> None:
    from graph.progress import leaderboard_table
    from graph.report_cli import compact_leaderboard

    archive = Archive(tmp_path / "a.sqlite")
    for i, geo in enumerate([100.0] + [50.0 - i for i in range(12)]):
        source = f"# kernel {i}\n"
        archive.add_kernel(KernelRecord(id="", generation=0 if i == 0 else 1, origin="seed" if i == 0 else "llm", summary="",
                                        experiment_id="seed" if i == 0 else f"g1e{i}", source=source,
                                        sha256=sha256_text(source), status="ok", geomean_us=geo))
    ranked = archive.ranked(10)
    assert [r for r, _ in ranked] == list(range(1, 11)) + [13] and ranked[-1][1].origin == "seed"
    assert [r for r, _ in archive.ranked(20)] == list(range(1, 14))  # in the top already: once
    assert leaderboard_table(archive).row_count == 11 and compact_leaderboard(archive).row_count == 11


def test_run_json_names_the_knowledge_base_the_run_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graph.runs import create_run

    monkeypatch.setenv("KS_KB_DIR", str(tmp_path / "kb"))
    handle = create_run(RunConfig(problem="softmax", target="cpu"), tmp_path / "runs")
    stored = RunConfig.model_validate_json((handle.run_dir / "run.json").read_text())
    assert stored.knowledge == str((tmp_path / "kb").resolve())
    off = create_run(RunConfig(problem="softmax", target="cpu", use_knowledge=False), tmp_path / "runs2")
    assert off.config.knowledge is None
