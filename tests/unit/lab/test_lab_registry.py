"""The lab registry: variants and ablations reachable by name, kept out of the runtime's."""

from __future__ import annotations

import re

import pytest

from ragattn.compress import METHODS as RUNTIME_COMPRESS
from ragattn.errors import InvalidInputError
from ragattn.lab import registry as lab
from ragattn.rerank import METHODS as RUNTIME_RERANK

SHIPPED_RERANK = {
    "attention-probe",
    "bm25",
    "fused",
    "fused-no-attention",
    "icr",
    "minilm",
    "minilm-hyde",
    "qrhead",
}
SHIPPED_RERANK |= {"qrhead-reattn"}
SHIPPED_COMPRESS = {"focal", "fused", "lexical", "sentinel"}


def test_the_runtime_ships_the_named_methods_and_the_lab_the_rest() -> None:
    assert set(RUNTIME_RERANK) == SHIPPED_RERANK
    assert set(RUNTIME_COMPRESS) == SHIPPED_COMPRESS
    assert set(lab.RERANK_VARIANTS) == {
        "icr-middle",
        "icr-middle-reattn",
        "icr-pointwise",
        "icr-query-first",
        "icr-retrieval",
        "icr-retrieval-reattn",
        "icr-two-orders",
        "icr-uncalibrated",
    }
    assert set(lab.COMPRESS_VARIANTS) == {"attention-raw"}


def test_the_lab_tables_are_the_union_under_the_same_specs() -> None:
    assert set(lab.RERANK_METHODS) == set(RUNTIME_RERANK) | set(lab.RERANK_VARIANTS)
    assert set(lab.COMPRESS_METHODS) == set(RUNTIME_COMPRESS) | set(lab.COMPRESS_VARIANTS)
    assert all(lab.rerank_spec(name) is spec for name, spec in RUNTIME_RERANK.items())
    assert lab.compress_spec("attention-raw") is lab.COMPRESS_VARIANTS["attention-raw"]


def test_runtime_names_reject_lab_methods_and_the_lab_lists_both() -> None:
    with pytest.raises(InvalidInputError, match=re.escape("unknown rerank method 'icr-pointwise'")):
        RUNTIME_RERANK.spec("icr-pointwise")
    with pytest.raises(InvalidInputError, match=re.escape("icr-uncalibrated, minilm")):
        lab.rerank_spec("nope")
