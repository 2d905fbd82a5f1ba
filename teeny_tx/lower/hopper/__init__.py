"""The Hopper matmul: a matrix product → a decided warp-specialised TMA + wgmma kernel node.

``matmul.py`` plans it (``plan_matmul``); ``templates/hopper.py`` renders it and
``runtime/hopper.py`` launches it.
"""
