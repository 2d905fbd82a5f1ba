"""The Python front end: functions in Triton's spelling, translated into the C syntax.

``python_ast.py`` translates a function's AST into C text laid over its Python lines
(``program.py``); ``jit.py`` is the ``@jit`` decorator and its launches; ``builtins.py`` the
``triton.language`` names it knows. ``teeny_tx.triton`` is the compatibility import.
"""

from .jit import JITFunction, jit
from .python_ast import translate

__all__ = ["JITFunction", "jit", "translate"]
