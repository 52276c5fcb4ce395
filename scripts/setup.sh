#!/usr/bin/env bash
# Create .venv and install the project with its test tools. Idempotent and quiet: a line for each
# thing it installs, pip's own output in .venv/setup.log (shown when a step fails), and nothing to
# reinstall when pyproject.toml has not changed since the last successful install.
# torch is pinned to a CPU build for demos and CI; set KS_TORCH to choose another
# (e.g. KS_TORCH=skip on a GPU host whose python already has the right torch).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv"
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
LOG=.venv/setup.log
STAMP=.venv/.ks-installed
: > "$LOG"
quietly() {  # run a step with its output in the log; on failure show the log's end and stop
  if ! "$@" >>"$LOG" 2>&1; then
    echo "error: '$*' failed; the end of $LOG:" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}
TORCH_SPEC="${KS_TORCH:-torch==2.13.0}"
if [ "$TORCH_SPEC" != "skip" ] && ! "$VPY" -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)"; then
  echo "installing $TORCH_SPEC (a few minutes the first time)"
  quietly "$VPY" -m pip install -q --upgrade pip
  quietly "$VPY" -m pip install -q "$TORCH_SPEC"
fi
# The project is installed editable: source changes need no reinstall, only a changed pyproject.toml does.
WANT="$("$VPY" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())' < pyproject.toml)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ] || ! "$VPY" -c "import graph.cli" 2>/dev/null; then
  echo "installing the project and its dependencies (pyproject.toml changed or first install)"
  quietly "$VPY" -m pip install -q -e ".[test,ray]"
  echo "$WANT" > "$STAMP"
fi
# A C++ compiler builds the CPU kernels.
if ! command -v g++ >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "installing g++"
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
# clang-19 compiles HIP candidates for gfx942 (the MI300X itself; Debian's hipcc only knows gfx940),
# with llvm-19's llvm-dis/llvm-as to make the gfx942 device library (sandbox/amdgcn_libs.py).
if ! command -v clang++-19 >/dev/null 2>&1 || ! command -v llvm-as-19 >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if command -v apt-get >/dev/null 2>&1 && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
    echo "installing clang-19 and llvm-19"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        clang-19 llvm-19 >/dev/null; } \
      || echo "warning: clang-19 could not be installed; MI300 static reports will use hipcc's gfx940" >&2
  else
    echo "warning: no clang-19 and no apt-get to install it; MI300 static reports will use hipcc's gfx940" >&2
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
# Versions from the installed metadata: importing torch here would cost seconds on every call.
"$VPY" -c "from importlib.metadata import version as v; print('environment ready: torch', v('torch'), '· kernel-scientist', v('kernel-scientist'))"
