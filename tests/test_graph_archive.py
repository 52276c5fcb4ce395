"""The run archive, configuration loading and export, without running the graph."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from graph.archive import Archive, KernelRecord, sha256_text
from graph.config import ConfigError, load_llm_settings
from graph.export import ExportError, export_kernel, submission_text


def record(status: str = "ok", geo: float | None = 1.0, **kw: object) -> KernelRecord:
    fields = {
        "id": "",
        "generation": 1,
        "origin": "llm",
        "summary": "s",
        "source": "x",
        "sha256": sha256_text("x"),
        "status": status,
        "geomean_us": geo,
    } | kw
    return KernelRecord(**fields)


def test_kernel_ids_leaderboard_and_resume_safe_attempts(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a.sqlite")
    k0 = archive.add_kernel(record(geo=10.0, origin="seed"))
    k1 = archive.add_kernel(record(geo=5.0, experiment_id="g1e0", attempt=0))
    again = archive.add_kernel(record(geo=7.0, experiment_id="g1e0", attempt=0))  # replayed after a restart
    archive.add_kernel(record(status="wrong_output", geo=None))
    assert (k0.id, k1.id, again.id) == ("k0", "k1", "k1")
    assert [k.id for k in archive.leaderboard()] == ["k1", "k0"]
    assert archive.best().id == "k1" and archive.seed().id == "k0"
    reopened = Archive(tmp_path / "a.sqlite")
    assert len(reopened.kernels()) == 3


def test_archive_is_safe_across_threads_and_counts_spend(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a.sqlite")

    def add(i: int) -> None:
        archive.add_kernel(record(geo=float(i + 1)))
        archive.add_llm_call(
            {"role": "coder", "model": "m", "ok": i % 4 != 0, "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.5}
        )

    threads = [threading.Thread(target=add, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(k.id for k in archive.kernels()) == sorted(f"k{i}" for i in range(16))
    spend = archive.spend()
    assert (spend.calls, spend.failed, spend.tokens, spend.cost_usd) == (16, 4, 240, 8.0)
    assert (archive.spend_by_role()["coder"].calls, archive.spend_by_role()["coder"].failed) == (16, 4)


def test_directives_and_memoised_steps(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a.sqlite")
    first = archive.add_directive("focus on M=6144")
    archive.add_directive("stop trying split-K")
    archive.retire_directive(first)
    assert archive.directives() == ["stop trying split-K"]
    with pytest.raises(ValueError):
        archive.add_directive("  ")
    assert archive.get_step("g1/select") is None
    archive.put_step("g1/select", {"value": {"base_id": "k0"}, "by": "llm"})
    assert Archive(tmp_path / "a.sqlite").get_step("g1/select")["value"]["base_id"] == "k0"


def test_export_writes_popcorn_header_and_refuses_failed_kernels(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a.sqlite")
    with pytest.raises(ExportError, match="no correct"):
        export_kernel(archive, tmp_path / "s.py", "hip")
    archive.set_meta("problem_name", "fp8_blockscale_gemm")
    archive.add_kernel(record(source="#!POPCORN leaderboard old\n\nimport torch\n"))
    bad = archive.add_kernel(record(status="crash", geo=None))
    out = tmp_path / "s.py"
    export_kernel(archive, out, "hip", leaderboard="amd-fp8-mm")
    assert out.read_text() == "#!POPCORN leaderboard amd-fp8-mm\n#!POPCORN gpus MI300\nimport torch\n"
    with pytest.raises(ExportError, match="did not pass"):
        export_kernel(archive, out, "hip", kernel_id=bad.id)
    assert submission_text("x = 1\n", "p", None) == "#!POPCORN leaderboard p\nx = 1\n"


def test_llm_settings_from_file_flags_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KS_LLM_MODEL", raising=False)
    monkeypatch.delenv("KS_LLM_BASE_URL", raising=False)
    assert not load_llm_settings(None).configured
    path = tmp_path / "llm.yml"
    path.write_text("llm:\n  default: {model: small, base_url: 'http://127.0.0.1:8000/v1'}\n  coder: {model: big}\n")
    settings = load_llm_settings(path)
    assert settings.for_role("coder").model == "big" and settings.for_role("critic").model == "small"
    monkeypatch.setenv("KS_LLM_MODEL", "env-model")
    assert load_llm_settings(path).for_role("selector").model == "env-model"
    path.write_text("default: {model: m, api_key: 'sk-should-not-be-here'}\n")
    with pytest.raises(ConfigError, match="bad LLM settings"):
        load_llm_settings(path)


@pytest.mark.slow
def test_a_run_is_executed_by_one_process_at_a_time(tmp_path: Path) -> None:
    import subprocess
    import sys

    from graph.runs import RunError, _refuse_if_running_elsewhere

    archive = Archive(tmp_path / "a.sqlite")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        archive.set_meta("status", "running")
        archive.set_meta("pid", other.pid)
        with pytest.raises(RunError, match=f"already running in process {other.pid}"):
            _refuse_if_running_elsewhere(archive, "r1")
        assert archive.get_meta("status") == "running"
    finally:
        other.kill()
        other.wait()
    _refuse_if_running_elsewhere(archive, "r1")  # its process is gone: resuming is allowed
    archive.set_meta("status", "finished")
    archive.set_meta("pid", 1)
    _refuse_if_running_elsewhere(archive, "r1")  # a finished run may be extended from anywhere
