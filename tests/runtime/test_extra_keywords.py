"""Keywords a program does not take: NPBench calls every program with its preset's values by name, also those the
program does not declare (``nbody``'s ``tEnd``). Upstream DaCe ignores them silently; we ignore them too, with one
warning naming them. A keyword beside a missing parameter is taken for a misspelt one: the error names the
parameter it is close to."""

import warnings

import dace
import numpy as np
import pytest

import dace_cpufree
from dace_cpufree import ArgumentError
from dace_cpufree.runtime.arguments import IgnoredKeywordWarning

N = dace.symbol("N")


@dace.program
def axpy(x: dace.float64[N], y: dace.float64[N], alpha: dace.float64, reps: dace.int64):
    for _ in range(reps):
        y[:] = alpha * x + y


@pytest.fixture
def run():
    return dace_cpufree.compile(axpy, backend="emulate")


def _ignored(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, IgnoredKeywordWarning)]


def test_upstream_dace_ignores_extra_keywords():
    """What we match: DaCe runs the call and says nothing about the extra keywords."""
    y = np.zeros(3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        axpy(x=np.ones(3), y=y, alpha=2.0, reps=1, tEnd=2.0, G=np.ones(2))
    np.testing.assert_allclose(y, 2.0)
    assert not [w for w in record if "tEnd" in str(w.message)]


@pytest.mark.parametrize("positional", [False, True])
def test_extra_keywords_of_any_type_are_ignored_with_one_warning(run, positional):
    x, y = np.arange(4.0), np.zeros(4)
    params = (x, y, 2.0, 3)
    extra = {"tEnd": 2.0, "dt": 0.05, "M": 7, "label": "S", "table": np.ones(2)}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):  # the first call warns, the later ones (the common path's too) do not
            if positional:
                run(*params, **extra)
            else:
                run(**dict(zip(("x", "y", "alpha", "reps"), params)), **extra)
    (message,) = _ignored(record)
    assert "axpy: keywords 'tEnd', 'dt', 'M', 'label', 'table' are neither parameters nor size symbols" in message
    assert message.endswith("ignored, as upstream DaCe ignores them.")
    np.testing.assert_allclose(y, 3 * 3 * 2.0 * x)


def test_other_extra_keywords_warn_again(run):
    x = np.ones(2)
    with pytest.warns(IgnoredKeywordWarning, match="'tEnd' is neither"):
        run(x, np.zeros(2), 1.0, 1, tEnd=1.0)
    with pytest.warns(IgnoredKeywordWarning, match="'softening' is neither"):
        run(x, np.zeros(2), 1.0, 1, softening=0.1)


def test_a_size_symbol_keyword_is_still_checked_beside_ignored_ones(run):
    y = np.zeros(4)
    with pytest.warns(IgnoredKeywordWarning):
        run(np.ones(4), y, 1.0, 1, N=4, tEnd=2.0)
    np.testing.assert_allclose(y, 1.0)
    with pytest.raises(ArgumentError, match="N"):
        run(np.ones(4), y, 1.0, 1, N=5, tEnd=2.0)


def test_a_misspelt_parameter_names_the_close_match(run):
    with pytest.raises(
        ArgumentError, match=r"missing argument\(s\) reps \('rep' is no parameter: did you mean 'reps'\?\)\. Fix"
    ):
        run(np.ones(3), np.zeros(3), 1.0, rep=1)
    with pytest.raises(ArgumentError, match=r"missing argument\(s\) alpha \('alpah' is no parameter: did you mean"):
        run(x=np.ones(3), y=np.zeros(3), alpah=1.0, reps=1, tEnd=2.0)


def test_a_missing_parameter_with_an_unrelated_keyword_names_both(run):
    with pytest.raises(ArgumentError, match=r"missing argument\(s\) reps \('tEnd' is no parameter\)"):
        run(np.ones(3), np.zeros(3), 1.0, tEnd=2.0)
