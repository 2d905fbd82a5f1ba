"""The comparison of tests/conftest.py (assert_close_elementwise) and tests/test_torch.py's
bound reject the wrong answers the old absolute floors (4e-3 * (1 + max|ref|) for f16, 3e-2 for
bf16) let through, on the (3, 1001) softmax input of test_row_ops_against_torch, and accept the
right ones."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from .conftest import assert_close_elementwise  # noqa: E402
from .test_torch import _close, _rows_of  # noqa: E402


def _softmax(dtype):
    x = _rows_of((3, 1001), dtype)
    return torch.softmax(x.double(), -1), torch.softmax(x, -1)  # float64 reference, torch's


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_the_right_answer_passes(dtype):
    want, peer = _softmax(dtype)
    _close(want.to(dtype), want, peer, "softmax rounded once")
    assert_close_elementwise(want.to(dtype), want, dtype, ulps=1.0)


def test_an_f16_softmax_with_95_percent_zeroed_is_rejected():
    want, peer = _softmax(torch.float16)
    wrong = want.to(torch.float16).clone()
    zeroed = want < want.quantile(0.95)  # the smallest 95% of the entries
    wrong[zeroed] = 0
    old_floor = 4e-3 * (1 + want.abs().max().item())  # what the old test accepted
    assert (wrong.double() - want).abs().max().item() <= old_floor
    with pytest.raises(AssertionError, match="out of bounds"):
        _close(wrong, want, peer, "softmax")
    with pytest.raises(AssertionError, match="out of bounds"):
        assert_close_elementwise(wrong, want, torch.float16)


def test_a_bf16_softmax_plus_0_027_is_rejected():
    want, peer = _softmax(torch.bfloat16)
    wrong = (want + 0.027).to(torch.bfloat16)
    old_floor = 3e-2 * (1 + want.abs().max().item())
    assert (wrong.double() - want).abs().max().item() <= old_floor
    with pytest.raises(AssertionError, match="out of bounds"):
        _close(wrong, want, peer, "softmax")
    with pytest.raises(AssertionError, match="out of bounds"):
        assert_close_elementwise(wrong, want, torch.bfloat16)


def test_nan_and_infinity_are_compared_exactly():
    want = np.array([np.nan, np.inf, 1.0])
    assert_close_elementwise(np.array([np.nan, np.inf, 1.0]), want, "f32")
    with pytest.raises(AssertionError, match="NaN"):
        assert_close_elementwise(np.array([1.0, np.inf, 1.0]), want, "f32")
    with pytest.raises(AssertionError, match="out of bounds"):
        assert_close_elementwise(np.array([np.nan, 1e30, 1.0]), want, "f32")


# ---- the row operations' error models (tests/cases.py RowCase.bounds) accept the reference
# rounded once and reject answers 1% off, on the shapes the tests use

from .cases import ROW_CASES  # noqa: E402
from .conftest import stable_seed  # noqa: E402


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.name)
def test_row_error_models_accept_one_rounding_and_reject_one_percent(case, dtype):
    rows, cols = 3, 1001
    rng = np.random.default_rng(stable_seed("row-model", case.name, dtype))
    args = case.make(rng, rows, cols, dtype)
    expected = case.expected(args)
    # each output in the dtype the wrapper returns (statistics and losses are f32)
    dtypes = [o.dtype for o in case.run(args, interpret=True)]
    rounded = [np.asarray(e).astype(d) for e, d in zip(expected, dtypes, strict=True)]
    case.check(rounded, args, rows, cols)
    for i, d in enumerate(dtypes):
        wrong = list(rounded)
        wrong[i] = (np.asarray(expected[i]) * 1.01).astype(d)
        with pytest.raises(AssertionError, match="out of bounds"):
            case.check(wrong, args, rows, cols)
