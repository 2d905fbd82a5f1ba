/* teeny_tx language prelude.
 *
 * Every kernel file is parsed with this text in front of it: these are the type names and the
 * operations of the language. A prototype documents its operation; the typing rule, the CUDA
 * template and the NumPy implementation of the same name live in teeny_tx/lower/ops/table.py.
 * Operations are generic over shapes and dtypes, which C prototypes cannot say: `tile` in a
 * prototype means "a tile or a scalar" and `...` marks optional arguments.
 */

/* ---- element types ------------------------------------------------------------------------ */
typedef _Bool bool;                 /* 8-bit truth value                                       */
typedef signed char i8;
typedef short i16;
typedef int i32;                    /* the index type: 64-bit when an array exceeds 2^31 - 1   */
typedef long long i64;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef struct tx_f16 f16;          /* IEEE binary16 (__half)                                   */
typedef struct tx_bf16 bf16;        /* bfloat16 (__nv_bfloat16)                                 */
typedef float f32;
typedef double f64;

/* ---- kinds of declaration ----------------------------------------------------------------- */
typedef void kernel;                /* `kernel name(params) { ... }` is an entry point          */
typedef void any;                   /* `const any *p`: element type taken from the argument     */
typedef struct tx_tile tile;        /* `tile x = ...;` a block-wide value, shape/dtype inferred */
typedef struct tx_acc acc_t;        /* compute type: f64 if a pointer argument is f64, else f32 */

/* ---- constants (weak f32: they adopt the float type they meet) ----------------------------- */
extern const f32 INF;               /* +infinity                                                */
extern const f32 NAN;               /* a quiet NaN                                              */

/* ---- program and index space -------------------------------------------------------------- */
i32 program_id(i32 axis);           /* index of this program along grid axis 0, 1 or 2         */
i32 num_programs(i32 axis);         /* number of programs along grid axis 0, 1 or 2            */
tile arange(i32 start, i32 end);    /* i32 tile start..end-1; constants, end-start a power of 2 */
tile cdiv(tile a, tile b);          /* ceiling division of integers: (a + b - 1) / b            */

/* ---- memory ------------------------------------------------------------------------------- */
/* Loads take (ptr, mask, other, cache, evict), stores (ptr, value, mask, cache, evict); the     */
/* optional hints are constants: a cache modifier (loads: CACHE_CA, CACHE_CG, CACHE_CS, CACHE_LU, CACHE_CV; */
/* stores: CACHE_WB, CACHE_CG, CACHE_CS, CACHE_WT) and an L2 eviction priority (EVICT_NORMAL,   */
/* EVICT_FIRST, EVICT_LAST), 0 for none. The interpreter ignores them.                         */
extern const i32 CACHE_CA, CACHE_CG, CACHE_CS, CACHE_LU, CACHE_CV, CACHE_WB, CACHE_WT;
extern const i32 EVICT_NORMAL, EVICT_FIRST, EVICT_LAST;
tile load(tile ptr, ...);           /* load(ptr, mask = all, other = 0): masked-off lanes read other */
void store(tile ptr, tile value, ...); /* store(ptr, value, mask = all); value converts to *ptr's type */

/* ---- shapes (static; a dimension's size is a constant power of two) ------------------------ */
tile expand_dims(tile x, i32 axis);  /* insert a dimension of size 1 at axis                    */
tile broadcast_to(tile x, ...);     /* broadcast_to(x, d0, d1, ...): stretch size-1 dimensions */
tile reshape(tile x, ...);          /* reshape(x, d0, d1, ...): same elements, row-major       */
tile trans(tile x);                 /* transpose of a 2-D tile                                  */
tile permute(tile x, ...);          /* permute(x, d0, d1, ...): result axis k is source axis dk */

/* ---- reductions (axis and keep_dims are constants; no axis reduces the whole tile) -------- */
tile sum(tile x, ...);              /* sum(x, axis, keep_dims); f16/bf16 give f32, i8/i16 give i32 */
tile max(tile x, ...);              /* max(x, axis, keep_dims); NaN operands are skipped        */
tile min(tile x, ...);              /* min(x, axis, keep_dims); NaN operands are skipped        */
tile xor_sum(tile x, ...);          /* xor_sum(x, axis, keep_dims) of integers                  */
tile reduce_or(tile x, ...);        /* reduce_or(x, axis, keep_dims): bitwise or of integers or bools */
tile argmax(tile x, i32 axis, ...); /* i32 index of the maximum along axis; ties: lowest index  */
tile argmin(tile x, i32 axis, ...); /* i32 index of the minimum along axis; ties: lowest index  */
tile reduce(tile x, i32 axis, ...); /* reduce(x, axis, combine): combine is a helper T f(T, T); x may be a tuple (x, y) */

/* ---- scans (inclusive, along an axis; reverse = 1 scans from the end) ------------------------ */
tile cumsum(tile x, ...);           /* cumsum(x, axis = 0, reverse = 0); dtype as sum()         */
tile cumprod(tile x, ...);          /* cumprod(x, axis = 0, reverse = 0)                        */
tile associative_scan(tile x, i32 axis, ...); /* (x, axis, combine, reverse = 0): combine a helper; x may be a tuple */
tile flip(tile x, ...);             /* flip(x, axis = 0): reverse the order along an axis       */
tile cat(tile a, tile b, ...);      /* cat(a, b, axis = 0): a then b along axis (equal shapes)   */
tile join(tile a, tile b);          /* a and b side by side in a new last dimension of size 2   */
tile split(tile x, i32 k);          /* x[..., k] of a tile whose last dimension has size 2      */

/* ---- matrix products ------------------------------------------------------------------------ */
/* dot(a, b, acc = 0, input_precision = IEEE): a [M, K] @ b [K, N] + acc, M, N, K >= 16 (or     */
/* batches [B, M, K] @ [B, K, N]); f16/bf16 accumulate in f32, i8 in i32, f64 in f64 (FMAs on  */
/* the GPU); f32 inputs are IEEE unless TF32 (inputs rounded to TF32) or TF32X3 (three TF32      */
/* products, near f32) is asked for.                                                             */
/* The NumPy interpreter runs it today; the tensor-core CUDA lowering is not written yet.        */
extern const i32 IEEE, TF32, TF32X3;
tile dot(tile a, tile b, ...);

/* ---- atomics (read-modify-write of global memory; each returns the old values) ------------ */
/* Optional trailing constants: mask, then the memory order (ACQ_REL by default, as in Triton:  */
/* RELAXED, ACQUIRE, RELEASE, ACQ_REL) and the scope (SCOPE_GPU by default; SCOPE_CTA, SCOPE_SYS). */
/* Masked-off lanes do nothing and return 0. A scalar atomic runs once per program.            */
extern const i32 RELAXED, ACQUIRE, RELEASE, ACQ_REL, SCOPE_CTA, SCOPE_GPU, SCOPE_SYS;
tile atomic_add(tile ptr, tile val, ...);   /* *ptr += val: f16, bf16, f32, f64, i32, u32, i64, u64 */
tile atomic_max(tile ptr, tile val, ...);   /* *ptr = max(*ptr, val): integers and floats       */
tile atomic_min(tile ptr, tile val, ...);   /* *ptr = min(*ptr, val): integers and floats       */
tile atomic_and(tile ptr, tile val, ...);   /* *ptr &= val: 32- and 64-bit integers             */
tile atomic_or(tile ptr, tile val, ...);    /* *ptr |= val: 32- and 64-bit integers             */
tile atomic_xor(tile ptr, tile val, ...);   /* *ptr ^= val: 32- and 64-bit integers             */
tile atomic_xchg(tile ptr, tile val, ...);  /* *ptr = val                                        */
tile atomic_cas(tile ptr, tile cmp, tile val, ...); /* *ptr = *ptr == cmp ? val : *ptr          */

/* ---- debugging (device_print and device_assert are compiled in only with debug: ---------- */
/* teeny_tx.compile(path, debug=True) or TEENY_TX_DEBUG=1; static_assert always)               */
void static_assert(tile cond, ...);  /* static_assert(cond, "message"): a constant condition    */
void static_print(tile what, ...);   /* static_print("text", x, ...): print types and constants when compiling */
void device_print(tile prefix, ...); /* device_print("prefix", x, ...): every element, with pid */
void device_assert(tile cond, ...);  /* device_assert(cond, "message"): trap where cond is false */

/* ---- synchronisation and compiler hints ------------------------------------------------------ */
void debug_barrier(void);           /* every thread of the program waits here (__syncthreads)   */
tile multiple_of(tile x, i32 n);    /* x, promised: each contiguous group starts at a multiple of n (bytes for pointers) */
tile max_contiguous(tile x, i32 n); /* x, promised: runs of n lanes hold consecutive values     */
tile max_constancy(tile x, i32 n);  /* x, promised: runs of n lanes hold one value              */
void assume(tile cond);             /* a promise to the compiler that cond holds (checked on the interpreter) */
tile bitcast(tile x, ...);          /* bitcast(x, u32): the same bits as another type of equal width */

/* ---- selection ---------------------------------------------------------------------------- */
tile where(tile cond, tile a, tile b); /* a where cond else b, broadcast                      */
extern const i32 PROPAGATE_NAN_NONE, PROPAGATE_NAN_ALL;
tile maximum(tile a, tile b, ...);  /* elementwise max; a NaN operand yields the other (fmax), or NaN with PROPAGATE_NAN_ALL */
tile minimum(tile a, tile b, ...);  /* elementwise min; a NaN operand yields the other (fmin), or NaN with PROPAGATE_NAN_ALL */
extern const i32 RTNE, RTZ;
tile cast(tile x, ...);             /* cast(x, T, rounding = RTNE): (T)x; RTZ rounds a narrowing float conversion toward zero */

/* ---- math (float tiles; f16/bf16 are computed in f32 and rounded once) -------------------- */
tile exp(tile x);                   /* e^x                                                      */
tile exp2(tile x);                  /* 2^x                                                      */
tile fast_exp2(tile x);             /* 2^x by ex2.approx.ftz: rel. error < 2^-22, results < 2^-126 are 0 */
tile log(tile x);                   /* natural logarithm                                        */
tile log2(tile x);                  /* base-2 logarithm                                         */
tile sqrt(tile x);                  /* square root, IEEE rounded                                */
tile rsqrt(tile x);                 /* 1/sqrt(x), CUDA rsqrt (max 2 ulp)                       */
tile sin(tile x);                   /* sine                                                     */
tile cos(tile x);                   /* cosine                                                   */
tile tanh(tile x);                  /* hyperbolic tangent                                       */
tile erf(tile x);                   /* error function                                           */
tile abs(tile x);                   /* absolute value (integers too)                            */
tile floor(tile x);                 /* round toward -infinity                                   */
tile ceil(tile x);                  /* round toward +infinity                                   */
tile sigmoid(tile x);               /* 1 / (1 + e^-x)                                           */
tile fma(tile a, tile b, tile c);   /* a * b + c with one rounding                              */
tile pow(tile x, tile y);           /* x^y                                                      */
