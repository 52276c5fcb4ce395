#!/usr/bin/env bash
# Create .venv and install the project with its test tools. Idempotent.
# torch is pinned to a CPU build for demos and CI; set KS_TORCH to choose another
# (e.g. KS_TORCH=skip on a GPU host whose python already has the right torch).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
"$VPY" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
TORCH_SPEC="${KS_TORCH:-torch==2.13.0}"
if [ "$TORCH_SPEC" != "skip" ] && ! "$VPY" -c "import torch" 2>/dev/null; then
  echo "installing $TORCH_SPEC"
  "$VPY" -m pip install -q "$TORCH_SPEC" 2>&1 | grep -v "^WARNING: Location" || true
fi
"$VPY" -m pip install -q -e ".[test,ray]" 2>&1 | grep -v "^WARNING: Location" || true
# A C++ compiler builds the CPU kernels.
if ! command -v g++ >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq g++ >/dev/null
  else
    echo "warning: no g++ found; CPU kernels cannot be built" >&2
  fi
fi
# bubblewrap puts each candidate's runner in its own sandbox (read-only system, private /tmp, own PID
# namespace, no network); perf samples what library code a runner ran. Without either, evaluations
# still run and the verdict's protections say what was missing.
for tool in "bwrap:bubblewrap" "perf:linux-perf"; do
  if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo -n"
    if command -v apt-get >/dev/null 2>&1 && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
      echo "installing ${tool#*:}"
      { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${tool#*:}" >/dev/null; } \
        || echo "warning: ${tool#*:} could not be installed; verdicts will say what it would have guarded" >&2
    else
      echo "warning: no ${tool%%:*} and no apt-get to install it; verdicts will say what it would have guarded" >&2
    fi
  fi
done
# hipcc compiles HIP candidates for the MI300 ISA (static reports; no AMD GPU needed).
# Debian's package knows gfx940, the MI300 ISA family; the tests skip without it.
if ! command -v hipcc >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if command -v apt-get >/dev/null 2>&1 && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
    echo "installing hipcc"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq hipcc libamdhip64-dev >/dev/null; } \
      || echo "warning: hipcc could not be installed; MI300 static reports will be skipped" >&2
  else
    echo "warning: no hipcc and no apt-get to install it; MI300 static reports will be skipped" >&2
  fi
fi
# Headless Chromium renders the HTML run report in its test (tests/test_report.py skips without it).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if command -v apt-get >/dev/null 2>&1 && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
    echo "installing chromium"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } \
      || echo "warning: chromium could not be installed; the report's browser test will be skipped" >&2
  else
    echo "warning: no chromium and no apt-get to install it; the report's browser test will be skipped" >&2
  fi
fi
# cuobjdump (SASS counts in CUDA static reports) where nvcc came without it: NVIDIA's wheels.
if command -v nvcc >/dev/null 2>&1 && ! command -v cuobjdump >/dev/null 2>&1 \
   && [ ! -e "$(dirname "$(readlink -f "$(command -v nvcc)")")/cuobjdump" ]; then
  CUDA_MAJOR="$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
  if [ -n "$CUDA_MAJOR" ] && ! "$VPY" -c "import sandbox.static_analysis as s, sys; sys.exit(s.find_cuobjdump() is None)" 2>/dev/null; then
    "$VPY" -m pip install -q "nvidia-cuda-cuobjdump>=$CUDA_MAJOR,<$((CUDA_MAJOR + 1))" \
      "nvidia-cuda-nvdisasm>=$CUDA_MAJOR,<$((CUDA_MAJOR + 1))" >/dev/null 2>&1 \
      || echo "warning: cuobjdump not installed; CUDA static reports will have no SASS counts" >&2
  fi
fi
"$VPY" -c "import torch, pydantic, typer, yaml; print('environment ready: torch', torch.__version__)"
