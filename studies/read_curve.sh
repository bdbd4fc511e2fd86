#!/usr/bin/env bash
# The read curve of BENCHMARKS §0 (issue 43 item 4): the one-read evidence recall at ratio 0.2 of
# each read configuration (CASCADE|MIN_ROOM) on the two choice sets, resumable through the cache.
#   bash studies/read_curve.sh
set -u
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
for spec in "none|2" "0.8:lexical+links|2" "0.8:lexical+links@1024|1.5" "0.8:lexical+links@768|1.5" "0.8:lexical+links@512|1.5" "0.8:documents@768|1.5"; do
  read_spec=${spec%|*}; room=${spec#*|}
  for set in "2wiki --offset 200 --limit 50" "hotpotqa-fullwiki --offset 250 --limit 50"; do
    echo "=== $read_spec room $room $set"
    ragattn eval context --dataset $set --budget 0.2 --system one-read --cascade "$read_spec" --min-room $room \
      --threads 2 --cache-dir .cache/eval-context 2>&1 | grep -E "^\||capability|questions" 
  done
done
