"""Parsing: prelude + kernel text → pycparser AST with coordinates in the kernel file."""

from .source import Unit, parse, strip_comments

__all__ = ["Unit", "parse", "strip_comments"]
