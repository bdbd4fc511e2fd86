#!/usr/bin/env bash
# Install ragattn with its dev extras, start a real Redis on loopback, run the style and type
# gates, the wheel check and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
# Real services the tests use: Redis (cache tests), Debian's Chromium (browser tests of the page)
# and Debian's nginx (deploy/nginx.conf in front of two replicas).
missing=""
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
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
# Style, type and dead-code gates first (seconds): ruff, mypy and vulture, set in pyproject.toml.
ruff check ragattn ragattn_api tests pipelines studies
ruff format --check ragattn ragattn_api tests pipelines studies
mypy
vulture
# What a new user installs: the built wheel in a fresh venv, used from outside the checkout
# (default Reranker / Compressor, `ragattn demo`, and the Docker image's install serving HTTP).
bash scripts/wheel_check.sh
python -m pytest "$@"
