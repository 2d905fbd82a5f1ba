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
