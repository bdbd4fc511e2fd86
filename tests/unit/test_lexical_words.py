"""The tokens BM25 counts (:func:`ragattn.lexical.words`): lower-cased ``\\w+`` words, and in
scripts written without spaces (Chinese, Japanese, Thai, ...) each run's overlapping character
bigrams. Before the bigrams a Chinese sentence was one ``\\w+`` word, so a Chinese query matched no
paragraph it did not repeat whole."""

from __future__ import annotations

import re

import numpy as np

from ragattn.lexical import bm25_scores, words


def test_chinese_runs_are_counted_as_overlapping_bigrams() -> None:
    assert words("长江是亚洲最长的河流") == [
        "长江",
        "江是",
        "是亚",
        "亚洲",
        "洲最",
        "最长",
        "长的",
        "的河",
        "河流",
    ]
    # punctuation ends a run: no bigram spans "，"
    assert words("长江，黄河。") == ["长江", "黄河"]


def test_japanese_kana_and_kanji_are_one_run_and_digits_a_word() -> None:
    assert words("東京タワーは333メートル") == [
        "東京",
        "京タ",
        "タワ",
        "ワー",
        "ーは",
        "333",
        "メー",
        "ート",
        "トル",
    ]


def test_thai_is_counted_in_bigrams_of_its_code_points() -> None:
    assert words("แม่น้ำ") == ["แม", "ม่", "่น", "น้", "้ำ"]


def test_latin_text_gives_the_lowercased_word_tokens() -> None:
    text = (
        "Der Rhein ist einer der längsten Flüsse Europas; ÉCOLE, café_au-lait, "
        "İstanbul, Dunărea 42x and the GPU's 80GB!"
    )
    assert words(text) == [w.lower() for w in re.findall(r"\w+", text)]
    assert words("Größe ÉCOLE") == ["größe", "école"]


def test_mixed_text_splits_at_the_script_boundary() -> None:
    assert words("GPU显存是80GB。") == ["gpu", "显存", "存是", "80gb"]
    assert words("Python是一种语言") == ["python", "是一", "一种", "种语", "语言"]


def test_a_one_character_run_is_itself() -> None:
    assert words("我 爱 Python3 和 数据") == ["我", "爱", "python3", "和", "数据"]
    assert words("猫") == ["猫"]
    assert words("") == []


def test_bm25_ranks_the_chinese_paragraph_sharing_a_word_with_the_query_first() -> None:
    texts = [
        "黄山位于安徽省南部，以奇松、怪石和云海闻名。",
        # shares the characters 江, 长, 有 with the query, but none of its bigrams
        "江南的园林很有名，长期吸引各地游客前来参观。",
        "长江是亚洲最长的河流，全长约六千三百公里，向东流入东海。",
        "上海是中国最大的城市，人口超过两千万。",
    ]
    scores = bm25_scores("长江有多长？", texts)
    assert int(np.argmax(scores)) == 2
    assert scores[2] == 1.0
    assert np.all(np.delete(scores, 2) == 0.0)
