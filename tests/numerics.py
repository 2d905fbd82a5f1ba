"""Comparing results with float64 references, element by element: the unit roundoff and
subnormal spacing of each dtype and :func:`assert_close_elementwise`. Plain NumPy, no package
imports: tests/conftest.py re-exports it, and tests/cases.py loads it by path when
``teeny-tx golden`` imports that file on its own (teeny_tx/cli.py's checkout_cases)."""

from __future__ import annotations

import numpy as np

# Results in a low-precision dtype are compared element by element with a float64 reference
# computed from the same (already rounded) inputs, never with an absolute floor proportional to
# max|reference| (which accepts a softmax with most of its entries zeroed).

# the unit roundoff u of each dtype: rounding a real x to it errs by at most u * |x| (normal x)
UNIT_ROUNDOFF = {"f64": 2.0**-53, "f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}
# the spacing of its subnormals: what rounding a value below the normal range can err by
SUBNORMAL = {"f64": 2.0**-1074, "f32": 2.0**-149, "f16": 2.0**-24, "bf16": 2.0**-133}
_DTYPE_NAMES = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
}


def dtype_name(dtype) -> str:
    """'f16' for torch.float16, np.float16, 'float16' or 'f16' (likewise the other floats)."""
    text = str(dtype).removeprefix("torch.")
    if text in UNIT_ROUNDOFF:
        return text
    return _DTYPE_NAMES[np.dtype(dtype).name if text not in _DTYPE_NAMES else text]


def _float64(a) -> np.ndarray:
    if hasattr(a, "detach"):  # a torch tensor (any device)
        return a.detach().to("cpu").double().numpy()
    if hasattr(a, "get"):  # a CuPy array
        a = a.get()
    return np.asarray(a).astype(np.float64)


def assert_close_elementwise(
    got,
    want,
    dtype,
    *,
    ulps: float = 2.0,
    scale=None,
    peer=None,
    peer_factor: float = 2.0,
    atol: float | None = None,
    what: str = "",
) -> float:
    """Assert, element by element, |got - want| <= ulps * u * scale + peer_factor * |peer - want|
    + atol, and NaN exactly where ``want`` is NaN; returns the largest |error| / bound.

    ``want``: the float64 reference of the same inputs. ``u``: the unit roundoff of ``dtype``
    (the result's dtype): ``ulps`` counts how many roundings of that size the computation may
    make (1 for the final rounding of a value computed in a wider type, plus its own error).
    ``scale`` (default |want|): the magnitude the op's rounding errors are relative to where
    it cancels (sum |a_k b_k| for a dot product, for example): the op's condition. ``peer``: the
    same computation done by torch in the input dtype (FlashAttention's criterion: at most
    ``peer_factor`` times its error), for ops whose error is set by their conditioning rather
    than one rounding. ``atol`` (default: the dtype's subnormal spacing, what rounding a result
    that underflows errs by) is the only absolute term."""
    name = dtype_name(dtype)
    g, w = _float64(got), _float64(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape}, expected {w.shape}"
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan), f"{what}: NaN at {np.argwhere(np.isnan(g) != nan)}"
    s = np.abs(w) if scale is None else np.broadcast_to(_float64(scale), w.shape)
    bound = ulps * UNIT_ROUNDOFF[name] * np.abs(s) + (SUBNORMAL[name] if atol is None else atol)
    if peer is not None:
        bound = bound + peer_factor * np.abs(_float64(peer) - w)
    keep = ~nan
    with np.errstate(invalid="ignore", divide="ignore"):  # inf - inf: judged just below
        err = np.where(keep, np.abs(g - np.where(keep, w, 0.0)), 0.0)
        err = np.where(np.isinf(w) & (g == w), 0.0, err)  # the same infinity: exact
        ratio = np.where(keep, err / bound, 0.0)
    if ratio.size and not np.all(ratio <= 1.0):
        bad = np.unravel_index(np.argmax(np.where(np.isnan(ratio), np.inf, ratio)), ratio.shape)
        raise AssertionError(
            f"{what} [{name}]: {int(np.sum(~(ratio <= 1.0)))} of {ratio.size} elements out of "
            f"bounds; worst at {tuple(int(i) for i in bad)}: {g[bad]!r}, expected {w[bad]!r} "
            f"(error {err[bad]:.3g} > bound {bound[bad]:.3g})"
        )
    return float(np.max(ratio)) if ratio.size else 0.0
