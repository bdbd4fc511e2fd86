"""Document-aware selection (ragattn.compress.selection): the combination's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragattn.compress.model_files import ModelFiles
from ragattn.compress.selection import (
    COLUMNS,
    DocumentSelection,
    check_selection,
    combination_inputs,
    logit,
)
from ragattn.errors import ConfigError, ModelLoadError

PROBS = np.array([0.9, 0.2, 0.6, 0.6, 0.1])
DOCS = [0, 0, 1, 1, 2]
DOC_SCORES = np.array([2.0, -1.0, 0.5])
SELECTION = DocumentSelection(weights=(1.0, 1.5, 0.5), bias=-0.2, config={"method": "sentinel"})


def test_inputs_are_the_logit_the_documents_z_score_and_the_best_gap() -> None:
    x = combination_inputs(PROBS, DOCS, DOC_SCORES)
    assert x.shape == (5, len(COLUMNS))
    np.testing.assert_allclose(x[:, 0], logit(PROBS))
    z = (DOC_SCORES - DOC_SCORES.mean()) / DOC_SCORES.std()
    np.testing.assert_allclose(x[:, 1], z[DOCS])
    best = logit(np.array([0.9, 0.6, 0.1]))
    np.testing.assert_allclose(x[:, 2], (best - best.max())[DOCS])
    assert (x[:, 2] <= 0).all() and x[0, 2] == 0.0


def test_the_relevant_documents_sentence_wins_a_tie() -> None:
    """Two sentences with the same probe score: the one in the better document ranks first."""
    combined = SELECTION.combine(np.array([0.5, 0.5]), [0, 1], np.array([-1.0, 3.0]))
    assert combined[1] > combined[0]


def test_document_order_does_not_change_any_sentences_score() -> None:
    perm = [2, 0, 1]  # documents renumbered: old doc d becomes new doc perm.index(d)
    new_docs = [perm.index(d) for d in DOCS]
    new_scores = DOC_SCORES[perm]
    np.testing.assert_allclose(
        SELECTION.combine(PROBS, DOCS, DOC_SCORES),
        SELECTION.combine(PROBS, new_docs, new_scores),
    )


def test_one_document_keeps_the_sentence_scores() -> None:
    probs = np.array([0.3, 0.8, 0.5])
    np.testing.assert_array_equal(SELECTION.combine(probs, [0, 0, 0], np.array([1.7])), probs)


def test_logit_is_finite_at_zero_and_one() -> None:
    assert np.isfinite(logit(np.array([0.0, 1.0]))).all()


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "selection.json"
    SELECTION.save(path)
    back = DocumentSelection.load(path)
    assert back == SELECTION


def test_a_file_of_other_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "selection.json"
    SELECTION.save(path)
    data = json.loads(path.read_text())
    data["columns"] = ["sentence_logit", "something_else", "best_gap"]
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="columns|selection"):
        DocumentSelection.load(path)


def test_a_missing_file_says_how_to_fit_it(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="probe train --kind selection"):
        ModelFiles(tmp_path, "smollm2-135m").required_selection()


def test_unknown_selection_is_refused() -> None:
    assert check_selection("sentences") == "sentences"
    with pytest.raises(ConfigError, match="documents, sentences"):
        check_selection("paragraphs")


def test_recall_at_budget_keeps_units_as_the_compressor_does() -> None:
    """Best first under the token limit, a misfit skipped: the choosing measure of the fit."""
    from ragattn.lab.selection_training import recall_at_budget

    scores = np.array([0.9, 0.1, 0.5, 0.3])
    widths = np.array([5, 2, 6, 2])
    y = np.array([0, 1, 1, 0])
    # limit 0.5 * 15 = 7: unit 0 (5), unit 2 (6) does not fit, unit 3 (2) fits, unit 1 no room.
    assert recall_at_budget(scores, y, widths, budget=0.5) == 0.0
    # limit 0.9 * 15 = 13: units 0 and 2 (11), then unit 3 (2); unit 1 no room.
    assert recall_at_budget(scores, y, widths, budget=0.9) == 0.5
    assert recall_at_budget(scores, y, widths, budget=1.0) == 1.0


def test_the_document_input_is_recorded_and_checked(tmp_path: Path) -> None:
    """A selection reads the input it was fitted on; files from before the choice read ``probe``."""
    assert SELECTION.document_score == "probe" and SELECTION.reads_minilm
    attention = DocumentSelection(
        weights=(1.0, 1.5, 0.5),
        bias=-0.2,
        config={"method": "sentinel", "document_score": "attention"},
    )
    assert attention.document_score == "attention" and not attention.reads_minilm
    path = tmp_path / "selection.json"
    attention.save(path)
    assert DocumentSelection.load(path).document_score == "attention"
    with pytest.raises(ConfigError, match="probe, attention"):
        DocumentSelection(weights=(1.0, 1.5, 0.5), bias=0.0, config={"document_score": "bm25"})
