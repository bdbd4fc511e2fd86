#!/usr/bin/env bash
# Install ragattn and run the main job on the embedded default (packaged proxy, in-process cache,
# no Redis): read the built-in example once (rank + prune), then answer a question end to end over the
# shipped demo corpus (retrieve, one read, generate with the packaged 135M proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh all
# shellcheck disable=SC1091
. .venv/bin/activate
ragattn demo
index=.ragattn/demo-index
if [ ! -f "$index/manifest.json" ]; then
  corpus=$(python -c 'from ragattn.pipeline import demo_corpus_dir; print(demo_corpus_dir())')
  ragattn index build --corpus "$corpus" --out "$index" --no-progress
fi
ragattn ask "When was the Eiffel Tower completed and who designed it?" --index "$index"
