#!/usr/bin/env bash
# The main job on the embedded default: a headless scientist run on the CPU target with
# no LLM (the Tuner proposes candidates), local SQLite archive and checkpoints under runs/.
# Arguments go to `kernel-scientist run`; a run is resumed with `--resume RUN`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh  # a line per thing it installs; quiet when everything is there
if [ "$#" -eq 0 ]; then set -- matmul_bf16 --target cpu --generations 3 --parallel 2 --budget 0.5; fi
exec .venv/bin/kernel-scientist run "$@"
