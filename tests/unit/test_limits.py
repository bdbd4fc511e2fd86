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


# --- issue 59: titles count, the prompt's parts count, and advice that works when followed -----

SENTENCE = "Paris is the capital of France and lies on the Seine. "


def _follow(checker: LimitChecker, message: str, query: str, docs: list[Document]) -> list[Any]:
    """The requests a refusal's advice asks for, each checked: one with the advised cap, or the
    documents split into parts of at most the advised count (with the advised cap, if any)."""
    one = re.search(r"send max_tokens_per_doc=(\d+)", message)
    if one is not None:
        return [checker.check(query, docs, truncate_to=int(one.group(1)))]
    split = re.search(
        r"split it into (\d+) requests of (?:at most (\d+) documents|one document each)"
        r"(?:, (?:each )?with max_tokens_per_doc=(\d+))?",
        message,
    )
    assert split is not None, message
    size = int(split.group(2) or 1)
    cap = int(split.group(3)) if split.group(3) else None
    parts = [docs[i : i + size] for i in range(0, len(docs), size)]
    assert len(parts) == int(split.group(1)), message
    return [checker.check(query, part, truncate_to=cap) for part in parts]


def test_a_title_counts_with_its_text(tokenizer: Any) -> None:
    checker = LimitChecker(tokenizer, Limits(max_tokens_per_doc=40))
    doc = Document(text="Paris is the capital of France.", title="  Paris, the city  ")
    checked = checker.check("capital?", [doc])
    title, text = _tokens(tokenizer, "Paris, the city"), _tokens(tokenizer, doc.text)
    assert checked.document_tokens == (title + text,)
    assert checked.prompt_tokens == checker.prompt.total(1, 1) > 0
    assert checked.request_tokens == checked.input_tokens + checked.prompt_tokens
    # Over the per-document limit only with its title: refused, counting both.
    long_text = " ".join(["word"] * (40 - title + 1))
    assert _tokens(tokenizer, long_text) + title > 40 >= _tokens(tokenizer, long_text)
    checker.check("capital?", [Document(text=long_text)])
    with pytest.raises(
        InputTooLargeError, match=re.escape(f"documents[0] has {title + 41 - title}")
    ):
        checker.check("capital?", [Document(text=long_text, title=doc.title)])
    # Cut to the cap with its title: the title is kept whole, the text gives way.
    cut = checker.check("capital?", [Document(text=long_text, title=doc.title)], truncate_to=12)
    assert cut.documents[0].title == doc.title
    assert title + _tokens(tokenizer, cut.documents[0].text) == 12 == cut.document_tokens[0]
    assert f"its {title}-token title kept" in cut.warnings[0]


def test_a_title_at_the_limit_is_refused_by_name(tokenizer: Any) -> None:
    checker = LimitChecker(tokenizer, Limits(max_tokens_per_doc=16))
    title = " ".join(["word"] * 16)
    with pytest.raises(InputTooLargeError, match=re.escape("documents[1].title has 16 tokens")):
        checker.check("q", [Document(text="a"), Document(text="b", title=title)], truncate_to=8)
    # A title longer than the limit by its lower bound alone is refused before any tokenizer.
    with pytest.raises(InputTooLargeError, match=re.escape("documents[0].title has at least")):
        checker.precheck("q", [Document(text="b", title="\U00010000" * 100)])
    # Under the limit but at the caller's cap: no room for the text, and the advice fits it.
    with pytest.raises(InputTooLargeError, match="leaves no room for its text") as refused:
        checker.check("q", [Document(text="b c d", title=" ".join(["word"] * 8))], truncate_to=8)
    message = str(refused.value)
    for checked in _follow(checker, message, "q", [Document(text="b c d", title="word " * 8)]):
        assert checked.warnings == () or "truncated" in checked.warnings[0]


def test_titles_count_against_the_request_budget(tokenizer: Any) -> None:
    """Issue 59: 30 documents of four words, each with a long title, were admitted whole."""
    checker = LimitChecker(tokenizer, Limits(max_request_tokens=1024, max_tokens_per_doc=1024))
    title = SENTENCE * 8  # about 100 tokens, under the per-document limit
    plain = [Document(text="four words of text") for _ in range(30)]
    titled = [Document(text="four words of text", title=title) for _ in range(30)]
    checker.check("capital?", plain)
    with pytest.raises(InputTooLargeError, match="the request has at least") as refused:
        checker.precheck("capital?", titled)  # by the lower bound: before any tokenizer pass
    for part in _follow(checker, str(refused.value), "capital?", titled):
        assert part.request_tokens <= 1024


@pytest.mark.parametrize(
    "shape",
    [
        "one_long",  # one document over the per-document limit among short ones
        "many_medium",  # every document within it, over the budget together
        "titled",  # over the budget because of titles
        "long_query",  # a query that leaves room for few documents
    ],
)
@pytest.mark.parametrize("stage", ["precheck", "check"])
def test_every_advice_is_accepted_when_followed(tokenizer: Any, shape: str, stage: str) -> None:
    """Issue 59: a 413's advice, followed literally, gives requests that are accepted: the
    per-document advice leaves room for the query, the titles and the prompt's parts. Before the
    tokenizer (precheck) the advice counts from bounds; the texts are six times longer there,
    so that the lower bound alone refuses them."""
    checker = LimitChecker(
        tokenizer, Limits(max_request_tokens=600, max_tokens_per_doc=600, max_query_tokens=400)
    )
    n = 6 if stage == "precheck" else 1
    query = "capital?"
    if shape == "one_long":
        docs = [Document(text=SENTENCE * 80 * n)] + [Document(text=SENTENCE)] * 5
    elif shape == "many_medium":
        docs = [Document(text=SENTENCE * 6 * n, title="Paris")] * 10
    elif shape == "titled":
        docs = [Document(text="four words of text", title=SENTENCE * 4 * n)] * 12
    else:
        query = SENTENCE * 25
        docs = [Document(text=SENTENCE * 4 * n)] * 6
    with pytest.raises(InputTooLargeError) as refused:
        if stage == "precheck":
            checker.precheck(query, docs)
        else:
            checker.check(query, docs, prechecked=True)
    message = str(refused.value)
    if stage == "check":  # the lower bound alone would not have refused it
        checker.precheck(query, docs)
    for checked in _follow(checker, message, query, docs):
        assert checked.request_tokens <= 600


def test_a_lowered_per_document_limit_names_the_budget(tokenizer: Any) -> None:
    from ragattn.request_budget import RequestBudget
    from ragattn.settings import Settings
    from ragattn_api.loading import service_limits

    limits = service_limits(Settings(), RequestBudget(tokens=1024, source="setting"))
    assert limits.max_tokens_per_doc == 1024
    checker = LimitChecker(tokenizer, limits)
    with pytest.raises(InputTooLargeError) as refused:
        checker.check("q", [Document(text=SENTENCE * 100)])
    message = str(refused.value)
    assert "the limit is 1024 per document" in message
    assert "RAGATTN_MAX_TOKENS_PER_DOC=4096 lowered to the request budget, 1024 tokens" in message
    advised = re.search(r"max_tokens_per_doc=(\d+)", message)
    assert advised is not None and int(advised.group(1)) < 1024
    unlowered = service_limits(Settings(), RequestBudget(tokens=16384, source="setting"))
    assert unlowered.max_tokens_per_doc_basis is None
