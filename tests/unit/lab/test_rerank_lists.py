"""The ranking-list cache of the rerank-probe training: documents are cut in *proxy* tokens, so a
list built under one proxy's tokenizer is never read under another's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ragattn.lab.rerank_lists import RankingList, cached_lists
from ragattn.types import Document


def _lists(text: str) -> list[RankingList]:
    return [
        RankingList(
            source="nq-train",
            qid="q1",
            query="who wrote it?",
            documents=(Document(text=text, title="T"), Document(text="other", title=None)),
            labels=(1, 0),
        )
    ]


def test_cached_lists_are_keyed_by_the_tokenizer(tmp_path: Path) -> None:
    built: list[str] = []

    def build(text: str) -> Callable[[], list[RankingList]]:
        def run() -> list[RankingList]:
            built.append(text)
            return _lists(text)

        return run

    small = cached_lists(
        "train-128", build("cut by smollm2"), tokenizer="smollm2-135m", cache_dir=tmp_path
    )
    other = cached_lists(
        "train-128", build("cut by gemma"), tokenizer="gemma3-270m", cache_dir=tmp_path
    )
    again = cached_lists(
        "train-128", build("never built"), tokenizer="smollm2-135m", cache_dir=tmp_path
    )
    assert built == ["cut by smollm2", "cut by gemma"]
    assert small[0].documents[0].text == "cut by smollm2"
    assert other[0].documents[0].text == "cut by gemma"
    assert again == small
    assert sorted(p.name for p in (tmp_path / "rerank-lists").iterdir()) == [
        "train-128-gemma3-270m.json",
        "train-128-smollm2-135m.json",
    ]


def test_a_path_as_the_tokenizer_gives_one_flat_file_name(tmp_path: Path) -> None:
    cached_lists("dev", lambda: _lists("x"), tokenizer="/models/my proxy", cache_dir=tmp_path)
    assert [p.name for p in (tmp_path / "rerank-lists").iterdir()] == ["dev-_models_my_proxy.json"]
