"""``ragattn.limits``: exact refusals from length alone, exact token counts, truncation."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ragattn.errors import InputTooLargeError, InvalidInputError, TokenizerError
from ragattn.limits import LimitChecker, Limits, TokenOffsets
from ragattn.types import Document


@pytest.fixture(scope="module")
def tokenizer(proxy: Any) -> Any:
    return proxy.tokenizer


def _tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_the_character_bound_holds_for_every_vocabulary_entry(tokenizer: Any) -> None:
    bound = TokenOffsets(tokenizer).max_token_chars
    assert bound is not None
    # No token decodes to more characters than the bound: a text longer than n * bound has more
    # than n tokens, so refusing it by length never refuses what a count would accept.
    longest = max(len(tokenizer.decode([i])) for i in range(len(tokenizer)))
    assert longest <= bound


def test_precheck_refuses_by_length_exactly(tokenizer: Any) -> None:
    checker = LimitChecker(tokenizer, Limits(max_documents=3, max_tokens_per_doc=8))
    checker.precheck("q", [Document(text="x" * 32)])  # 8 tokens: fits
    checker.precheck("q", [Document(text="word " * 20)])  # 21 tokens, bound 8: left to the count
    with pytest.raises(InputTooLargeError, match=re.escape("documents[0] has more than 8 tokens")):
        checker.precheck("q", [Document(text="x" * 33)])  # bound 9: refused before the tokenizer
    with pytest.raises(InputTooLargeError, match=re.escape("at most 3 per request")):
        checker.precheck("q", [Document(text="a")] * 4)
    with pytest.raises(InvalidInputError, match="at least one document"):
        checker.precheck("q", [])
    checker.precheck("q", [Document(text="x" * 33)], truncate_to=4)  # truncated, fine


def test_check_counts_like_the_proxy_tokenizer(tokenizer: Any) -> None:
    checker = LimitChecker(tokenizer, Limits(max_query_tokens=16, max_tokens_per_doc=12))
    docs = [Document(text="Paris is the capital of France.", id="p"), Document(text="Rome.")]
    checked = checker.check("capital of France?", docs)
    assert checked.query_tokens == _tokens(tokenizer, "capital of France?")
    assert checked.document_tokens == tuple(_tokens(tokenizer, d.text) for d in docs)
    assert checked.input_tokens == checked.query_tokens + sum(checked.document_tokens)
    assert checked.documents == tuple(docs) and checked.warnings == ()
    long_doc = " ".join(["word"] * 13)
    with pytest.raises(
        InputTooLargeError, match=re.escape("documents[1] has 13 tokens; the limit")
    ):
        checker.check("q", [docs[0], Document(text=long_doc)])
    with pytest.raises(InputTooLargeError, match=re.escape("query has 17 tokens; the limit is 16")):
        checker.check(" ".join(["word"] * 17), docs)


def test_truncation_cuts_at_a_token_boundary_with_a_warning(tokenizer: Any) -> None:
    checker = LimitChecker(tokenizer, Limits(max_tokens_per_doc=12))
    text = " ".join(f"w{i}" for i in range(40))
    checked = checker.check(
        "q", [Document(text=text, id="x"), Document(text="short")], truncate_to=5
    )
    cut = checked.documents[0]
    assert cut.id == "x" and text.startswith(cut.text)
    assert _tokens(tokenizer, cut.text) == 5
    assert checked.document_tokens[0] == 5
    assert checked.warnings == (
        f"documents[0] truncated from {_tokens(tokenizer, text)} to 5 tokens (max_tokens_per_doc)",
    )
    # A 5 MB document is cut by tokenizing a bounded prefix only; the warning says "over".
    huge = "Paris is the capital of France. " * 160_000
    big = checker.check("q", [Document(text=huge)], truncate_to=5)
    assert big.documents[0].text == huge[: len(big.documents[0].text)]
    assert _tokens(tokenizer, big.documents[0].text) == 5
    assert re.fullmatch(r"documents\[0\] truncated from over \d+ to 5 tokens.*", big.warnings[0])


def test_the_checker_uses_its_own_tokenizer_copy(tokenizer: Any) -> None:
    checker = LimitChecker(tokenizer, Limits())
    assert checker.tokens._backend is not tokenizer.backend_tokenizer  # thread-safe: not shared
    assert checker.tokens.count("Paris is the capital.") == _tokens(
        tokenizer, "Paris is the capital."
    )


def test_malformed_text_is_a_tokenizer_error(tokenizer: Any) -> None:
    checker = LimitChecker(tokenizer, Limits())
    with pytest.raises(TokenizerError):
        checker.check("q", [Document(text="lone \ud800 surrogate")])
