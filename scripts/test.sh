#!/usr/bin/env bash
# Install ragattn with its dev extras, start a real Redis on loopback, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
# Real services the tests use: Redis (cache tests) and Debian's Chromium (browser tests of the page).
missing=""
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
if [ -n "$missing" ]; then
  (apt-get update -qq && apt-get install -y -qq $missing >/dev/null) || echo "warning: could not install:$missing"
fi
port="${RAGATTN_TEST_REDIS_PORT:-6399}"
if command -v redis-server >/dev/null 2>&1; then
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "/tmp/ragattn-test-redis-$port.pid" >/dev/null
  export RAGATTN_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
  trap 'kill "$(cat /tmp/ragattn-test-redis-'"$port"'.pid)" 2>/dev/null || true' EXIT
fi
# shellcheck disable=SC1091
. .venv/bin/activate
# Style gate first (seconds): the lint and format rules in pyproject.toml.
ruff check ragattn api tests pipelines
ruff format --check ragattn api tests pipelines
python -m pytest "$@"
