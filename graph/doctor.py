"""What this machine can do for each target, what is missing, and the command that fixes it.

`kernel-scientist doctor` runs these checks; a run's preflight (graph/preflight.py) points at it.
Each check looks only: it installs nothing and runs no candidate. Findings are data (`Finding`),
so the command can print them and write them as JSON.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

log = logging.getLogger(__name__)

TARGETS = ("cpu", "cuda", "hip")
ENDPOINT_TIMEOUT_S = 5.0
APT = "apt-get install -y"


class Finding(BaseModel):
    """One thing checked: what was found, and, where it is missing, the command that fixes it."""

    target: str  # cpu, cuda, hip, or "any" for what every target uses
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True  # False: evaluations still run without it, with less (a profiler, a report)


def _first_line(command: list[str]) -> str:
    """The first non-empty output line of a command, '' when it cannot run."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return lines[0] if lines else ""


def _tool(target: str, name: str, program: str, fix: str, *, version_flag: str = "--version",
          required: bool = True, pick: Callable[[str], bool] | None = None) -> Finding:
    """A program on PATH and its version line (the first one `pick` accepts, else the first)."""
    path = shutil.which(program)
    if path is None:
        return Finding(target=target, name=name, ok=False, detail=f"{program} not found", fix=fix, required=required)
    try:
        out = subprocess.run([path, version_flag], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    version = next((line for line in lines if pick is None or pick(line)), lines[0] if lines else "")
    return Finding(target=target, name=name, ok=True, detail=f"{path}: {version}".rstrip(": "), required=required)


# -- every target ---------------------------------------------------------------------------------


def torch_build() -> Finding:
    """PyTorch and what it was built for: the CPU, CUDA or ROCm."""
    try:
        import torch
    except ImportError as exc:
        return Finding(target="any", name="PyTorch", ok=False, detail=str(exc), fix="bash scripts/setup.sh")
    if torch.version.hip:
        build = f"ROCm (HIP {torch.version.hip})"
    elif torch.version.cuda:
        build = f"CUDA {torch.version.cuda}"
    else:
        build = "CPU only"
    return Finding(target="any", name="PyTorch", ok=True, detail=f"torch {torch.__version__}, {build}")


def isolation() -> Finding:
    """bubblewrap and namespaces: what keeps a candidate away from the judge and the network."""
    from sandbox.judge import isolation as iso

    found = iso.probe()
    fix = "" if found.available else f"{APT} bubblewrap (and allow unprivileged user namespaces)"
    return Finding(target="any", name="candidate isolation", ok=found.available, detail=found.describe(), fix=fix,
                   required=False)


def perf_sampler() -> Finding:
    """perf samples the runner for library code a problem forbids."""
    found = _tool("any", "perf (library-use sampling)", "perf", f"{APT} linux-perf", required=False)
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
    if found.ok and paranoid.is_file() and int(paranoid.read_text().strip() or "0") > 2:
        found.ok, found.fix = False, "sysctl kernel.perf_event_paranoid=2"
        found.detail += f"; perf_event_paranoid is {paranoid.read_text().strip()}, sampling is refused"
    return found


def knowledge_base() -> Finding:
    """The Researcher's literature store: its folder and whether anything was ingested."""
    from knowledge.store import default_store_path

    path = default_store_path()
    if not path.is_dir():
        return Finding(target="any", name="knowledge base", ok=False, detail=f"no store at {path}",
                       fix="kernel-scientist kb --help (ingest documents; the built-in primer loads on first use)",
                       required=False)
    files = sum(1 for _ in path.rglob("*") if _.is_file())
    return Finding(target="any", name="knowledge base", ok=True, detail=f"{path} ({files} files)", required=False)


def llm_endpoint() -> Finding:
    """The LLM endpoint from $KS_LLM_BASE_URL: does it answer at all (its /models, no key sent)."""
    base_url = os.environ.get("KS_LLM_BASE_URL")
    model = os.environ.get("KS_LLM_MODEL")
    if not base_url:
        detail = "no $KS_LLM_BASE_URL: runs use the Tuner only unless --base-url/--llm-config is given"
        if model:
            detail = f"$KS_LLM_MODEL={model} with the OpenAI API (no $KS_LLM_BASE_URL)"
        return Finding(target="any", name="LLM endpoint", ok=bool(model), detail=detail,
                       fix="" if model else "export KS_LLM_BASE_URL=http://host:port/v1 KS_LLM_MODEL=name",
                       required=False)
    key = "set" if os.environ.get("OPENAI_API_KEY") else "not set"
    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=ENDPOINT_TIMEOUT_S) as reply:
            status = reply.status
    except urllib.error.HTTPError as exc:  # it answered: 401 without a key still means reachable
        status = exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Finding(target="any", name="LLM endpoint", ok=False, required=False,
                       detail=f"{base_url} does not answer ({getattr(exc, 'reason', exc)}); $OPENAI_API_KEY {key}",
                       fix="start the server or correct $KS_LLM_BASE_URL")
    return Finding(target="any", name="LLM endpoint", ok=True, required=False,
                   detail=f"{base_url} answered ({status}); model {model or 'not set'}; $OPENAI_API_KEY {key}")


# -- per target -------------------------------------------------------------------------------------


def cpu_findings() -> list[Finding]:
    compiler = os.environ.get("CXX", "g++")
    return [_tool("cpu", "C++ compiler (CPU kernels, OpenMP)", compiler, f"{APT} g++")]


def _torch_gpus(vendor: str) -> Finding:
    """The GPUs PyTorch sees for a vendor, with their architecture."""
    target = "cuda" if vendor == "nvidia" else "hip"
    try:
        import torch
    except ImportError:
        return Finding(target=target, name="GPUs (PyTorch)", ok=False, detail="no PyTorch", fix="bash scripts/setup.sh")
    right_build = bool(torch.version.hip) if vendor == "amd" else bool(torch.version.cuda)
    build_fix = ("install PyTorch's ROCm build (KS_TORCH=<its wheel> bash scripts/setup.sh)" if vendor == "amd"
                 else "install PyTorch's CUDA build (KS_TORCH=<its wheel> bash scripts/setup.sh)")
    if not right_build:
        return Finding(target=target, name="GPUs (PyTorch)", ok=False,
                       detail=f"this PyTorch ({torch.__version__}) is not a {'ROCm' if vendor == 'amd' else 'CUDA'} build",
                       fix=build_fix)
    if not torch.cuda.is_available():
        return Finding(target=target, name="GPUs (PyTorch)", ok=False, detail="PyTorch sees no GPU",
                       fix="check the driver (nvidia-smi / rocm-smi) and the device permissions")
    names = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        arch = getattr(props, "gcnArchName", "") if vendor == "amd" else f"sm_{props.major}{props.minor}"
        names.append(f"{index}: {props.name} ({arch})")
    return Finding(target=target, name="GPUs (PyTorch)", ok=True, detail="; ".join(names))


def _driver_gpus(target: str) -> Finding:
    """GPUs the kernel driver reports (nvidia-smi; /sys/class/kfd for AMD), with or without PyTorch."""
    from sandbox.devices import visible_gpus

    found = visible_gpus(target)
    where = "nvidia-smi" if target == "cuda" else "/sys/class/kfd"
    return Finding(target=target, name="GPUs (driver)", ok=bool(found),
                   detail=f"{len(found)} GPU(s) in {where}" if found else f"{where} shows no GPU",
                   fix="" if found else f"run on a host with {'an NVIDIA' if target == 'cuda' else 'an AMD'} GPU "
                   "and its driver (static reports still work without one)")


def cuda_findings() -> list[Finding]:
    from sandbox.static_nvidia import find_cuobjdump

    cuobjdump = find_cuobjdump()
    return [
        _torch_gpus("nvidia"),
        _driver_gpus("cuda"),
        _tool("cuda", "nvcc (CUDA kernels, static reports)", "nvcc", "install the CUDA toolkit (nvcc)",
              pick=lambda line: "release" in line),
        Finding(target="cuda", name="cuobjdump (SASS counts)", ok=cuobjdump is not None, required=False,
                detail=cuobjdump or "not found", fix="" if cuobjdump else "bash scripts/setup.sh (NVIDIA's wheels)"),
        _tool("cuda", "Nsight Compute (ncu, counters)", "ncu", "install Nsight Compute", required=False),
        _python_module("cuda", "Triton (Triton seeds)", "triton", "pip install triton"),
    ]


def _python_module(target: str, name: str, module: str, fix: str) -> Finding:
    import importlib.util

    spec = importlib.util.find_spec(module)
    return Finding(target=target, name=name, ok=spec is not None, required=False,
                   detail=str(spec.origin) if spec else f"no module {module}", fix="" if spec else fix)


def hip_findings() -> list[Finding]:
    from sandbox import hip, rocprof

    toolchain = hip.mi300_toolchain()
    if toolchain is None:
        static = Finding(target="hip", name="MI300 static reports", ok=False, required=False,
                         detail=hip.toolchain_problem(),
                         fix=f"{APT} clang-19 llvm-19 rocm-device-libs libamdhip64-dev hipcc")
    else:
        static = Finding(target="hip", name="MI300 static reports", ok=toolchain.exact, required=False,
                         detail=toolchain.note,
                         fix="" if toolchain.exact else f"{APT} clang-19 llvm-19 (gfx942 itself, not {toolchain.arch})")
    profiler = rocprof.find_profiler()
    rocm_version = Path("/opt/rocm/.info/version")
    rocm = rocm_version.is_file() or shutil.which("hipconfig") is not None
    return [
        _torch_gpus("amd"),
        Finding(target="hip", name="ROCm runtime", ok=rocm,
                detail=rocm_version.read_text().strip() if rocm_version.is_file() else
                (_first_line(["hipconfig", "--version"]) or "no /opt/rocm"),
                fix="" if rocm else "install ROCm 6 or later (its hipcc builds load_inline submissions)"),
        _driver_gpus("hip"),
        static,
        Finding(target="hip", name="profiler (rocprofv3)", ok=bool(profiler and profiler[0] == "rocprofv3"),
                required=False, detail=rocprof.timing_method()["note"],
                fix="" if profiler and profiler[0] == "rocprofv3" else "install rocprofiler-sdk (ROCm 6.2 or later)"),
    ]


_PER_TARGET: dict[str, Callable[[], list[Finding]]] = {"cpu": cpu_findings, "cuda": cuda_findings, "hip": hip_findings}


def examine(targets: list[str]) -> list[Finding]:
    """Every finding for these targets, and those every target shares."""
    shared = [torch_build(), isolation(), perf_sampler(), knowledge_base(), llm_endpoint()]
    return shared + [finding for target in targets for finding in _PER_TARGET[target]()]


def usable(findings: list[Finding], target: str) -> bool:
    """A target works here when nothing required for it (or for every target) is missing."""
    return all(f.ok for f in findings if f.required and f.target in (target, "any"))
