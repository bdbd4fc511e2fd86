"""The obvious-case files: the split keeps every former case once, by its stated rule.

No model runs here. ``tests/data/README.md`` states the rule: case ``orig-NN`` is the NN-th case
(0-based) of the former 34-case ``obvious_cases.json``; even NN are the half for choosing, odd NN
the half held back for the test. Merged by id, the halves give back the former file, whose case
list has the SHA-256 below.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data"
FORMER_SHA256 = "2b5dbfdbc8f057bdf8e1a8eddb6daa675a0fc5215e0cb9eb983a53c1c775a984"


def _cases(name: str) -> list[dict]:
    return json.loads((DATA / f"obvious_cases_{name}.json").read_text())["cases"]


def _canonical_sha256(cases: list[dict]) -> str:
    keep = [{k: c[k] for k in ("query", "relevant", "distractors")} for c in cases]
    text = json.dumps(keep, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_split_keeps_all_34_cases_once_by_the_stated_rule() -> None:
    choose, test = _cases("choose"), _cases("test")
    assert len(choose) == len(test) == 17
    ids = [c["id"] for c in choose + test]
    assert sorted(ids) == [f"orig-{i:02d}" for i in range(34)]  # none lost, none twice
    assert all(int(c["id"][5:]) % 2 == 0 for c in choose)
    assert all(int(c["id"][5:]) % 2 == 1 for c in test)
    merged = sorted(choose + test, key=lambda c: c["id"])
    assert _canonical_sha256(merged) == FORMER_SHA256
    assert not {c["query"] for c in choose} & {c["query"] for c in test}


def test_the_new_cases_are_fresh_and_well_formed() -> None:
    new = _cases("new")
    assert len(new) >= 20
    assert len({c["id"] for c in new}) == len(new)
    old_queries = {c["query"].lower() for c in _cases("choose") + _cases("test")}
    assert not {c["query"].lower() for c in new} & old_queries
    for case in new:
        assert 3 <= len(case["distractors"]) <= 5, case["id"]
        assert len({case["relevant"], *case["distractors"]}) == len(case["distractors"]) + 1
    assert len({c["domain"] for c in new}) >= 7
