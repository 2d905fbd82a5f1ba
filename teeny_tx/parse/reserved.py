"""Reserved identifiers: the namespace of every name the compiler generates.

Input: nothing (declarations). Output: ``GENERATED_PREFIX``, the prefix that every
compiler-generated identifier in the CUDA (temporaries, pipeline buffers, layout aliases,
renamed locals) starts with, and that the language forbids in user identifiers.
"""

GENERATED_PREFIX = "tx_"
