#!/usr/bin/env bash
# The four questions of the shared context sets whose candidates the sentence bound (issue 59) cuts
# (studies/split_equality.py finds them): the one read's evidence recall before and after, titled and
# plain, at 20 % and 256 tokens, one checkout at a time.
#   bash studies/bound_questions.sh BEFORE_WORKTREE AFTER_WORKTREE [DATA_DIR]
set -euo pipefail
data="${3:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}"
for tree in "$1" "$2"; do
  for spec in "hotpotqa 33" "hotpotqa-fullwiki 76" "hotpotqa-fullwiki 80" "scifact 33"; do
    set -- $spec
    for titles in --titles --no-titles; do
      (cd "$tree" && PYTHONPATH="$tree" python -m ragattn.cli eval context --dataset "$1" \
        --offset "$2" --limit 1 --budget 0.2 --budget 256 --system first-stage "$titles" \
        --threads 2 --data-dir "$data" --out "results/bound-$1-$2$titles.json" > /dev/null)
      echo "$tree $1 $2 $titles"
    done
  done
done
