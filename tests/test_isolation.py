"""The worker's boundaries: its own process, no secrets, only torch/stdlib/PyYAML."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, evaluate, scrubbed_env
from sandbox.verdict import Status

ROOT = Path(__file__).resolve().parent.parent

@pytest.mark.slow
def test_candidate_sees_no_secrets_and_runs_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-should-not-leak")
    monkeypatch.setenv("HF_TOKEN", "hf-should-not-leak")
    monkeypatch.setenv("KS_SECRET_TOKEN", "ks-should-not-leak")
    spy = tmp_path / "spy.py"
    # The runner can write nowhere the test could read, so the spy reports through its own failure.
    spy.write_text(
        "import json, os\n"
        "raise RuntimeError('SEEN' + json.dumps({'env': dict(os.environ), 'pid': os.getpid(), 'cwd': os.getcwd()}))\n"
    )
    verdict = evaluate("vector_add", spy, EvalOptions(target="cpu", mode="check"))
    assert verdict.status == Status.runtime_error, verdict.message
    seen = json.loads(verdict.message.split("SEEN", 1)[1])
    assert "should-not-leak" not in json.dumps(seen["env"]) and "KS_EVENT_FD" not in seen["env"]
    assert seen["pid"] != os.getpid()
    assert seen["cwd"] != os.getcwd()


def test_scrubbed_env_keeps_what_builds_need(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    monkeypatch.setenv("GITHUB_TOKEN", "x")
    env = scrubbed_env()
    assert env["CUDA_HOME"] == "/usr/local/cuda" and "PATH" in env
    assert "GITHUB_TOKEN" not in env and env["PYTHONPATH"] == str(ROOT)


@pytest.mark.slow
def test_worker_side_needs_only_torch_stdlib_and_yaml() -> None:
    # Block the orchestrator-side libraries, then import every worker module.
    script = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'pydantic', 'typer', 'rich', 'langchain', 'langgraph', 'chromadb', 'numpy_not_needed'}:
            raise ImportError('blocked ' + name)
sys.meta_path.insert(0, Block())
import sandbox.judge.main, sandbox.judge.evaluation, sandbox.runner.main, sandbox.problem, sandbox.native, sandbox.timing
import sandbox.compare, sandbox.targets, sandbox.envinfo, sandbox.buildcache, sandbox.integrity
import sandbox.static_analysis, sandbox.rocprof, sandbox.hip, sandbox.roctx, sandbox.summary
import sandbox.devicelock, sandbox.profiled
print('ok')
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT))
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_sandbox_never_imports_langchain_or_langgraph() -> None:
    for path in (ROOT / "sandbox").rglob("*.py"):
        text = path.read_text()
        assert "langchain" not in text and "langgraph" not in text, path
