"""The reserved identifiers of the language: what a kernel file may not name.

Input: an identifier of the kernel file. Output: ``None`` when the user may use it, else the
reason it is reserved (:func:`why_reserved`). The parser refuses a reserved identifier wherever
the kernel file spells it (kernel, helper, parameter and variable names, and uses), so that
no user name can meet a name of the generated CUDA:

R1. ``GENERATED_PREFIX`` (``tx_``) starts every name the compiler generates (temporaries,
    pipeline buffers, layouts; the allocator in ``lower/names.py`` hands them out).
R2. Names that start with ``__`` or with ``_`` and a capital letter are the implementation's in
    C and C++ (``__LINE__``, ``__CUDA_ARCH__``, ``__shared__``, ``__half``, ``_Pragma``).
R3. ``RESERVED_NAMES``: the keywords of C and C++, CUDA's built-in variables and the device
    functions the generated code calls (``atomicAdd``), the macros and functions of the
    standard headers that NVRTC sees (``NULL``, ``assert``, ``printf``), ``main``, and the
    device header's namespace ``tx``.
R4. ``KERNEL_RESERVED_NAMES`` adds, for kernel names only, the types and functions the CUDA
    headers declare at global scope (``half``, ``float4``, ``dim3``, ``malloc``): a local
    variable may shadow them, a kernel would collide with them.
R5. ``MATH_FUNCTION_NAMES``: CUDA's math functions (``expf``, ``fmaxf``, ``sqrtf``, ``pow``),
    for kernel names only, like R4 (NVRTC refused a kernel of that name with an overload
    error).

The language's own names (its types, operations and constants: ``i32``, ``max``, ``INF``) are
never reserved; a test checks that the two sets are apart.
"""

from __future__ import annotations

import re

GENERATED_PREFIX = "tx_"

_C_KEYWORDS = """
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local
"""
_CPP_KEYWORDS = """
    alignas alignof and and_eq asm bitand bitor catch char16_t char32_t char8_t class compl
    concept consteval constexpr constinit const_cast co_await co_return co_yield decltype
    delete dynamic_cast explicit export friend mutable namespace new noexcept not not_eq
    nullptr operator or or_eq private protected public reinterpret_cast requires
    static_cast template this thread_local throw try typeid typename using virtual wchar_t
    xor xor_eq final override
"""
_CUDA_BUILTINS = """
    threadIdx blockIdx blockDim gridDim warpSize atomicAdd atomicSub atomicExch atomicMin
    atomicMax atomicInc atomicDec atomicCAS atomicAnd atomicOr atomicXor
"""
_STANDARD_NAMES = """
    NULL EOF assert main printf offsetof INFINITY HUGE_VAL INT_MAX INT_MIN UINT_MAX LLONG_MAX
    LLONG_MIN FLT_MAX DBL_MAX CHAR_BIT std cuda tx
"""
# Types and functions the CUDA headers declare at global scope: a kernel (a global function of
# the generated code) may not take these names; a local variable or parameter may (it only
# shadows them inside the kernel, where the generated code never names them).
_VECTOR_BASES = "char uchar short ushort int uint long ulong longlong ulonglong float double"
_VECTOR_TYPES = " ".join(f"{base}{n}" for base in _VECTOR_BASES.split() for n in (1, 2, 3, 4))
_GLOBAL_NAMES = """
    dim3 half half2 nv_bfloat16 nv_bfloat162 clock clock64 cudaError_t malloc free memcpy
    memset size_t ptrdiff_t nullptr_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t
    uint64_t intptr_t uintptr_t
"""

# CUDA's math functions (math_functions.h, declared at global scope for the device): the
# single-precision ones (expf, fmaxf, sqrtf) and the double ones the language does not itself
# name (its exp, sqrt, max... are operations, never kernel names anyway)
_MATH_DOUBLE = """
    fabs fmax fmin frexp jn lrint lround modf nan norm remquo rnorm scalbln sincos sincospi y0
    y1 yn
"""  # (tan, erfinv, hypot... are the language's: lower/ops/libdevice.py)
_MATH_FLOAT_BASES = """
    acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh cospi erf erfc erfcinv
    erfcx erfinv exp exp10 exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp hypot ilogb
    ldexp lgamma llrint llround log log10 log1p log2 logb lrint lround modf nan nearbyint
    nextafter norm norm3d norm4d normcdf normcdfinv pow rcbrt remainder remquo rhypot rint
    round rnorm rsqrt scalbln scalbn sin sincos sincospi sinh sinpi sqrt tan tanh tgamma trunc
"""
_MATH_NAMES = _MATH_DOUBLE + " ".join(f"{b}f" for b in _MATH_FLOAT_BASES.split())

RESERVED_NAMES: frozenset[str] = frozenset(
    " ".join((_C_KEYWORDS, _CPP_KEYWORDS, _CUDA_BUILTINS, _STANDARD_NAMES)).split()
)
KERNEL_RESERVED_NAMES: frozenset[str] = RESERVED_NAMES | frozenset(
    " ".join((_VECTOR_TYPES, _GLOBAL_NAMES)).split()
)
MATH_FUNCTION_NAMES: frozenset[str] = frozenset(_MATH_NAMES.split())

_IMPLEMENTATION = re.compile(r"__|_[A-Z]")


def why_reserved(name: str, kernel: bool = False) -> str | None:
    """Why ``name`` may not appear in a kernel file (R1-R3), or None when it may; ``kernel``:
    the name of a kernel, which must also avoid the CUDA headers' global names (R4, R5)."""
    if name.startswith(GENERATED_PREFIX):
        return f"names starting with '{GENERATED_PREFIX}' are the compiler's"
    if _IMPLEMENTATION.match(name):
        return "names starting with '__' or '_' and a capital letter are reserved in C and CUDA"
    if name in RESERVED_NAMES:
        return "it is a reserved name of C, C++ or CUDA"
    if kernel and name in KERNEL_RESERVED_NAMES:
        return "the CUDA headers declare it at global scope, where kernels live"
    if kernel and name in MATH_FUNCTION_NAMES:
        return "it is a CUDA math function, declared at global scope where kernels live"
    return None


def reserved_hint(name: str) -> str:
    """A hint for a refused name: a nearby free spelling (free in every position)."""
    base = name
    if base.startswith(GENERATED_PREFIX):
        base = base[len(GENERATED_PREFIX) :]
    base = base.lstrip("_") or "value"
    candidate = base if why_reserved(base, kernel=True) is None else f"{base}_"
    if why_reserved(candidate, kernel=True) is not None or candidate == name:
        candidate = f"my_{base}"
    return f"rename it, e.g. '{candidate}'"
