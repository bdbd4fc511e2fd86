"""A run with no sentence boundary is no unit the read must swallow whole (issue 59).

An emoji-only document of about 3,000 proxy tokens used to be one sentence: the read could neither
cut it nor fit it under its 2,048-token ceiling. Split at :data:`MAX_SENTENCE_BYTES`, each of its
pieces costs at most 1,024 proxy tokens, and a budget can keep some of them."""

from __future__ import annotations

from typing import Any

from ragattn.sentences import MAX_SENTENCE_BYTES

EMOJI = "😀🎉🔥👍🚀" * 200  # 1,000 emoji, 4,000 UTF-8 bytes
QUESTION = "Which emoji does the message use?"


def test_an_emoji_wall_is_read_as_bounded_units(compressor: Any) -> None:
    tokenizer = compressor.proxy.tokenizer
    assert len(tokenizer(EMOJI, add_special_tokens=False)["input_ids"]) > 2048
    docs = ["The message was sent on Monday.", EMOJI]
    whole = compressor.compress(QUESTION, docs, ratio=1.0)
    spans = whole.documents[1].kept_spans
    assert len(spans) >= 4
    assert "".join(s.text for s in spans) == EMOJI
    for s in spans:
        assert len(s.text.encode()) <= MAX_SENTENCE_BYTES
        assert len(tokenizer(s.text, add_special_tokens=False)["input_ids"]) <= MAX_SENTENCE_BYTES
    # A budget under the wall's tokens can keep part of it: a piece fits where the whole could not.
    part = compressor.compress(QUESTION, [EMOJI], target_tokens=1200)
    kept = part.documents[0].kept_spans
    assert kept and part.compressed_tokens <= 1200
