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
