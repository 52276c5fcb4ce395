"""The kernel-scientist command line."""

from __future__ import annotations

import io
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from graph.archive import Archive
from graph.chat_tools import DirectiveArgs, RunTools
from graph.cli import app
from graph.config import LLMSettings, RunConfig
from graph.preflight import PreflightError, check_llm, check_target, directive_notes
from graph.progress import LineProgress
from graph.runs import create_run
from sandbox.devices import gpu_found
from tests.conftest import ROOT
from tests.openai_server import FakeOpenAIServer, content

runner = CliRunner()
HEAVY = ("torch", "chromadb", "langchain_core", "langchain_openai", "langgraph", "openai", "matplotlib")


def test_the_command_line_starts_without_heavy_libraries() -> None:
    """--help, problems, status, export and show must answer at once: importing the command line
    (every command's options included) loads none of torch, Chroma, LangChain, LangGraph."""
    code = f"import sys, graph.cli; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    # Loading a run's configuration (status, export, show) stays as light.
    code = "import sys, graph.run_handle, graph.report_cli, graph.show_cli; " + code.split("; ", 1)[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.slow
def test_eval_seed_prints_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "verdict.json"
    result = runner.invoke(app, ["eval", "vector_add", "--target", "cpu", "--budget", "0.1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "verdict" in result.output and "geomean" in result.output and "size=1000" in result.output
    # Not on a terminal: each phase and each shape as a line, counted against the problem's shapes.
    assert re.search(r"^build…$", result.output, re.M) and re.search(r"^time…$", result.output, re.M)
    assert re.search(r"^check shape 1 of \d+: ", result.output, re.M)
    assert re.search(r"^time shape 1 of \d+: ", result.output, re.M)
    assert "e+" not in result.output  # one number format: no e-notation
    data = json.loads(out.read_text())
    assert data["status"] == "ok" and data["schema_version"] == 1


@pytest.mark.slow
def test_eval_failure_exits_nonzero(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def custom_kernel(data):\n    return data[0]\n")
    result = runner.invoke(app, ["eval", "vector_add", str(bad), "--check-only"])
    assert result.exit_code == 1
    assert "wrong_output" in result.output and "FAIL" in result.output


def test_eval_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", "nonexistent_problem"])
    assert result.exit_code == 2 and "no problem 'nonexistent_problem'" in result.output
    result = runner.invoke(app, ["eval", "vector_add", str(tmp_path / "missing.py")])
    assert result.exit_code == 2 and "submission not found" in result.output
    result = runner.invoke(app, ["eval", "vector_add", "--target", "tpu"])
    assert result.exit_code == 2 and "tpu" in result.output
    helion = tmp_path / "helion_kernel.py"
    helion.write_text("import torch\nimport helion\nfrom helion import language as hl\nfrom task import input_t\n")
    result = runner.invoke(app, ["eval", "vector_add", str(helion)])
    assert result.exit_code == 2 and "imports helion, not installed" in result.output and "torch" not in result.output
    nameless = tmp_path / "nameless.py"
    nameless.write_text("def kernel(data):\n    return data[0]\n")
    result = runner.invoke(app, ["eval", "vector_add", str(nameless)])
    assert result.exit_code == 2 and "nameless.py defines no custom_kernel(data)" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["eval", "vector_add", "--target", "rocm"])
    assert result.exit_code == 2 and "choose one of cpu, cuda, hip" in result.output and "--target hip" in result.output


def test_runs_that_cannot_work_are_refused_before_they_start(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    result = runner.invoke(app, ["run", "vector_add", "--target", "rocm", "--runs-dir", str(runs)])
    assert result.exit_code == 2 and "choose one of cpu, cuda, hip" in result.output
    for target in ("cuda", "hip"):
        if gpu_found(target):
            continue
        result = runner.invoke(app, ["run", "vector_add", "--target", target, "--runs-dir", str(runs)])
        assert result.exit_code == 2, result.output
        assert f"--target {target} needs an" in result.output and "--target cpu" in result.output
    # An endpoint that is not there fails in one line within seconds, not after minutes of retries.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    result = runner.invoke(
        app,
        ["run", "vector_add", "--model", "m", "--base-url", f"http://127.0.0.1:{closed}/v1", "--runs-dir", str(runs)],
    )
    assert result.exit_code == 2, result.output
    assert "did not answer a first small request" in result.output and f"127.0.0.1:{closed}" in result.output
    assert not runs.exists()  # nothing was created


def test_gpu_preflight_names_the_alternative() -> None:
    check_target("cpu")
    for target in ("cuda", "hip"):
        if not gpu_found(target):
            with pytest.raises(PreflightError, match="use --target cpu"):
                check_target(target)


@pytest.mark.slow
def test_llm_preflight_passes_an_endpoint_that_answers_once_per_endpoint() -> None:
    with FakeOpenAIServer() as server:
        server.push(content("yes"))
        settings = LLMSettings.model_validate({"default": {"model": "m", "base_url": server.base_url}})
        check_llm(settings)  # four roles, one endpoint: one request
        assert len(server.bodies) == 1 and server.pending == 0


def test_directives_without_an_llm_are_said_to_be_unused(tmp_path: Path) -> None:
    config = RunConfig(problem="vector_add", directives=["keep registers under 128"])
    assert "stored but unused" in directive_notes(config)[0]
    assert directive_notes(config.model_copy(update={"directives": []})) == []
    handle = create_run(config, tmp_path / "runs")
    archive = Archive(handle.archive_path)
    try:
        tools = RunTools(handle, archive)
        reply = tools.add_directive(DirectiveArgs(text="vectorise the inner loop"))
        # A failed call counts as failed in /spend and in `status`.
        archive.add_llm_call({"role": "coder", "model": "m", "ok": False, "input_tokens": 3, "output_tokens": 0})
        spend = tools.spend()
        status = runner.invoke(app, ["status", str(handle.run_dir)])
    finally:
        archive.close()
    assert "no LLM, so nothing reads it" in reply and "follow it from" not in reply
    assert "| coder | 1 | 1 | 3 | 0 |" in spend and "| total | 1 | 1 |" in spend
    assert status.exit_code == 0 and "1 LLM calls (1 failed)" in status.output


@pytest.mark.slow
def test_a_plain_run_prints_its_steps_and_a_resume_says_what_it_kept(tmp_path: Path) -> None:
    runs = ["--runs-dir", str(tmp_path / "runs"), "--plain", "--budget", "0.05"]
    first = runner.invoke(app, ["run", "vector_add", "-g", "1", "-k", "1", "-d", "fewer registers", *runs])
    assert first.exit_code == 0, first.output
    assert "1 directive(s) stored but unused" in first.output
    assert re.search(r"^\d\d:\d\d:\d\d seed k0: [\d.]+ µs$", first.output, re.M), first.output
    assert re.search(r"^\d\d:\d\d:\d\d generation 1 done: ", first.output, re.M), first.output
    run_id = re.search(r"^run (\S+) in ", first.output, re.M).group(1)  # type: ignore[union-attr]
    again = runner.invoke(app, ["run", "--resume", run_id, "--more", "1", *runs])
    assert again.exit_code == 0, again.output
    assert re.search(r"resuming with \d+ kernels, \d+ evaluations and 1 finished generations kept", again.output)


def test_run_steps_are_lines_when_no_live_panel_shows() -> None:
    out = io.StringIO()
    progress = LineProgress(Console(file=out, width=200))
    progress.event("seed_done", kernel="k0", geomean_us=11618.3)
    progress.event("generation", generation=1, step="select")
    progress.event("experiment_done", experiment="g1e1", status="ok", kernel="k3", geomean_us=0.000012)
    progress.event("generation_done", generation=1, best="k3", best_geomean_us=0.000012, improved=True, stop_reason=None)
    progress.event("verified", kernel="k3", ratio=0.7780118827364341)  # an event without its own wording
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "seed k0: 11618 µs",
        "generation 1: selecting a base and a reference",
        "g1e1: done, ok 0.000012 µs (k3)",
        "generation 1 done: best k3 0.000012 µs, improved",
        "verified kernel=k3 ratio=0.778",
    ]


def test_problems_lists_bundled() -> None:
    result = runner.invoke(app, ["problems"])
    assert result.exit_code == 0 and "vector_add" in result.output


def test_verdict_view_leaves_out_what_it_does_not_know() -> None:
    """A crash before the judge described its machine shows no question marks; a failed build
    reads as failed, not as built; times have no e-notation."""
    from sandbox.report import render_verdict
    from sandbox.verdict import BenchmarkResult, BuildInfo, BuildRecord, Status, SubmissionInfo, Verdict

    submission = SubmissionInfo(path="k.py", sha256="0" * 64)
    crash = Verdict(status=Status.crash, message="the runner died", target="cpu", submission=submission, wall_seconds=1.0)
    failed = BuildRecord(name="k", lang="cpp", key="x", cached=False, ok=False, seconds=0.5)
    slow = BenchmarkResult(
        params={"n": 1}, shape="n=1", reps=3, median_us=11618.3, mean_us=1.0, std_us=1.0, stderr_us=1.0,
        min_us=1.0, max_us=1.0, p25_us=11000.0, p75_us=21060.0, ci_us=(11000.0, 21060.0),
    )  # fmt: skip
    built = crash.model_copy(update={"build": BuildInfo(records=[failed]), "benchmarks": [slow]})
    out = io.StringIO()
    render_verdict(built, Console(file=out, width=160))
    text = out.getvalue()
    assert "?" not in text and "device" not in text and "target cpu" in text
    assert re.search(r"\bk\s+│ cpp\s+│ failed", text), text
    assert "11618" in text and "11000–21060" in text and "e+" not in text and "11,618" not in text


def test_verdict_view_shows_the_paired_speedup_and_a_busy_host() -> None:
    from sandbox.report import render_verdict
    from sandbox.verdict import BenchmarkResult, PairedShape, PairedSummary, Status, SubmissionInfo, Summary, Verdict

    bench = BenchmarkResult(
        params={"n": 1}, shape="n=1", reps=30, median_us=100.0, mean_us=100.0, std_us=1.0, stderr_us=1.0, min_us=95.0,
        max_us=120.0, p25_us=98.0, p75_us=103.0, ci_us=(97.0, 104.0),
        paired=PairedShape(base_median_us=112.0, ratio=1.12, ratio_ci=(1.05, 1.19), difference="faster"),
    )  # fmt: skip
    verdict = Verdict(
        status=Status.ok, message="ok", target="cpu", submission=SubmissionInfo(path="k.py", sha256="0" * 64),
        benchmarks=[bench], wall_seconds=3.0,
        summary=Summary(geomean_us=100.0, geomean_ci_us=(97.0, 104.0),
                        paired=PairedSummary(ratio=1.12, ratio_ci=(1.05, 1.19), difference="faster")),
        host={"before": {"load_1m": 5.2, "cores": 2}, "noisy": True},
    )  # fmt: skip
    out = io.StringIO()
    render_verdict(verdict, Console(file=out, width=200))
    text = out.getvalue()
    assert "1.12× [1.05–1.19] faster" in text and "97.0–104.0" in text
    assert "busy host (load 5.2 on 2 cores)" in text
