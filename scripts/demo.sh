#!/usr/bin/env bash
# The main job on the embedded default: evaluate a bundled problem's seed kernel
# on the CPU and print its verdict. Arguments go to `kernel-scientist eval`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
if [ "$#" -eq 0 ]; then set -- vector_add --target cpu; fi
exec .venv/bin/kernel-scientist eval "$@"
