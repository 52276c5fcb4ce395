"""The kernel-scientist command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from graph.cli import app

runner = CliRunner()


def test_eval_seed_prints_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "verdict.json"
    result = runner.invoke(app, ["eval", "vector_add", "--target", "cpu", "--budget", "0.1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "verdict" in result.output and "geomean" in result.output and "size=1000" in result.output
    data = json.loads(out.read_text())
    assert data["status"] == "ok" and data["schema_version"] == 1


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


def test_problems_lists_bundled() -> None:
    result = runner.invoke(app, ["problems"])
    assert result.exit_code == 0 and "vector_add" in result.output
