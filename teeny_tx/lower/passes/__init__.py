"""The passes after typing: typed ``ir.Kernel`` → decided ``ir.Kernel``, one module each.

``driver.py`` runs them in order (simplify, layout, convert, vectorize, pipeline with
warp_spec, dot_plan, then the interface); ``axisinfo.py`` is the analysis vectorize and the
pipeliner read; ``induction.py`` rewrites pointer inductions before them.
"""
