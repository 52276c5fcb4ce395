"""The worker's boundaries: its own process, no secrets, only torch/stdlib/PyYAML."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, evaluate, scrubbed_env
from sandbox.judge import isolation
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


def _fake_driver(tmp_path: Path, minors: dict[str, int]) -> tuple[Path, Path]:
    """A /dev with NVIDIA's nodes (plain files stand in for them) and the driver's GPU list, one
    folder per PCI address holding its `information`."""
    dev, gpus = tmp_path / "dev", tmp_path / "gpus"
    dev.mkdir()
    (dev / "nvidia-caps").mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", *(f"nvidia{m}" for m in minors.values())):
        (dev / name).touch()
    for address, minor in minors.items():
        (gpus / address).mkdir(parents=True)
        (gpus / address / "information").write_text(
            f"Model: H100\nIRQ: 1\nGPU UUID: GPU-{minor:04d}\nDevice Minor: {minor}\nBus Type: PCIe\n")
    return dev, gpus


def test_a_gpu_runner_is_given_its_own_gpus_node_and_the_shared_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.judge import isolation

    # Minor numbers need not follow PCI order: index 0 is the lowest address, whose node is nvidia1.
    dev, gpus = _fake_driver(tmp_path, {"0000:3b:00.0": 0, "0000:1a:00.0": 1})
    monkeypatch.setattr(isolation, "_DEV", dev)
    monkeypatch.setattr(isolation, "_NVIDIA_GPUS", gpus)
    view = isolation.gpu_nodes("0")
    names = sorted(Path(n).name for n in view.nodes)
    assert names == ["nvidia-caps", "nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert view.said == f"its own GPU's device node only ({dev / 'nvidia1'})"
    # Inside, the driver counts only the GPUs it can open: the runner names its GPU by UUID.
    assert view.visible == "GPU-0001" and isolation.gpu_nodes("1").visible == "GPU-0000"
    other = {Path(n).name for n in isolation.gpu_nodes("1").nodes}
    assert "nvidia0" in other and "nvidia1" not in other
    both = isolation.gpu_nodes("0,1")
    assert {"nvidia0", "nvidia1"} <= {Path(n).name for n in both.nodes} and both.visible == "GPU-0001,GPU-0000"


@pytest.mark.parametrize("visible, information", [
    ("GPU-5c1d2e3f", "Device Minor: 0\n"),  # named by UUID: no index to look up
    ("MIG-1234", "Device Minor: 0\n"),
    ("2", "Device Minor: 0\n"),  # an index past the driver's list
    ("0", "Model: H100\n"),  # a list without minor numbers
    (None, "Device Minor: 0\n"),
])
def test_where_the_gpu_cannot_be_told_apart_every_node_is_bound_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, visible: str | None, information: str
) -> None:
    from sandbox.judge import isolation

    dev, gpus = _fake_driver(tmp_path, {"0000:1a:00.0": 0, "0000:3b:00.0": 1})
    (gpus / "0000:1a:00.0" / "information").write_text(information)
    monkeypatch.setattr(isolation, "_DEV", dev)
    monkeypatch.setattr(isolation, "_NVIDIA_GPUS", gpus)
    view = isolation.gpu_nodes(visible)
    assert {"nvidia0", "nvidia1", "nvidiactl"} <= {Path(n).name for n in view.nodes}
    assert view.said == "every GPU's device nodes" and view.visible is None


def test_a_minor_number_whose_node_is_missing_binds_every_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.judge import isolation

    dev, gpus = _fake_driver(tmp_path, {"0000:1a:00.0": 0})
    (gpus / "0000:1a:00.0" / "information").write_text("Device Minor: 5\n")  # no /dev/nvidia5 in this view
    monkeypatch.setattr(isolation, "_DEV", dev)
    monkeypatch.setattr(isolation, "_NVIDIA_GPUS", gpus)
    assert isolation.gpu_nodes("0").said == "every GPU's device nodes"


def test_the_runners_sandbox_binds_only_the_nodes_its_gpu_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.judge import isolation

    if not isolation.probe().available:
        pytest.skip("no bubblewrap here")
    dev, gpus = _fake_driver(tmp_path, {"0000:1a:00.0": 0, "0000:3b:00.0": 1})
    monkeypatch.setattr(isolation, "_DEV", dev)
    monkeypatch.setattr(isolation, "_NVIDIA_GPUS", gpus)
    args = isolation.command(["true"], env={"CUDA_VISIBLE_DEVICES": "1"}, readable=[], hidden=[], gpu=True)
    bound = [args[i + 1] for i, a in enumerate(args) if a == "--dev-bind"]
    assert str(dev / "nvidia1") in bound and str(dev / "nvidia0") not in bound and str(dev / "nvidiactl") in bound
    assert args[args.index("CUDA_VISIBLE_DEVICES") + 1] == "GPU-0001"  # the driver inside sees one GPU


class _Dist:
    """A distribution's files as importlib.metadata hands them over."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def read_text(self, name: str) -> str | None:
        return self.files.get(name)


def test_a_distributions_requirements_are_read_from_its_headers_alone() -> None:
    metadata = ("Metadata-Version: 2.1\nName: some_pkg\nRequires-Dist: numpy>=1.2\n"
                "Requires-Dist: rich ; extra == 'cli'\n\nRequires-Dist: in the description, not a header\n")
    assert isolation._name_and_requirements(_Dist({"METADATA": metadata})) == (
        "some_pkg", ["numpy>=1.2", "rich ; extra == 'cli'"])
    assert isolation._name_and_requirements(_Dist({"PKG-INFO": "Name: old\n"})) == ("old", [])
    assert isolation._name_and_requirements(_Dist({})) == (None, [])


def test_a_record_rows_first_part_is_read_with_or_without_quotes() -> None:
    assert isolation._first_part("torch/lib/libc10.so,sha256=abc,123") == "torch"
    assert isolation._first_part("six.py,sha256=abc,1") == "six.py"
    assert isolation._first_part('"odd,name/x.py",sha256=abc,1') == "odd,name"


def test_the_runner_keeps_torch_and_what_it_needs_and_loses_the_projects_other_packages() -> None:
    folders, _ = isolation._unneeded_packages()
    names = {Path(folder).name for folder in folders}
    assert not names & {"torch", "numpy", "yaml", "triton", "sympy", "networkx", "jinja2"}
    assert {"langgraph", "chromadb", "pydantic"} <= names


def test_a_gpu_runner_starts_from_the_judges_kernel_builds_and_a_cpu_runner_never_sees_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.judge import session
    from sandbox.runner import main as runner_main

    monkeypatch.setenv("KS_CACHE_DIR", str(tmp_path / "cache"))
    assert "KS_JUDGE_KERNELS" not in session._secret_free_env(gpu=True)  # no judge has built a kernel yet
    built = session.judge_kernel_cache() / "abc123"
    built.mkdir(parents=True)
    (built / "fold.cubin").write_bytes(b"cubin")
    assert "KS_JUDGE_KERNELS" not in session._secret_free_env(gpu=False)
    env = session._secret_free_env(gpu=True)
    assert env["KS_JUDGE_KERNELS"] == str(session.judge_kernel_cache())
    private = tmp_path / "runner-tmp" / "triton"
    monkeypatch.setenv("KS_JUDGE_KERNELS", env["KS_JUDGE_KERNELS"])
    monkeypatch.setenv("TRITON_CACHE_DIR", str(private))
    runner_main._seed_kernel_cache()
    assert (private / "abc123" / "fold.cubin").read_bytes() == b"cubin"
    assert "KS_JUDGE_KERNELS" not in os.environ  # nothing of the judge's paths left for the candidate to read
    (private / "abc123" / "fold.cubin").write_bytes(b"changed in the runner")
    assert (built / "fold.cubin").read_bytes() == b"cubin"  # a copy: the judges' own builds stay as they were
