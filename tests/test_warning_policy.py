"""The suite's warning policy (pyproject ``filterwarnings``): a warning issued from ragattn's or
ragattn_api's own code fails the test that triggered it, one from elsewhere does not, and
``pytest.warns`` still records the project's warnings.

The module a warning is issued from is the ``__name__`` of the frame ``warnings.warn`` points at,
so each case runs one ``warnings.warn`` call in a namespace named like the module under test.
"""

from __future__ import annotations

import warnings

import pytest


def _warn_from(module: str, category: type[Warning] = UserWarning) -> None:
    code = compile("import warnings\nwarnings.warn('issued here', category)", module, "exec")
    exec(code, {"__name__": module, "category": category})


@pytest.mark.parametrize(
    "module", ["ragattn", "ragattn.compress.probe", "ragattn_api", "ragattn_api.routes.rerank"]
)
@pytest.mark.parametrize("category", [UserWarning, DeprecationWarning, RuntimeWarning])
def test_a_warning_from_the_project_fails_the_test(module: str, category: type[Warning]) -> None:
    with pytest.raises(category, match="issued here"):
        _warn_from(module, category)


@pytest.mark.parametrize("module", ["litestar.app", "torch.nn", "ragattnx", "tests.unit.x"])
def test_a_warning_from_elsewhere_stays_a_warning(module: str) -> None:
    with warnings.catch_warnings(record=True) as caught:  # the configured filters, recorded
        _warn_from(module)
    assert [str(w.message) for w in caught] == ["issued here"]


def test_pytest_warns_still_records_the_project_warnings() -> None:
    with pytest.warns(DeprecationWarning, match="issued here"):
        _warn_from("ragattn.integrations", DeprecationWarning)
