"""Lowering: pycparser AST → typed block IR (builder), then passes (layout, axis info)."""
