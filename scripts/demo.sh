#!/usr/bin/env bash
# Install ragattn and run the main job on the embedded default (packaged proxy, in-process cache).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh all
# shellcheck disable=SC1091
. .venv/bin/activate
ragattn demo
