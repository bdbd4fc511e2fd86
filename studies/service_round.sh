#!/usr/bin/env bash
# The service table of BENCHMARKS.md ("Service"): the 2-minute soak with its overload burst, then
# schemathesis (every check) against a live server without and with an API key. One heavy job: run
# it with no other job on the cores (RAGATTN_LOCK=FILE holds a lock file around each step).
#   bash studies/service_round.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
out="${1:-results/service}"
mkdir -p "$out"
lock() {  # run "$@" (a command or a function of this script) holding RAGATTN_LOCK, if set
  if [ -n "${RAGATTN_LOCK:-}" ]; then
    exec 9>"$RAGATTN_LOCK"
    flock 9
    "$@"
    flock -u 9
  else
    "$@"
  fi
}
python -c "import torch; print('CPU capability', torch.backends.cpu.get_cpu_capability())" | tee "$out/cpu.txt"
git rev-parse --short HEAD > "$out/commit.txt"
soak() {
  OMP_NUM_THREADS=1 RAGATTN_THREADS=1 python studies/soak.py --minutes 2 --rps 4 \
    --out "$out/soak-2min.json" > "$out/soak.log" 2>&1 || echo "soak: FAILED (see $out/soak.log)"
}
lock soak
tail -n 30 "$out/soak.log"
index="$(mktemp -d)/demo-index"
ragattn index build --corpus ragattn/data/demo_corpus --out "$index" --no-dense > /dev/null
campaign() {  # NAME PORT [KEY]
  name=$1 port=$2 key=${3:-}
  env RAGATTN_INDEX_DIR="$index" RAGATTN_MAX_DOCUMENTS=4 RAGATTN_MAX_QUERY_TOKENS=32 \
  RAGATTN_MAX_TOKENS_PER_DOC=96 RAGATTN_MAX_BODY_BYTES=20000 RAGATTN_REQUEST_TIMEOUT_S=0 \
  RAGATTN_GENERATOR_MAX_TOKENS=2 RAGATTN_PORT="$port" ${key:+RAGATTN_API_KEYS=$key} \
    python -m ragattn_api.server > "$out/server-$name.log" 2>&1 &
  server=$!
  for _ in $(seq 1 180); do
    code=$(curl -s -o /dev/null -w '%{http_code}' ${key:+-H "Authorization: Bearer $key"} \
      "http://127.0.0.1:$port/ready" || true)
    [ "$code" = 200 ] && break
    sleep 1
  done
  started=$(date +%s)
  st --config-file tests/api/hardening/schemathesis.toml run \
    "http://127.0.0.1:$port/schema/openapi.json" --checks all -n 300 --request-timeout 120 \
    ${key:+-H "Authorization: Bearer $key"} > "$out/schemathesis-$name.log" 2>&1 \
    || echo "schemathesis $name: FAILED (see $out/schemathesis-$name.log)"
  echo "schemathesis $name: $(( $(date +%s) - started )) s"
  tail -n 12 "$out/schemathesis-$name.log"
  kill "$server"; wait "$server" 2>/dev/null || true
}
lock campaign nokey 18411
lock campaign key 18412 fuzz-key
