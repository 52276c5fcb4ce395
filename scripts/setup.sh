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
"$VPY" -m pip install -q -e ".[test]" 2>&1 | grep -v "^WARNING: Location" || true
# A C++ compiler builds the CPU kernels.
if ! command -v g++ >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq g++ >/dev/null
  else
    echo "warning: no g++ found; CPU kernels cannot be built" >&2
  fi
fi
"$VPY" -c "import torch, pydantic, typer, yaml; print('environment ready: torch', torch.__version__)"
