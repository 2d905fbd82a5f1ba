"""Lowering: pycparser AST → typed block IR → decided IR, in stages.

``ir`` declares the IR, ``names`` allocates every generated name and ``interface`` holds what
the host and the emitter need beyond the body: the three are what the stages share. ``ops/``
is the op table and its typing rules; ``build/`` types one specialisation of a kernel
(AST → ``ir.Kernel``); ``passes/`` decides layouts, conversions, vector widths, pipelines and
dot plans (``passes/driver.py`` runs them in order); ``hopper/`` plans the Hopper matmul.
"""
