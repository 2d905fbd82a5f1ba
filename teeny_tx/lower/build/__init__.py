"""The builder: pycparser AST of one kernel → the typed IR of one specialisation.

``builder.py`` visits statements and expressions; the structural ops are typed by its mixins
(``memory_ops``, ``shape_ops``, ``reduction_ops``, ``dot_ops``, ``debug_ops``) on the context
they share (``context.py``); ``signature.py`` reads a kernel's parameter list.
"""
