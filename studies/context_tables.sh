#!/usr/bin/env bash
# The context tables of BENCHMARKS §0 (issue 43 item 1): `ragattn eval context` on every shared set
# that fits, at ratio 0.1 and 0.2 and 256 and 512 tokens, resumable through the outcome cache.
#   bash studies/context_tables.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
out="${1:-results/context}"
mkdir -p "$out"
run() {
  name=$1; shift
  # RAGATTN_LOCK=FILE: hold a lock file around each set, so no other heavy job shares the cores
  ${RAGATTN_LOCK:+flock "$RAGATTN_LOCK"} ragattn eval context --threads 2 --cache-dir .cache/eval-context --out "$out/$name.json" "$@" \
    > "$out/$name.md"
}
run hotpotqa --dataset hotpotqa
run 2wiki --dataset 2wiki --limit 200
run fullwiki --dataset hotpotqa-fullwiki --limit 100
run scifact --dataset scifact --limit 20
run squad --dataset squad --limit 10
