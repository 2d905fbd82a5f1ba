"""The NumPy interpreter: typed IR run block by block on the CPU (``backend="numpy"``)."""

from .interpreter import run

__all__ = ["run"]
