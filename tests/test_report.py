"""The run report (HTML and PNG figures) rendered in headless Chromium, and the status command."""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import subprocess
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph.archive import Archive
from graph.chat import ChatSession
from graph.chat_tools import RunTools
from graph.cli import app
from graph.config import LLMSettings
from graph.report import write_report
from graph.report_data import collect_report
from graph.run_data import baselines, num, num_interval
from graph.runs import RunHandle, build_context, create_run, execute
from tests.chat_script import BROKEN_SOURCE, mixed_run, run_config

pytestmark = pytest.mark.slow  # every test here starts runs, workers or a server

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
FIGURES = {"leaderboard", "progress", "shapes", "lineage", "spend"}
runner = CliRunner()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunHandle, Archive]:
    return mixed_run(tmp_path_factory.mktemp("report") / "runs", generations=2)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_report_data_holds_the_archive_numbers(run: tuple[RunHandle, Archive]) -> None:
    handle, archive = run
    data = collect_report(archive, handle.run_id, "cpu")
    best, seed = archive.run_best(), archive.seed()
    assert (data.best_id, data.seed_id) == (best.id, seed.id)
    assert [r.id for r in data.leaderboard] == [k.id for k in archive.leaderboard()]
    assert data.speedup_over_seed == pytest.approx(seed.geomean_us / best.geomean_us)
    # Generation 0 is the seed; then one point per finished generation, each with the run's best so far.
    assert [g.generation for g in data.generations] == [0, 1, 2]
    assert [g.best_geomean_us for g in data.generations[1:]] == [g["best_geomean_us"] for g in archive.generations()]
    # The reference and speed-of-light times come from the verdicts' benchmarks.
    verdict = json.loads(archive.kernel_verdict(seed.id))
    sol = {b["shape"]: b["sol_us"] for b in verdict["benchmarks"]}
    assert data.baselines.sol_us == sol and set(data.baselines.reference_us) == set(sol)
    # One failed experiment per generation (the file that does not compile), and the diff is seed -> best.
    assert data.experiments == 4 and data.failed_experiments == 2
    assert f"--- {seed.id} (seed)" in data.diff and f"+++ {best.id} (" in data.diff
    assert {s.role for s in data.spend} == {"selector", "researcher", "coder", "critic"}


def test_report_files_are_self_contained(run: tuple[RunHandle, Archive], tmp_path: Path) -> None:
    handle, archive = run
    files = write_report(archive, handle.run_id, "cpu", tmp_path / "report")
    assert set(files.figures) == FIGURES
    page = files.html.read_text()
    assert "<link" not in page and "<script" not in page and "http" not in page  # nothing fetched
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(embedded) == len(FIGURES)
    for name, path in files.figures.items():
        width, height = png_size(path.read_bytes())
        assert width >= 400 and height >= 200, name
        assert base64.b64encode(path.read_bytes()).decode() in embedded  # the same image, inline


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup.sh installs it)")
def test_report_renders_in_headless_chromium(run: tuple[RunHandle, Archive], tmp_path: Path) -> None:
    handle, archive = run
    files = write_report(archive, handle.run_id, "cpu", tmp_path / "report")
    # A probe page beside the report loads it in a frame and reads what the browser made of it.
    probe = files.html.parent / "probe.html"
    probe.write_text(PROBE)
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
         "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    match = re.search(r'<pre id="out">(.*?)</pre>', result.stdout, re.DOTALL)
    assert match, result.stdout[-2000:] + result.stderr[-2000:]
    seen = json.loads(match.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert seen["sections"] == ["leaderboard", "progress", "shapes", "lineage", "diff", "source", "spend", "directives"]
    assert seen["source"] == archive.run_best().source  # the best kernel in full, to read or copy
    # Every figure decoded and was laid out with a size on the page.
    assert len(seen["images"]) == len(FIGURES)
    for image in seen["images"]:
        assert image["natural"][0] >= 400 and image["natural"][1] >= 200, image
        assert image["shown"][0] > 100 and image["shown"][1] > 50, image
    # The leaderboard as the browser shows it: the archive's kernels in order with their times.
    board = archive.leaderboard()
    assert [row[1] for row in seen["leaderboard"]] == [k.id for k in board]
    assert [row[5] for row in seen["leaderboard"]] == [
        num_interval(k.geomean_us, k.geomean_ci_us) + (" (busy host)" if k.noisy else "") for k in board]
    # Per-shape table: the PyTorch reference and the speed of light for every benchmark shape.
    base = baselines(archive)
    assert [row[0] for row in seen["shapes"]] == base.shapes
    assert [row[-1] for row in seen["shapes"]] == [num(base.sol_us[s]) for s in base.shapes]
    # The lineage tree holds every kernel, each edge labelled with its plan; the best is marked.
    assert sorted(seen["tree"]) == sorted(k.id for k in archive.kernels())
    assert "parallel rows, one exponential per element" in seen["plans"]
    assert "fused max and sum in one sweep" in seen["plans"]
    assert seen["best"] == archive.run_best().id
    # The diff shows the best kernel's added lines and the seed's removed ones.
    assert seen["added"] > 0 and seen["removed"] > 0
    assert any("omp" in line for line in seen["added_text"])
    assert sorted(seen["spend_roles"]) == ["coder", "critic", "researcher", "selector"]


PROBE = """<!DOCTYPE html><html><body><pre id="out">pending</pre>
<iframe id="f" src="index.html" width="1200" height="900" onload="
var d = document.getElementById('f').contentDocument;
var rows = function (sel) { return Array.from(d.querySelectorAll(sel + ' tbody tr')).map(function (tr) {
  return Array.from(tr.cells).map(function (c) { return c.textContent.trim(); }); }); };
document.getElementById('out').textContent = JSON.stringify({
  sections: Array.from(d.querySelectorAll('section')).map(function (s) { return s.id; }),
  images: Array.from(d.images).map(function (i) { var r = i.getBoundingClientRect();
    return {alt: i.alt, natural: [i.naturalWidth, i.naturalHeight], shown: [r.width, r.height]}; }),
  leaderboard: rows('#leaderboard'),
  shapes: rows('#shapes'),
  tree: Array.from(d.querySelectorAll('#lineage li > span[id]')).map(function (s) { return s.textContent; }),
  plans: Array.from(d.querySelectorAll('#lineage .plan')).map(function (s) { return s.textContent; }).join(' '),
  best: (d.querySelector('#lineage .best') || {}).textContent,
  added: d.querySelectorAll('#diff .add').length,
  removed: d.querySelectorAll('#diff .del').length,
  added_text: Array.from(d.querySelectorAll('#diff .add')).map(function (s) { return s.textContent; }),
  spend_roles: rows('#spend').map(function (r) { return r[0]; }),
  source: (d.querySelector('#source pre') || {}).textContent
});
"></iframe></body></html>
"""


def test_status_and_report_commands(run: tuple[RunHandle, Archive], tmp_path: Path) -> None:
    handle, archive = run
    status = runner.invoke(app, ["status", str(handle.run_dir)], env={"COLUMNS": "120"})
    assert status.exit_code == 0, status.output
    best = archive.run_best()
    assert f"best {best.id}: {num_interval(best.geomean_us, best.geomean_ci_us, 'µs')}" in status.output
    assert "finished" in status.output and "generation 2 of 2" in status.output
    for k in archive.leaderboard():
        assert re.search(rf"\b{k.id}\b.*{re.escape(num(k.geomean_us))}", status.output), k.id
    out = tmp_path / "out"
    report = runner.invoke(app, ["report", str(handle.run_dir), "--out", str(out)])
    assert report.exit_code == 0, report.output
    assert (out / "index.html").is_file() and {p.stem for p in out.glob("*.png")} == FIGURES
    missing = runner.invoke(app, ["status", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no run" in missing.output
    # Without RUN, every command means the latest run under the runs directory.
    latest = runner.invoke(app, ["status", "--runs-dir", str(handle.run_dir.parent)], env={"COLUMNS": "120"})
    assert latest.exit_code == 0 and handle.run_id in latest.output
    empty = runner.invoke(app, ["status", "--runs-dir", str(tmp_path / "none")])
    assert empty.exit_code == 2 and "no runs in" in empty.output


def test_show_and_compare_a_runs_kernels(run: tuple[RunHandle, Archive]) -> None:
    handle, archive = run
    # The kernel the run crowned (a verified win), which on a noisy host need not be the leaderboard's top.
    best, seed = archive.run_best(), archive.seed()
    assert best is not None and seed is not None
    runs_dir = str(handle.run_dir.parent)
    shown = runner.invoke(app, ["show", "--runs-dir", runs_dir], env={"COLUMNS": "160"})
    assert shown.exit_code == 0, shown.output
    # The crowned kernel by default: its source, its verdict's per-shape medians with their spread.
    assert shown.output.startswith(f"{best.id} of {handle.run_id}"), shown.output[:200]
    assert best.source.strip().splitlines()[-1].strip() in shown.output
    verdict = json.loads(archive.kernel_verdict(best.id))
    for bench in verdict["benchmarks"]:
        assert re.search(
            rf"{re.escape(bench['shape'])}.*{re.escape(num(bench['median_us']))}.*{re.escape(num(bench['p25_us']))}–",
            shown.output,
        ), bench["shape"]
    # On the CPU no verdict holds a static report: show compiles the source for which loops g++ vectorised.
    assert f"compiling {best.id} for its vectorisation report" in shown.output
    assert "vectorisation report (g++" in shown.output
    if shutil.which("g++"):
        assert re.search(r"\d+ of \d+ loops vectorised by the compiler", shown.output), shown.output
        assert re.search(r"^line \d+: (vectorised|not vectorised)", shown.output, re.M), shown.output
    one = runner.invoke(app, ["show", seed.id, "--runs-dir", runs_dir], env={"COLUMNS": "160"})
    assert one.exit_code == 0 and f"{seed.id} of {handle.run_id}" in one.output  # a lone KERNEL: the latest run
    unknown = runner.invoke(app, ["show", handle.run_id, "k999", "--runs-dir", runs_dir])
    assert unknown.exit_code == 2 and "no kernel 'k999'" in unknown.output and seed.id in unknown.output
    compared = runner.invoke(app, ["compare", seed.id, best.id, "--stored", "--runs-dir", runs_dir], env={"COLUMNS": "160"})
    assert compared.exit_code == 0, compared.output
    shape = verdict["benchmarks"][0]["shape"]
    ratio_text = f"{seed.benchmarks[shape] / best.benchmarks[shape]:.2f}x"  # B's speed-up over A, per shape
    assert re.search(rf"{re.escape(shape)}.*{re.escape(num(seed.benchmarks[shape]))}.*{re.escape(ratio_text)}", compared.output)
    assert f"--- {seed.id}" in compared.output and f"+++ {best.id}" in compared.output
    # The chat's /source shows the best kernel's source whole, without a model.
    source = ChatSession(handle, archive).slash("/source")
    assert best.id in source and best.source.rstrip() in source


def test_show_gives_the_leaderboards_speed_over_the_seed(run: tuple[RunHandle, Archive]) -> None:
    """`show k3` said 1.53x the seed (two separate timings) while `status` said 0.74x ✓ (side by side)
    for the same kernel: show takes the leaderboards' figure, the side-by-side one where there is one."""
    from graph import verify

    handle, archive = run
    best, seed = archive.run_best(), archive.seed()
    separate = seed.geomean_us / best.geomean_us
    paired = round(separate / 2, 2)  # a side-by-side measurement far from the two separate timings
    verify.record(archive, verify.Verification(
        kernel_id=best.id, base_id=seed.id, kernel_sha256=best.sha256, base_sha256=seed.sha256, status="ok",
        ratio=paired, ratio_ci=(paired * 0.95, paired * 1.05), difference="slower",
    ))  # fmt: skip
    shown = runner.invoke(app, ["show", str(handle.run_dir), best.id], env={"COLUMNS": "160"})
    status = runner.invoke(app, ["status", str(handle.run_dir)], env={"COLUMNS": "160"})
    assert shown.exit_code == 0 and status.exit_code == 0, shown.output + status.output
    assert f"{paired:.2f}x ✓ the seed" in shown.output and f"{separate:.2f}x the seed" not in shown.output
    assert re.search(rf"^\s*\d+\s+{best.id}\s.*\s{paired:.2f}x ✓", status.output, re.M), status.output  # its row


def test_compare_times_both_kernels_again(run: tuple[RunHandle, Archive]) -> None:
    handle, archive = run
    best, seed = archive.best(), archive.seed()
    args = ["compare", str(handle.run_dir), seed.id, best.id, "--budget", "0.1"]
    compared = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert compared.exit_code == 0, compared.output
    assert "re-timed now, 0.1 s per shape each" in compared.output
    assert f"kernel-scientist verify {handle.run_id} {best.id} --against {seed.id}" in compared.output
    # Every benchmark shape has a fresh median for both and a ratio (not "-").
    for shape in seed.benchmarks:
        row = next(line for line in compared.output.splitlines() if line.strip(" │|").startswith(shape))
        assert re.search(r"\d\.\d\dx", row) and row.count("–") == 2, row


def test_verify_times_the_best_beside_the_seed_and_keeps_the_measurement(run: tuple[RunHandle, Archive]) -> None:
    from graph import verify

    handle, archive = run
    best, seed = archive.best(), archive.seed()
    before = len(verify.verifications(archive))
    result = runner.invoke(app, ["verify", str(handle.run_dir), best.id], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert f"{best.id} beside {seed.id}" in result.output
    for shape in seed.benchmarks:
        row = next(line for line in result.output.splitlines() if line.strip(" │|").startswith(shape))
        assert re.search(r"\d\.\d{3}×", row) and re.search(r"\d\.\d{3}–\d\.\d{3}", row), row
    kept = verify.verifications(archive)
    assert len(kept) == before + 1 and kept[-1].kernel_id == best.id and kept[-1].base_id == seed.id
    assert kept[-1].difference in ("faster", "slower", "no measurable difference")
    refused = runner.invoke(app, ["verify", str(handle.run_dir), seed.id])
    assert refused.exit_code == 2 and "is the base itself" in refused.output


def test_a_run_whose_seed_fails_still_gets_a_report(tmp_path: Path) -> None:
    seed = tmp_path / "seed.py"
    seed.write_text(BROKEN_SOURCE)
    handle = create_run(run_config(seed=str(seed), llm=LLMSettings()), tmp_path / "runs")
    archive = Archive(handle.archive_path)
    final = execute(handle, build_context(handle, archive))
    assert final["stop_reason"].startswith("the seed kernel seed.py does not pass: build_error: build of")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # empty figures draw without complaints
        files = write_report(archive, handle.run_id, "cpu", tmp_path / "report")
    # No correct kernel and no LLM: neither a leaderboard figure nor an empty spend axis.
    assert set(files.figures) == FIGURES - {"leaderboard", "spend"}
    page = files.html.read_text()
    assert "No correct kernel yet." in page and "No LLM calls" in page and "build_error" in page
    status = runner.invoke(app, ["status", str(handle.run_dir)])
    assert status.exit_code == 0 and "the seed kernel seed.py does not pass" in status.output
    tools = RunTools(handle, archive)
    assert "(no correct kernel yet)" in tools.leaderboard() and "1 kernel(s) failed" in tools.leaderboard()
    assert "stopped: the seed kernel seed.py does not pass" in tools.run_status()
