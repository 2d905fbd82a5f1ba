"""Token-level mutants of kernel text.

Input: the text of a kernel file and a ``random.Random``. Output: a mutated text and the name of
the mutation that made it. Mutations work on tokens (identifiers, numbers, strings, operators),
so most mutants are near-misses of real kernels, the inputs a careless or hostile user writes:
deleted, duplicated and swapped tokens, replaced identifiers and numbers, dropped braces, deep
nesting, odd bytes, long sums, directives and line splices, huge files.
"""

from __future__ import annotations

import random
import re

TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)
      | (?P<string>"(?:\\.|[^"\\\n])*")
      | (?P<char>'(?:\\.|[^'\\\n])*')
      | (?P<number>(?:0[xX][0-9a-fA-F.]+(?:[pP][-+]?\d+)?
                    |\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[uUlLfF]*)
      | (?P<name>[A-Za-z_]\w*)
      | (?P<space>\s+)
      | (?P<op><<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!<>=?:;,.(){}\[\]#])
      | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)

# identifiers a user might reach for: reserved and generated names, op names, near-misses
_NAMES = (
    "NULL __LINE__ __CUDA_ARCH__ __shared__ __half main printf tx_stage tx_smem stage acc_0 "
    "a_t_stages k_ahead i L0 load_0 half float4 threadIdx new this class tx max sum load store "
    "where dot arange program_id expand_dims INF NAN IEEE true false tile kernel any i32 f32 "
    "bf16 u8 i64 debug_barrier bitcast multiple_of associative_scan foo"
)
NAMES = _NAMES.split()
_NUMBERS = (
    "0 1 -1 2 3 7 16 17 1024 65536 2147483647 2147483648 4294967296 9223372036854775807 "
    "18446744073709551615 99999999999999999999 0x9E3779B9 0x1p3 0x1.8p-2f 1e400 1e-400 1.5f "
    "-0.0 .5 08 0b101 0777 'a' 'ab' L'a' '\\q' '\\x41' 1u 1ull 3.0l"
)
NUMBERS = _NUMBERS.split()
ODD_BYTES = ["\x00", "\x7f", "\r", "\\", "\u00e9", "\ufeff", "`", "@", "$", "\t", "\x0c", "\x1b"]


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of every token, whitespace and comments included: joined, they are ``text``."""
    return [(m.lastgroup or "other", m.group(0)) for m in TOKEN.finditer(text)]


def _code(toks: list[tuple[str, str]]) -> list[int]:
    return [i for i, (kind, _) in enumerate(toks) if kind not in ("space", "comment")]


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One mutant of ``text`` and its mutation's name."""
    kind = rng.choice(MUTATIONS)
    return _MUTATORS[kind](text, rng), kind


def _delete(text, rng):
    toks = tokens(text)
    code = _code(toks)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        i = rng.choice(code)
        toks[i] = ("space", " ")
    return "".join(t for _, t in toks)


def _duplicate(text, rng):
    toks = tokens(text)
    i = rng.choice(_code(toks))
    toks.insert(i, toks[i])
    return "".join(t for _, t in toks)


def _swap(text, rng):
    toks = tokens(text)
    code = _code(toks)
    k = rng.randrange(len(code) - 1)
    i, j = code[k], code[k + 1]
    toks[i], toks[j] = toks[j], toks[i]
    return "".join(t for _, t in toks)


def _replace_name(text, rng):
    toks = tokens(text)
    names = [i for i, (kind, _) in enumerate(toks) if kind == "name"]
    own = sorted({toks[i][1] for i in names})
    i = rng.choice(names)
    pool = NAMES if rng.random() < 0.5 else own
    new = rng.choice(pool)
    if rng.random() < 0.5:  # every occurrence: a consistent rename
        old = toks[i][1]
        toks = [(k, new if k == "name" and t == old else t) for k, t in toks]
    else:
        toks[i] = ("name", new)
    return "".join(t for _, t in toks)


def _replace_number(text, rng):
    toks = tokens(text)
    numbers = [i for i, (kind, _) in enumerate(toks) if kind in ("number", "char")]
    if not numbers:
        return _replace_name(text, rng)
    toks[rng.choice(numbers)] = ("number", rng.choice(NUMBERS))
    return "".join(t for _, t in toks)


def _replace_op(text, rng):
    toks = tokens(text)
    ops = [i for i, (kind, _) in enumerate(toks) if kind == "op"]
    pool = "+ - * / % << >> & | ^ ~ ! < > <= >= == != && || = += ( ) [ ] { } ; , ? : . ->"
    pool = pool.split()
    toks[rng.choice(ops)] = ("op", rng.choice(pool))
    return "".join(t for _, t in toks)


def _drop_brace(text, rng):
    braces = [m.start() for m in re.finditer(r"[{}()\[\]]", text)]
    i = rng.choice(braces)
    return text[:i] + text[i + 1 :]


def _nest(text, rng):
    """An expression wrapped in many parentheses, or negated many times."""
    toks = tokens(text)
    targets = [i for i, (kind, _) in enumerate(toks) if kind in ("name", "number")]
    i = rng.choice(targets)
    depth = rng.choice((10, 60, 70, 200, 1000))
    if rng.random() < 0.5:
        toks[i] = ("other", "(" * depth + toks[i][1] + ")" * depth)
    else:
        toks[i] = ("other", "-" * depth + toks[i][1])
    return "".join(t for _, t in toks)


def _long_sum(text, rng):
    """A statement whose right-hand side is a sum of many terms."""
    toks = tokens(text)
    targets = [i for i, (kind, _) in enumerate(toks) if kind in ("name", "number")]
    i = rng.choice(targets)
    terms = rng.choice((20, 63, 65, 500, 3000))
    toks[i] = ("other", " + ".join([toks[i][1]] * terms))
    return "".join(t for _, t in toks)


def _odd_byte(text, rng):
    i = rng.randrange(len(text) + 1)
    return text[:i] + rng.choice(ODD_BYTES) + text[i:]


def _directive(text, rng):
    lines = text.split("\n")
    i = rng.randrange(len(lines) + 1)
    line = rng.choice(
        [
            '#line 100 "fake.c"',
            '# 7 "other.c"',
            "#define N 4",
            "#include <stdio.h>",
            "#pragma unroll",
            "#pragma autotune config(BLOCK=64)",
            "// a comment ending in a backslash \\",
            "/* unterminated",
            "*/",
        ]
    )
    lines.insert(i, line)
    return "\n".join(lines)


def _huge(text, rng):
    """The file repeated many times (defined twice) or one statement repeated into megabytes."""
    if rng.random() < 0.5:
        return text * rng.choice((2, 50))
    lines = text.split("\n")
    statements = [k for k, line in enumerate(lines) if line.strip().endswith(";")]
    if not statements:
        return text * 2
    k = rng.choice(statements)
    copies = rng.choice((100, 5000, 300000))
    return "\n".join(lines[:k] + [lines[k]] * copies + lines[k:])


def _truncate(text, rng):
    return text[: rng.randrange(len(text))]


_MUTATORS = {
    "delete": _delete,
    "duplicate": _duplicate,
    "swap": _swap,
    "replace_name": _replace_name,
    "replace_number": _replace_number,
    "replace_op": _replace_op,
    "drop_brace": _drop_brace,
    "nest": _nest,
    "long_sum": _long_sum,
    "odd_byte": _odd_byte,
    "directive": _directive,
    "huge": _huge,
    "truncate": _truncate,
}
# weights: token edits are most of the mutants
MUTATIONS = (
    ["delete"] * 4
    + ["duplicate"] * 2
    + ["swap"] * 2
    + ["replace_name"] * 4
    + ["replace_number"] * 3
    + ["replace_op"] * 3
    + ["drop_brace"] * 2
    + ["nest", "long_sum", "odd_byte", "odd_byte", "directive", "huge", "truncate"]
)
