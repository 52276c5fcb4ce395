"""The kernel-scientist command line."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from graph.archive import Archive, KernelRecord, sha256_text
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


@pytest.mark.slow
def test_a_run_whose_seed_fails_ends_in_one_line_and_exit_2(tmp_path: Path) -> None:
    """It used to end with exit 0, an empty leaderboard, the status twice (`(runtime_error): runtime_error:`)
    and the judge's own `standby: host warm-up ...` line as the seed's log tail."""
    bad = tmp_path / "BAD.py"
    bad.write_text("custom_kernel = None\n")
    runs = ["--runs-dir", str(tmp_path / "runs")]
    result = runner.invoke(app, ["run", "vector_add", "--target", "cpu", "-g", "1", "--seed", str(bad), "--plain", *runs])
    assert result.exit_code == 2, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("error:"))
    assert error == (
        "error: the seed kernel BAD.py does not pass: runtime_error: importing the submission failed: "
        "the submission defines no custom_kernel(data)"
    ), result.output
    assert result.output.count("runtime_error") == 1 and "Leaderboard" not in result.output
    assert "standby" not in result.output and "log tail" not in result.output
    status = runner.invoke(app, ["status", *runs])
    assert status.exit_code == 0 and "the seed kernel BAD.py does not pass" in status.output
    assert "standby" not in status.output and status.output.count("runtime_error") == 1, status.output


def test_the_judges_start_up_lines_stay_out_of_a_failures_log_tail() -> None:
    from graph.evaluation import verdict_message
    from sandbox.verdict import Status, SubmissionInfo, Verdict

    submission = SubmissionInfo(path="k.py", sha256="0" * 64)
    crash = Verdict(status=Status.crash, message="the runner died", target="cpu", submission=submission,
                    log_tail="standby: host warm-up 2.02 s; no device\nSegmentation fault in k.cpp")  # fmt: skip
    message = verdict_message(crash)
    assert "standby" not in message and "log tail:\nSegmentation fault in k.cpp" in message
    only_start_up = crash.model_copy(update={"log_tail": "standby: host warm-up 2.02 s; no device\n"})
    assert verdict_message(only_start_up) == "crash: the runner died"


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


def test_problems_lists_bundled(monkeypatch: pytest.MonkeyPatch) -> None:
    import graph.cli

    result = runner.invoke(app, ["problems"])
    assert result.exit_code == 0 and "vector_add" in result.output
    out = io.StringIO()  # on an 80-column terminal the name `run` takes is whole, not `fp8_blockscale_g…`
    monkeypatch.setattr(graph.cli, "console", Console(file=out, width=80))
    graph.cli.problems_command()
    assert "fp8_blockscale_gemm" in out.getvalue()


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


def test_verdict_view_keeps_case_names_in_brackets_and_only_the_candidates_frames() -> None:
    """Shapes checked under adversarial values read `size=1 [large magnitudes]`: Rich took the
    bracket for markup and printed `size=1` four times. A candidate's exception shows its own frames,
    not the runner that called it."""
    from sandbox.report import render_verdict
    from sandbox.verdict import Status, SubmissionInfo, TestResult, Verdict

    harness = ROOT / "sandbox" / "runner" / "main.py"
    trace = (
        "ValueError: my bug\nTraceback (most recent call last):\n"
        f'  File "{harness}", line 276, in on_call\n    us, tree = self._timed(fn, data)\n               ^^^^^^^^^^^\n'
        '  File "/tmp/ks-candidate-x/submission.py", line 2, in custom_kernel\n    raise ValueError("my bug [x]")\n'
        "ValueError: my bug [x]\n"
    )
    verdict = Verdict(
        status=Status.runtime_error, message="size=7 [large magnitudes]: ValueError: my bug [x]", target="cpu",
        submission=SubmissionInfo(path="k.py", sha256="0" * 64), wall_seconds=1.0, errors=[trace],
        tests=[TestResult(params={"size": 1}, shape="size=1 [large magnitudes]", passed=True, max_abs_error=0.0),
               TestResult(params={"size": 7}, shape="size=7 [large magnitudes]", passed=False, message="ValueError: my bug [x]")],
    )  # fmt: skip
    out = io.StringIO()
    render_verdict(verdict, Console(file=out, width=160))
    text = out.getvalue()
    assert "size=1 [large magnitudes]" in text and text.count("size=7 [large magnitudes]") == 2, text
    assert "submission.py\", line 2, in custom_kernel" in text and "my bug [x]" in text
    assert "on_call" not in text and "sandbox/runner" not in text


def test_a_harness_trace_is_shown_whole() -> None:
    """A trace with no frame of the candidate is the harness's own failure: nothing to trim."""
    from sandbox.report import candidate_trace

    trace = f'Traceback (most recent call last):\n  File "{ROOT}/sandbox/runner/main.py", line 9, in f\n    x()\nKeyError: 1'
    assert candidate_trace(trace) == trace


def test_off_a_terminal_lines_are_not_cut_at_80_columns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In a pipe or a log, Rich's 80 columns cut the leaderboard to `kern…` and an empty rank column."""
    from graph.progress import leaderboard_table
    from graph.terminal import PIPE_WIDTH, make_console

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console().width == PIPE_WIDTH
    monkeypatch.setenv("COLUMNS", "100")
    assert make_console().width == 100
    archive = Archive(tmp_path / "a.sqlite")
    for geo, origin in ((2616.0, "seed"), (2786.0, "tune")):
        archive.add_kernel(KernelRecord(id="", generation=0, origin=origin, summary="CHUNK 4096; " * 20, source=origin,
                                        sha256=sha256_text(origin), status="ok", geomean_us=geo, parents=["k0", "k12"],
                                        geomean_ci_us=(2380.0, 2874.0), noisy=True))  # fmt: skip
    for width in (PIPE_WIDTH, 120):
        out = io.StringIO()
        Console(file=out, width=width).print(leaderboard_table(archive, width=width))
        header = next(line for line in out.getvalue().splitlines() if "kernel" in line)
        assert "origin" in header and "vs PyTorch" in header and "summary" in header, out.getvalue()
        assert re.search(r"│ 1 │ k0 ", out.getvalue()), out.getvalue()


def test_a_resume_names_what_it_ignores_and_how_a_finished_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --resume RUN -g 5` used to run the old budget without a word."""
    import graph.runs

    handle = create_run(RunConfig(problem="vector_add"), tmp_path / "runs")
    archive = Archive(handle.archive_path)
    archive.set_meta("status", "finished")
    archive.set_meta("stop_reason", "generation budget reached (1)")
    archive.close()
    monkeypatch.setattr(graph.runs, "build_context", lambda *a, **k: None)  # nothing is run: the notes come first
    monkeypatch.setattr(graph.runs, "execute", lambda *a: {"stop_reason": "generation budget reached (1)"})
    runs = ["--runs-dir", str(tmp_path / "runs")]
    result = runner.invoke(app, ["run", "vector_add", "--resume", handle.run_id, "-g", "5", "--budget", "2", "--plain", *runs])
    assert result.exit_code == 0, result.output
    assert "PROBLEM, --generations, --budget ignored: a resumed run keeps its configuration" in result.output
    assert "this run had finished (generation budget reached (1)); --more N runs N more generations" in result.output
    plain = runner.invoke(app, ["run", "--resume", handle.run_id, "--plain", "-d", "vectorise", *runs])
    assert "ignored" not in plain.output and "had finished" in plain.output


def test_resume_latest_resumes_the_run_that_changed_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other commands mean the latest run when RUN is left out; an option's value cannot be left out."""
    import graph.runs

    older = create_run(RunConfig(problem="vector_add"), tmp_path / "runs")
    latest = create_run(RunConfig(problem="softmax"), tmp_path / "runs")
    os.utime(older.archive_path, (0, 0))  # the latest run is the one whose archive changed last
    monkeypatch.setattr(graph.runs, "build_context", lambda *a, **k: None)  # nothing is run
    monkeypatch.setattr(graph.runs, "execute", lambda *a: {"stop_reason": "generation budget reached (1)"})
    result = runner.invoke(app, ["run", "--resume", "latest", "--plain", "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert f"run {latest.run_id} in " in result.output and older.run_id not in result.output


def test_times_in_prompts_and_run_messages_have_no_e_notation() -> None:
    from agents.views import KernelView, population_table, shape_table
    from graph.experiment import duplicate_feedback

    twin = KernelRecord(id="k3", generation=1, origin="tune", summary="CHUNK 4096", source="x", sha256="0",
                        status="ok", geomean_us=11618.3)  # fmt: skip
    view = KernelView(id="k3", parents=[], origin="tune", status="ok", summary="s", geomean_us=11618.3,
                      benchmarks={"n=1": 21060.0, "n=2": 11618.3})  # fmt: skip
    texts = [duplicate_feedback(twin), population_table([view]), shape_table(view, None, ("a", "b")),
             shape_table(view, view, ("a", "b"))]  # fmt: skip
    assert all("e+" not in text for text in texts), texts
    assert "11618 µs" in texts[0] and "21060" in texts[1]


def test_eval_progress_names_the_shape_under_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that hangs on shape 3 showed "check shape 2 of 4" until the phase's limit."""
    import graph.cli

    out = io.StringIO()
    monkeypatch.setattr(graph.cli, "console", Console(file=out, width=160))
    progress = graph.cli.EvalProgress(None, tests=2, benchmarks=1)
    for event in ({"phase": "check"}, {"shape_started": "n=1"}, {"progress": "check", "shape": "n=1"},
                  {"shape_started": "n=2"}, {"progress": "check", "shape": "n=2"}, {"shape_started": "n=1 [big]"},
                  {"phase": "time"}, {"shape_started": "n=8"}):  # fmt: skip
        progress(event)
    assert out.getvalue().splitlines() == [
        "check…", "check shape 1 of 2: n=1", "check shape 2 of 2: n=2", "check shape 3: n=1 [big]", "time…",
        "time shape 1 of 1: n=8",
    ]


def test_kb_stats_asks_chroma_where_the_file_is_not_as_expected(tmp_path: Path) -> None:
    """No store yet (the primer must be loaded), or a file of another layout: None, so Chroma answers."""
    import sqlite3

    from knowledge.stats import read_stats

    assert read_stats(tmp_path) is None
    (tmp_path / "primer.json").write_text("{}")
    with sqlite3.connect(tmp_path / "chroma.sqlite3") as conn:
        conn.execute("CREATE TABLE other (x)")
    assert read_stats(tmp_path) is None


def test_kb_stats_starts_without_chroma() -> None:
    code = "import sys, knowledge.cli, knowledge.stats; print('chromadb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
