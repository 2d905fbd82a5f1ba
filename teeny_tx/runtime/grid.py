"""Launch grids: ``cdiv``, and a user's grid (ints, a tuple, or a callable of the launch's
meta-parameters) checked and made a 3-tuple of positive ints within CUDA's limits."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import LaunchError


def cdiv(a: int, b: int) -> int:
    """Ceiling division of integers: the number of programs of size ``b`` covering ``a``."""
    return -(-a // b)


def as_grid3(grid: Any, meta: dict[str, Any]) -> tuple[int, int, int]:
    """``grid`` (or ``grid(meta)``) as (x, y, z); a LaunchError names what is wrong."""
    if callable(grid):
        grid = grid(meta)
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, (bool, np.bool_)):
        grid = (grid,)
    if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
        raise LaunchError(
            "the grid must be a tuple of 1 to 3 positive ints (or a callable giving one), "
            f"got {grid!r}"
        )
    out = []
    for g in grid:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g <= 0:
            raise LaunchError(f"grid sizes must be positive ints, got {tuple(grid)!r}")
        out.append(int(g))
    limits = (2**31 - 1, 65535, 65535)
    for g, lim, axis in zip(out, limits, "xyz", strict=False):
        if g > lim:
            raise LaunchError(f"grid size {g} along {axis} exceeds the CUDA limit {lim}")
    out += [1] * (3 - len(out))
    return out[0], out[1], out[2]
