"""The op table: every operation of the language, one entry each, and the rules they follow.

``registry.py`` holds the table's machinery (``OpDef``, ``OPS``, ``make``, ``FAMILIES``);
``table.py`` declares the entries and imports the modules of families of their own
(``random.py``), so ``table.OPS`` is complete. ``typing.py`` holds the typing and shape
rules, ``casts.py`` the conversions, ``exact_fma.py`` the interpreter's fused multiply-add.
"""
