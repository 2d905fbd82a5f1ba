// teeny_tx device support header: included by every generated kernel.
//
// Layout types map a thread's registers to tile coordinates; the math and cast overloads give
// every dtype one spelling in generated code; load/store helpers turn groups of contiguous,
// aligned lanes into 16-byte accesses. Numerics: no flush-to-zero, IEEE division and square
// root (the NVRTC options say so); f16/bf16 math is computed in f32 and rounded once.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace tx {

// ---- layouts ------------------------------------------------------------------------------
// Blocked<Shape, SizePerThread, ThreadsPerWarp, WarpsPerBlock, Order> (Triton's blocked
// layout): along dimension d each thread holds SizePerThread[d] contiguous elements, the warp's
// lanes and the block's warps are laid side by side (Order[0] is the fastest-varying dimension),
// and the pattern repeats until the tile is covered. A tile smaller than one repetition wraps:
// the threads past its end hold copies (owner() says which copy is the original). A dimension of
// size 1 is held once by every thread: that is how a row or column broadcasts for free.
// Registers are numbered dimension by dimension in Order, contiguous elements fastest.
template <int... V>
struct Ints {
    static constexpr int N = sizeof...(V);
    static constexpr int v[N] = {V...};
};

template <class Shape, class SPT, class TPW, class WPC, class Order>
struct Blocked {
    static constexpr int RANK = Shape::N;
    __host__ __device__ static constexpr int order(int k) { return Order::v[k]; }
    __host__ __device__ static constexpr int size(int d) { return Shape::v[d]; }
    __host__ __device__ static constexpr int spt(int d) { return SPT::v[d]; }
    __host__ __device__ static constexpr int tile(int d) { return SPT::v[d] * TPW::v[d] * WPC::v[d]; }
    // registers along dimension d
    __host__ __device__ static constexpr int regs(int d) {
        return size(d) >= tile(d) ? spt(d) * (size(d) / tile(d)) : (spt(d) < size(d) ? spt(d) : size(d));
    }
    __host__ __device__ static constexpr int count() {
        int n = 1;
        for (int d = 0; d < RANK; ++d) n *= regs(d);
        return n;
    }
    static constexpr int REGS = count();
    // register r's index along dimension d
    __host__ __device__ static constexpr int reg_coord(int r, int d) {
        for (int k = 0; k < RANK; ++k) {
            int dim = Order::v[k];
            if (dim == d) return r % regs(dim);
            r /= regs(dim);
        }
        return 0;
    }
    // this thread's position along dimension d (lane part, warp part)
    __device__ static int lane_coord(int d) {
        int lane = int(threadIdx.x) % 32;
        for (int k = 0; k < RANK; ++k) {
            int dim = Order::v[k];
            if (dim == d) return lane % TPW::v[dim];
            lane /= TPW::v[dim];
        }
        return 0;
    }
    __device__ static int warp_coord(int d) {
        int warp = int(threadIdx.x) / 32;
        for (int k = 0; k < RANK; ++k) {
            int dim = Order::v[k];
            if (dim == d) return warp % WPC::v[dim];
            warp /= WPC::v[dim];
        }
        return 0;
    }
    __device__ static int thread_coord(int d) { return warp_coord(d) * TPW::v[d] + lane_coord(d); }
    __host__ __device__ static constexpr int warps(int d) { return WPC::v[d]; }
    // the distance in register numbers between neighbours along dimension d
    __host__ __device__ static constexpr int reg_stride(int d) {
        int stride = 1;
        for (int k = 0; k < RANK; ++k) {
            int dim = Order::v[k];
            if (dim == d) return stride;
            stride *= regs(dim);
        }
        return stride;
    }
    __host__ __device__ static constexpr int lanes(int d) { return TPW::v[d]; }
    // the lane-id distance between neighbours along dimension d
    __host__ __device__ static constexpr int lane_stride(int d) {
        int stride = 1;
        for (int k = 0; k < RANK; ++k) {
            int dim = Order::v[k];
            if (dim == d) return stride;
            stride *= TPW::v[dim];
        }
        return stride;
    }
    __host__ __device__ static constexpr int total() {
        int n = 1;
        for (int d = 0; d < RANK; ++d) n *= size(d);
        return n;
    }
    static constexpr int SIZE = total();
    // the tile coordinate along dimension d of register r
    __device__ static int coord(int r, int d) {
        int rc = reg_coord(r, d);
        int base = thread_coord(d) * spt(d);
        return size(d) >= tile(d) ? (rc / spt(d)) * tile(d) + base + rc % spt(d) : base % size(d) + rc;
    }
    __device__ static int coord(int r) { return coord(r, RANK - 1); }
    // whether this thread's copy of its elements is the original (no wrapped duplicate)
    __device__ static bool owner() {
        bool own = true;
        for (int d = 0; d < RANK; ++d) own = own && (size(d) >= tile(d) || thread_coord(d) * spt(d) < size(d));
        return own;
    }
    // the row-major index of register r's element in the tile
    __device__ static int flat(int r) {
        int index = 0;
        for (int d = 0; d < RANK; ++d) index = index * size(d) + coord(r, d);
        return index;
    }
};

// The register of From (a broadcast of To: same blocked layout, some dimensions of size 1)
// that holds the element of To's register r.
template <class From, class To>
__host__ __device__ constexpr int remap(int r) {
    int index = 0, stride = 1;
    for (int k = 0; k < From::RANK; ++k) {
        int dim = From::order(k);
        if (From::regs(dim) > 1) index += To::reg_coord(r, dim) * stride;
        stride *= From::regs(dim);
    }
    return index;
}

// ---- conversions --------------------------------------------------------------------------
// cast<To>(x) is every conversion of generated code, by the rules of teeny_tx/lower/ops/casts.py
// (the interpreter and constant folding follow the same): integers wrap; a float becomes an
// integer by truncation toward zero, NaN gives 0 and values beyond the range (infinities too)
// saturate, for every width (cvt.rzi.sat's rule; a plain static_cast to i8/i16 would convert at
// 32 bits and wrap); conversions to a float round once (cuda_fp16/cuda_bf16 conversions do).
template <typename T> struct IntTraits { static constexpr bool is_int = false; };
#define TX_INT_TRAITS(T, BITS, SIGNED)                                                        \
    template <> struct IntTraits<T> {                                                        \
        static constexpr bool is_int = true;                                                 \
        static constexpr int bits = BITS;                                                    \
        static constexpr bool is_signed = SIGNED;                                            \
    };
TX_INT_TRAITS(signed char, 8, true)
TX_INT_TRAITS(short, 16, true)
TX_INT_TRAITS(int, 32, true)
TX_INT_TRAITS(long long, 64, true)
TX_INT_TRAITS(unsigned char, 8, false)
TX_INT_TRAITS(unsigned short, 16, false)
TX_INT_TRAITS(unsigned int, 32, false)
TX_INT_TRAITS(unsigned long long, 64, false)
#undef TX_INT_TRAITS

// ---- integer arithmetic (rules I1-I4 of teeny_tx/lower/ops/casts.py) ----------------------
// Every integer operation is computed in an unsigned type of at least 32 bits, where C++
// defines the wrap, and converted back to its own type: narrow results wrap to their type
// before any use (C would promote i8 + i8 to int and keep 254), and signed overflow never
// reaches undefined behaviour (NVRTC would fold (x + 1) > x to 1). Shift amounts are read as
// unsigned; an amount of the type's width or more shifts every bit out. x / 0 and x % 0 are 0;
// MIN / -1 is MIN and MIN % -1 is 0.
template <typename T> struct WideUnsigned { using type = unsigned int; };
template <> struct WideUnsigned<long long> { using type = unsigned long long; };
template <> struct WideUnsigned<unsigned long long> { using type = unsigned long long; };

template <typename T>
__device__ __forceinline__ T wrap_add(T a, T b) {
    using U = typename WideUnsigned<T>::type;
    return T(U(a) + U(b));
}
template <typename T>
__device__ __forceinline__ T wrap_sub(T a, T b) {
    using U = typename WideUnsigned<T>::type;
    return T(U(a) - U(b));
}
template <typename T>
__device__ __forceinline__ T wrap_mul(T a, T b) {
    using U = typename WideUnsigned<T>::type;
    return T(U(a) * U(b));
}
template <typename T>
__device__ __forceinline__ T wrap_neg(T a) {
    using U = typename WideUnsigned<T>::type;
    return T(U(0) - U(a));
}
template <typename T>
__device__ __forceinline__ T wrap_shl(T a, T s) {
    using U = typename WideUnsigned<T>::type;
    return U(s) >= U(IntTraits<T>::bits) ? T(0) : T(U(a) << U(s));
}
template <typename T>
__device__ __forceinline__ T wrap_shr(T a, T s) {
    using U = typename WideUnsigned<T>::type;
    if (U(s) >= U(IntTraits<T>::bits)) return IntTraits<T>::is_signed && a < T(0) ? T(-1) : T(0);
    return T(a >> int(s));  // arithmetic for signed (C++20's definition, nvcc's always)
}
template <typename T>
__device__ __forceinline__ T int_div(T a, T b) {
    if (b == T(0)) return T(0);
    if (IntTraits<T>::is_signed && b == T(-1)) return wrap_neg(a);
    return T(a / b);
}
template <typename T>
__device__ __forceinline__ T int_mod(T a, T b) {
    if (b == T(0)) return T(0);
    if (IntTraits<T>::is_signed && b == T(-1)) return T(0);
    return T(a % b);
}
template <typename T>
__device__ __forceinline__ T int_cdiv(T a, T b) { return int_div(wrap_sub(wrap_add(a, b), T(1)), b); }

template <typename T> struct FloatTraits { static constexpr bool is_float = false; };
template <> struct FloatTraits<float> { static constexpr bool is_float = true; using wide = float; };
template <> struct FloatTraits<double> { static constexpr bool is_float = true; using wide = double; };
template <> struct FloatTraits<__half> { static constexpr bool is_float = true; using wide = float; };
template <> struct FloatTraits<__nv_bfloat16> { static constexpr bool is_float = true; using wide = float; };

__device__ __forceinline__ float to_wide(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_wide(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_wide(float x) { return x; }
__device__ __forceinline__ double to_wide(double x) { return x; }

// Float -> integer: truncate, NaN -> 0, saturate. The bounds are powers of two, exact in every
// float type; inside them static_cast truncates a value the integer type holds.
template <typename To, typename F>
__device__ __forceinline__ To float_to_int(F x) {
    using I = IntTraits<To>;
    constexpr unsigned long long top = 1ull << (I::is_signed ? I::bits - 1 : I::bits - 1);
    const F hi = I::is_signed ? F(top) : F(top) * F(2);  // first value past the maximum
    const F lo = I::is_signed ? -F(top) : F(0);          // the minimum (0 for unsigned)
    const To max = I::is_signed ? To(top - 1) : To(~0ull);
    const To min = I::is_signed ? To(0ull - top) : To(0);
    if (!(x == x)) return To(0);
    if (x >= hi) return max;
    if (x <= lo) return min;
    return static_cast<To>(x);
}

template <typename To, typename From, bool = IntTraits<To>::is_int && FloatTraits<From>::is_float>
struct Convert {
    __device__ __forceinline__ static To run(From x) { return static_cast<To>(x); }
};
template <typename To, typename From>
struct Convert<To, From, true> {
    __device__ __forceinline__ static To run(From x) { return float_to_int<To>(to_wide(x)); }
};

template <typename To, typename From>
__device__ __forceinline__ To cast(From x) { return Convert<To, From>::run(x); }

// bitcast<To>(x): the bits of x read as To, a type of the same size.
template <typename To, typename From>
__device__ __forceinline__ To bitcast(From x) {
    static_assert(sizeof(To) == sizeof(From), "bitcast needs types of one size");
    To y;
    memcpy(&y, &x, sizeof(To));
    return y;
}

// debug_barrier(): Triton's; every thread of the block waits (its memory operations become
// visible to the block).
__device__ __forceinline__ void debug_barrier() { __syncthreads(); }
// cast_rtz<To>(x): a float narrowed toward zero (cast(x, T, RTZ); C6 of lower/ops/casts.py).
// Through f32 from f64: truncating twice truncates once, as every narrower value is an f32.
template <typename To, typename From> __device__ __forceinline__ To cast_rtz(From x);
template <> __device__ __forceinline__ __half cast_rtz<__half, float>(float x) { return __float2half_rz(x); }
template <> __device__ __forceinline__ __nv_bfloat16 cast_rtz<__nv_bfloat16, float>(float x) { return __float2bfloat16_rz(x); }
template <> __device__ __forceinline__ float cast_rtz<float, double>(double x) { return __double2float_rz(x); }
template <> __device__ __forceinline__ __half cast_rtz<__half, double>(double x) { return __float2half_rz(__double2float_rz(x)); }
template <> __device__ __forceinline__ __nv_bfloat16 cast_rtz<__nv_bfloat16, double>(double x) { return __float2bfloat16_rz(__double2float_rz(x)); }

template <> __device__ __forceinline__ __half cast<__half, __half>(__half x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 cast<__nv_bfloat16, __nv_bfloat16>(__nv_bfloat16 x) { return x; }
template <> __device__ __forceinline__ __half cast<__half, __nv_bfloat16>(__nv_bfloat16 x) { return __float2half_rn(__bfloat162float(x)); }
template <> __device__ __forceinline__ __nv_bfloat16 cast<__nv_bfloat16, __half>(__half x) { return __float2bfloat16_rn(__half2float(x)); }
template <> __device__ __forceinline__ __half cast<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __half cast<__half, double>(double x) { return __double2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 cast<__nv_bfloat16, float>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 cast<__nv_bfloat16, double>(double x) { return __double2bfloat16(x); }
template <> __device__ __forceinline__ bool cast<bool, __half>(__half x) { return __half2float(x) != 0.0f; }
template <> __device__ __forceinline__ bool cast<bool, __nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x) != 0.0f; }
template <> __device__ __forceinline__ bool cast<bool, float>(float x) { return x != 0.0f; }
template <> __device__ __forceinline__ bool cast<bool, double>(double x) { return x != 0.0; }

// f16 and bf16 compute in f32: widen() gives the type math is done in.
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ double widen(double x) { return x; }

// ---- math ---------------------------------------------------------------------------------
#define TX_UNARY(name, f32fn, f64fn)                                                          \
    __device__ __forceinline__ float name(float x) { return f32fn(x); }                       \
    __device__ __forceinline__ double name(double x) { return f64fn(x); }                     \
    __device__ __forceinline__ __half name(__half x) { return __float2half_rn(f32fn(__half2float(x))); } \
    __device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 x) { return __float2bfloat16_rn(f32fn(__bfloat162float(x))); }
TX_UNARY(exp, ::expf, ::exp)
TX_UNARY(exp2, ::exp2f, ::exp2)
TX_UNARY(log, ::logf, ::log)
TX_UNARY(log2, ::log2f, ::log2)
TX_UNARY(sqrt, ::sqrtf, ::sqrt)
TX_UNARY(rsqrt, ::rsqrtf, ::rsqrt)
TX_UNARY(sin, ::sinf, ::sin)
TX_UNARY(cos, ::cosf, ::cos)
TX_UNARY(tanh, ::tanhf, ::tanh)
TX_UNARY(erf, ::erff, ::erf)
TX_UNARY(floor, ::floorf, ::floor)
TX_UNARY(ceil, ::ceilf, ::ceil)
TX_UNARY(fabs_, ::fabsf, ::fabs)
#undef TX_UNARY

// fast_exp2: one MUFU.EX2, results below 2^-126 flushed to zero (exp2f keeps them, at the price
// of a compare and two predicated multiplies around the MUFU). f64 has no such instruction.
__device__ __forceinline__ float fast_exp2_f(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float fast_exp2(float x) { return fast_exp2_f(x); }
__device__ __forceinline__ double fast_exp2(double x) { return ::exp2(x); }
__device__ __forceinline__ __half fast_exp2(__half x) { return __float2half_rn(fast_exp2_f(__half2float(x))); }
__device__ __forceinline__ __nv_bfloat16 fast_exp2(__nv_bfloat16 x) { return __float2bfloat16_rn(fast_exp2_f(__bfloat162float(x))); }

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + ::expf(-x)); }
__device__ __forceinline__ double sigmoid_d(double x) { return 1.0 / (1.0 + ::exp(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return sigmoid_f(x); }
__device__ __forceinline__ double sigmoid(double x) { return sigmoid_d(x); }
__device__ __forceinline__ __half sigmoid(__half x) { return __float2half_rn(sigmoid_f(__half2float(x))); }
__device__ __forceinline__ __nv_bfloat16 sigmoid(__nv_bfloat16 x) { return __float2bfloat16_rn(sigmoid_f(__bfloat162float(x))); }

template <typename T> __device__ __forceinline__ T abs(T x) { return x < T(0) ? T(-x) : x; }
__device__ __forceinline__ float abs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double abs(double x) { return ::fabs(x); }
__device__ __forceinline__ __half abs(__half x) { return fabs_(x); }
__device__ __forceinline__ __nv_bfloat16 abs(__nv_bfloat16 x) { return fabs_(x); }
__device__ __forceinline__ bool abs(bool x) { return x; }
__device__ __forceinline__ unsigned int abs(unsigned int x) { return x; }
__device__ __forceinline__ unsigned long long abs(unsigned long long x) { return x; }

template <typename T> __device__ __forceinline__ T fma(T a, T b, T c) { return cast<T>(::fma(widen(a), widen(b), widen(c))); }
__device__ __forceinline__ float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
template <typename T> __device__ __forceinline__ T pow(T a, T b) { return cast<T>(::powf(widen(a), widen(b))); }
__device__ __forceinline__ double pow(double a, double b) { return ::pow(a, b); }
template <typename T> __device__ __forceinline__ T fmod(T a, T b) { return cast<T>(::fmodf(widen(a), widen(b))); }
__device__ __forceinline__ double fmod(double a, double b) { return ::fmod(a, b); }

// maximum_nan/minimum_nan (propagate_nan=ALL): a NaN operand yields NaN.
template <typename T> __device__ __forceinline__ T maximum_nan(T a, T b) { return a < b ? b : a; }
template <typename T> __device__ __forceinline__ T minimum_nan(T a, T b) { return b < a ? b : a; }
__device__ __forceinline__ float maximum_nan(float a, float b) { return (a != a || b != b) ? a + b : ::fmaxf(a, b); }
__device__ __forceinline__ float minimum_nan(float a, float b) { return (a != a || b != b) ? a + b : ::fminf(a, b); }
__device__ __forceinline__ double maximum_nan(double a, double b) { return (a != a || b != b) ? a + b : ::fmax(a, b); }
__device__ __forceinline__ double minimum_nan(double a, double b) { return (a != a || b != b) ? a + b : ::fmin(a, b); }
__device__ __forceinline__ __half maximum_nan(__half a, __half b) { return __hmax_nan(a, b); }
__device__ __forceinline__ __half minimum_nan(__half a, __half b) { return __hmin_nan(a, b); }
__device__ __forceinline__ __nv_bfloat16 maximum_nan(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmax_nan(a, b); }
__device__ __forceinline__ __nv_bfloat16 minimum_nan(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmin_nan(a, b); }

// maximum/minimum: for floats a NaN operand yields the other operand (fmax/fmin).
template <typename T> __device__ __forceinline__ T maximum(T a, T b) { return a < b ? b : a; }
template <typename T> __device__ __forceinline__ T minimum(T a, T b) { return b < a ? b : a; }
__device__ __forceinline__ float maximum(float a, float b) { return ::fmaxf(a, b); }
__device__ __forceinline__ float minimum(float a, float b) { return ::fminf(a, b); }
__device__ __forceinline__ double maximum(double a, double b) { return ::fmax(a, b); }
__device__ __forceinline__ double minimum(double a, double b) { return ::fmin(a, b); }
__device__ __forceinline__ __half maximum(__half a, __half b) { return __hmax(a, b); }
__device__ __forceinline__ __half minimum(__half a, __half b) { return __hmin(a, b); }
__device__ __forceinline__ __nv_bfloat16 maximum(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmax(a, b); }
__device__ __forceinline__ __nv_bfloat16 minimum(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmin(a, b); }

// ---- memory -------------------------------------------------------------------------------
// A group of VEC lanes whose addresses are p, p+1, ..., p+VEC-1 with p aligned to
// VEC * sizeof(T): one vector access when every lane is active, lane by lane otherwise.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec { T v[VEC]; };

// How an access reaches memory: Plain (C's dereference), or Hint<COP, EVICT> (a load's or
// store's cache modifier and L2 eviction priority, prelude/access.cuh).
struct Plain {
    template <typename T> __device__ __forceinline__ static T load(const T* p) { return *p; }
    template <typename T> __device__ __forceinline__ static void store(T* p, T v) { *p = v; }
};

template <int VEC, class H = Plain, typename T>
__device__ __forceinline__ void load_vec(T* dst, const T* p, const bool* mask, T other) {
    bool all = true;
#pragma unroll
    for (int j = 0; j < VEC; ++j) all = all && mask[j];
    if (all) {
        Vec<T, VEC> v = H::load(reinterpret_cast<const Vec<T, VEC>*>(p));
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst[j] = v.v[j];
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst[j] = mask[j] ? H::load(p + j) : other;
    }
}

// A vector access whose mask is one value over its VEC lanes (the lowering proved it): one
// test, a predicated 16-byte access, no lane-by-lane fallback.
template <int VEC, class H = Plain, typename T>
__device__ __forceinline__ void load_vec_if(T* dst, const T* p, bool mask, T other) {
    if (mask) {
        Vec<T, VEC> v = H::load(reinterpret_cast<const Vec<T, VEC>*>(p));
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst[j] = v.v[j];
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst[j] = other;
    }
}

template <int VEC, class H = Plain, typename T>
__device__ __forceinline__ void store_vec_if(T* p, const T* src, bool mask) {
    if (mask) {
        Vec<T, VEC> v;
#pragma unroll
        for (int j = 0; j < VEC; ++j) v.v[j] = src[j];
        H::store(reinterpret_cast<Vec<T, VEC>*>(p), v);
    }
}

template <int VEC, class H = Plain, typename T>
__device__ __forceinline__ void load_vec(T* dst, const T* p) {
    Vec<T, VEC> v = H::load(reinterpret_cast<const Vec<T, VEC>*>(p));
#pragma unroll
    for (int j = 0; j < VEC; ++j) dst[j] = v.v[j];
}

template <int VEC, class H = Plain, typename T>
__device__ __forceinline__ void store_vec(T* p, const T* src, const bool* mask) {
    bool all = true;
#pragma unroll
    for (int j = 0; j < VEC; ++j) all = all && mask[j];
    if (all) {
        Vec<T, VEC> v;
#pragma unroll
        for (int j = 0; j < VEC; ++j) v.v[j] = src[j];
        H::store(reinterpret_cast<Vec<T, VEC>*>(p), v);
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
            if (mask[j]) H::store(p + j, src[j]);
    }
}

template <int VEC, class H = Plain, typename T>
__device__ __forceinline__ void store_vec(T* p, const T* src) {
    Vec<T, VEC> v;
#pragma unroll
    for (int j = 0; j < VEC; ++j) v.v[j] = src[j];
    H::store(reinterpret_cast<Vec<T, VEC>*>(p), v);
}

// ---- atomics --------------------------------------------------------------------------------
// Each function updates one address and returns its old value. The read-modify-write itself is
// device-scope and relaxed; the memory order and scope of an atomic op are fences around the
// tile's accesses (fence_before / fence_after), so ACQ_REL, the default, orders the tile's
// atomics after earlier writes and before later reads. Float max/min, 16-bit exchange and all
// compare-and-swap of floats go through a compare-and-swap loop on the bits.
enum { RELAXED = 0, ACQUIRE = 1, RELEASE = 2, ACQ_REL = 3, SCOPE_CTA = 10, SCOPE_GPU = 11, SCOPE_SYS = 12 };

template <int SCOPE> __device__ __forceinline__ void fence() {
    if constexpr (SCOPE == SCOPE_CTA) __threadfence_block();
    else if constexpr (SCOPE == SCOPE_GPU) __threadfence();
    else __threadfence_system();
}
template <int ORDER, int SCOPE> __device__ __forceinline__ void fence_before() {
    if constexpr (ORDER == RELEASE || ORDER == ACQ_REL) fence<SCOPE>();
}
template <int ORDER, int SCOPE> __device__ __forceinline__ void fence_after() {
    if constexpr (ORDER == ACQUIRE || ORDER == ACQ_REL) fence<SCOPE>();
}

template <int BYTES> struct Bits;
template <> struct Bits<2> { using type = unsigned short; };
template <> struct Bits<4> { using type = unsigned int; };
template <> struct Bits<8> { using type = unsigned long long; };
template <typename To, typename From> __device__ __forceinline__ To bit_cast(From x) {
    To y;
    memcpy(&y, &x, sizeof(To));
    return y;
}

// *p = f(*p), atomically, by compare-and-swap on the bits; returns the old value.
template <typename T, typename F> __device__ __forceinline__ T atomic_update(T* p, F f) {
    using U = typename Bits<sizeof(T)>::type;
    U* q = reinterpret_cast<U*>(p);
    U old = *q, assumed;
    do {
        assumed = old;
        old = atomicCAS(q, assumed, bit_cast<U>(f(bit_cast<T>(assumed))));
    } while (old != assumed);
    return bit_cast<T>(old);
}

template <typename T> __device__ __forceinline__ T atomic_add(T* p, T v) { return atomicAdd(p, v); }
__device__ __forceinline__ long long atomic_add(long long* p, long long v) {
    return (long long)atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}
template <typename T> __device__ __forceinline__ T atomic_max(T* p, T v) { return atomicMax(p, v); }
template <typename T> __device__ __forceinline__ T atomic_min(T* p, T v) { return atomicMin(p, v); }
#define TX_FLOAT_MINMAX(T)                                                                      \
    __device__ __forceinline__ T atomic_max(T* p, T v) { return atomic_update(p, [v](T x) { return maximum(x, v); }); } \
    __device__ __forceinline__ T atomic_min(T* p, T v) { return atomic_update(p, [v](T x) { return minimum(x, v); }); }
TX_FLOAT_MINMAX(float)
TX_FLOAT_MINMAX(double)
TX_FLOAT_MINMAX(__half)
TX_FLOAT_MINMAX(__nv_bfloat16)
#undef TX_FLOAT_MINMAX
template <typename T> __device__ __forceinline__ T atomic_and(T* p, T v) { return atomicAnd(p, v); }
template <typename T> __device__ __forceinline__ T atomic_or(T* p, T v) { return atomicOr(p, v); }
template <typename T> __device__ __forceinline__ T atomic_xor(T* p, T v) { return atomicXor(p, v); }
#define TX_SIGNED64(name, intrinsic)                                                            \
    __device__ __forceinline__ long long name(long long* p, long long v) {                      \
        return (long long)intrinsic(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v); \
    }
TX_SIGNED64(atomic_and, atomicAnd)
TX_SIGNED64(atomic_or, atomicOr)
TX_SIGNED64(atomic_xor, atomicXor)
#undef TX_SIGNED64
template <typename T> __device__ __forceinline__ T atomic_xchg(T* p, T v) {
    return atomic_update(p, [v](T) { return v; });
}
__device__ __forceinline__ int atomic_xchg(int* p, int v) { return atomicExch(p, v); }
__device__ __forceinline__ unsigned atomic_xchg(unsigned* p, unsigned v) { return atomicExch(p, v); }
__device__ __forceinline__ float atomic_xchg(float* p, float v) { return atomicExch(p, v); }
template <typename T> __device__ __forceinline__ T atomic_cas(T* p, T cmp, T v) {
    using U = typename Bits<sizeof(T)>::type;
    return bit_cast<T>(atomicCAS(reinterpret_cast<U*>(p), bit_cast<U>(cmp), bit_cast<U>(v)));
}

// ---- the scratch buffer and how the helpers below synchronise over it ---------------------
// The helpers that share data between warps through shared memory take the scratch buffer as
// `smem`: a pointer (every thread of the block meets at __syncthreads), or Threads<N> around
// it in a warp-specialised kernel (lower/passes/warp_spec.py), where only the first N threads
// (the compute warps) run the kernel's statements while a producer warpgroup issues the pipeline's
// copies: they meet at named barrier 1 of N threads, which the producer never joins
// (__syncthreads would wait for it).
template <int N>
struct Threads {
    void* ptr;
};
__device__ __forceinline__ void* scratch(void* smem) { return smem; }
template <int N>
__device__ __forceinline__ void* scratch(Threads<N> smem) { return smem.ptr; }
__device__ __forceinline__ void sync(void*) { __syncthreads(); }
template <int N>
__device__ __forceinline__ void sync(Threads<N>) {
    asm volatile("bar.sync 1, %0;\n" ::"n"(N) : "memory");
}

// A scalar atomic runs once per program (thread 0); every thread receives the old value.
template <typename T, typename F, typename S> __device__ __forceinline__ T once(F f, S smem) {
    T* slot = static_cast<T*>(scratch(smem));
    sync(smem);
    if (threadIdx.x == 0) *slot = f();
    sync(smem);
    T old = *slot;
    sync(smem);
    return old;
}

// ---- reductions ---------------------------------------------------------------------------
// A value with its index, for argmax/argmin: ties keep the lower index.
template <typename T>
struct ValueIndex {
    T value;
    int index;
};

template <typename T> __device__ __forceinline__ T shfl_xor(T x, int mask) { return __shfl_xor_sync(0xffffffffu, x, mask); }
__device__ __forceinline__ bool shfl_xor(bool x, int mask) { return __shfl_xor_sync(0xffffffffu, int(x), mask) != 0; }
template <typename T>
__device__ __forceinline__ ValueIndex<T> shfl_xor(ValueIndex<T> x, int mask) {
    return {shfl_xor(x.value, mask), __shfl_xor_sync(0xffffffffu, x.index, mask)};
}
template <typename T> __device__ __forceinline__ T shfl_up(T x, int delta) { return __shfl_up_sync(0xffffffffu, x, delta); }
template <typename T> __device__ __forceinline__ T shfl_idx(T x, int lane) { return __shfl_sync(0xffffffffu, x, lane); }

// The values of a multi-operand reduction or scan (reduce((x, i), 0, combine)): a struct of
// fields v0, v1, ... that the combiner takes and returns whole; shuffles move it field by field.
template <class A, class B> struct Tuple2 { A v0; B v1; };
template <class A, class B, class C> struct Tuple3 { A v0; B v1; C v2; };
template <class A, class B, class C, class D> struct Tuple4 { A v0; B v1; C v2; D v3; };
#define TX_TUPLE_SHUFFLE(name, arg)                                                              \
    template <class A, class B> __device__ __forceinline__ Tuple2<A, B> name(Tuple2<A, B> x, int arg) { \
        return {name(x.v0, arg), name(x.v1, arg)};                                               \
    }                                                                                            \
    template <class A, class B, class C>                                                         \
    __device__ __forceinline__ Tuple3<A, B, C> name(Tuple3<A, B, C> x, int arg) {                \
        return {name(x.v0, arg), name(x.v1, arg), name(x.v2, arg)};                              \
    }                                                                                            \
    template <class A, class B, class C, class D>                                                \
    __device__ __forceinline__ Tuple4<A, B, C, D> name(Tuple4<A, B, C, D> x, int arg) {          \
        return {name(x.v0, arg), name(x.v1, arg), name(x.v2, arg), name(x.v3, arg)};             \
    }
TX_TUPLE_SHUFFLE(shfl_xor, mask)
TX_TUPLE_SHUFFLE(shfl_up, delta)
TX_TUPLE_SHUFFLE(shfl_idx, lane)
#undef TX_TUPLE_SHUFFLE

// Reduce `in` (layout LI) along dimension D into `out` (layout LO: LI with D of size 1):
// registers in order, then lanes (butterfly shuffles, every lane gets the result), then warps
// through `smem` (every thread reads every warp's partial, in warp order). Only distinct copies
// are combined: threads that hold wrapped duplicates along D are left out of the count.
template <class LI, class LO, int D, typename T, typename F, typename S>
__device__ __forceinline__ void reduce(T* out, const T* in, F combine, S smem) {
#pragma unroll
    for (int r = 0; r < LI::REGS; ++r) {
        int o = remap<LO, LI>(r);
        out[o] = LI::reg_coord(r, D) == 0 ? in[r] : combine(out[o], in[r]);
    }
    // distinct threads along D: a tile narrower than one repetition wraps onto copies
    constexpr int spt = LI::spt(D);
    constexpr int held = LI::size(D) / spt < 1 ? 1 : LI::size(D) / spt;
    constexpr int lanes = LI::lanes(D) < held ? LI::lanes(D) : held;
    constexpr int lane_stride = LI::lane_stride(D);
#pragma unroll
    for (int offset = 1; offset < lanes; offset *= 2) {
#pragma unroll
        for (int o = 0; o < LO::REGS; ++o) out[o] = combine(out[o], shfl_xor(out[o], offset * lane_stride));
    }
    constexpr int held_by_warps = held / LI::lanes(D) < 1 ? 1 : held / LI::lanes(D);
    constexpr int warps = LI::warps(D) < held_by_warps ? LI::warps(D) : held_by_warps;
    if constexpr (warps > 1) {
        T* partial = static_cast<T*>(scratch(smem));
        constexpr int n = LO::SIZE;
        if (LI::lane_coord(D) == 0 && LI::warp_coord(D) < warps) {
#pragma unroll
            for (int o = 0; o < LO::REGS; ++o) partial[LI::warp_coord(D) * n + LO::flat(o)] = out[o];
        }
        sync(smem);
#pragma unroll
        for (int o = 0; o < LO::REGS; ++o) {
            T acc = partial[LO::flat(o)];
#pragma unroll
            for (int w = 1; w < warps; ++w) acc = combine(acc, partial[w * n + LO::flat(o)]);
            out[o] = acc;
        }
        sync(smem);
    }
}

// Inclusive scan of `in` along dimension D (layout L; LO is L with D of size 1), left to right:
// within each thread's contiguous run, then across lanes (shuffles up), then across warps
// through `smem`, then across the repetitions of the layout, each element combined with the
// running prefix in coordinate order. Only distinct copies count, as in reduce().
template <class L, class LO, int D, typename T, typename F, typename S>
__device__ __forceinline__ void scan(T* out, const T* in, F combine, S smem) {
    constexpr int run = L::spt(D) < L::size(D) ? L::spt(D) : L::size(D);
    constexpr int reps = L::regs(D) / run;
    constexpr int stride = L::reg_stride(D);
    constexpr int held = L::size(D) / L::spt(D) < 1 ? 1 : L::size(D) / L::spt(D);
    constexpr int lanes = L::lanes(D) < held ? L::lanes(D) : held;
    constexpr int held_by_warps = held / L::lanes(D) < 1 ? 1 : held / L::lanes(D);
    constexpr int warps = L::warps(D) < held_by_warps ? L::warps(D) : held_by_warps;
    constexpr int lane_stride = L::lane_stride(D);
#pragma unroll
    for (int r = 0; r < L::REGS; ++r)
        out[r] = L::reg_coord(r, D) % run == 0 ? in[r] : combine(out[r - stride], in[r]);
    const int lane = L::lane_coord(D) % lanes;
    const int warp = L::warp_coord(D) % warps;
    T carry[LO::REGS];
#pragma unroll
    for (int rep = 0; rep < reps; ++rep) {
        // this thread's run total for each line, its inclusive scan across lanes
        T total[LO::REGS], inclusive[LO::REGS];
#pragma unroll
        for (int r = 0; r < L::REGS; ++r)
            if (L::reg_coord(r, D) == rep * run + run - 1) total[remap<LO, L>(r)] = out[r];
#pragma unroll
        for (int o = 0; o < LO::REGS; ++o) inclusive[o] = total[o];
#pragma unroll
        for (int offset = 1; offset < lanes; offset *= 2) {
#pragma unroll
            for (int o = 0; o < LO::REGS; ++o) {
                T up = shfl_up(inclusive[o], offset * lane_stride);
                if (lane >= offset) inclusive[o] = combine(up, inclusive[o]);
            }
        }
        // the exclusive prefix from the lanes before this one
        T before[LO::REGS], rep_total[LO::REGS];
#pragma unroll
        for (int o = 0; o < LO::REGS; ++o) {
            before[o] = shfl_up(inclusive[o], lane_stride);
            rep_total[o] = shfl_idx(inclusive[o],
                                       int(threadIdx.x) % 32 + (lanes - 1 - lane) * lane_stride);
        }
        bool has_lane_prefix = lane > 0, has_warp_prefix = false;
        T warp_prefix[LO::REGS];
        if constexpr (warps > 1) {
            T* partial = static_cast<T*>(scratch(smem));
            constexpr int n = LO::SIZE;
            if (lane == lanes - 1 && L::warp_coord(D) < warps) {
#pragma unroll
                for (int o = 0; o < LO::REGS; ++o) partial[L::warp_coord(D) * n + LO::flat(o)] = inclusive[o];
            }
            sync(smem);
#pragma unroll
            for (int o = 0; o < LO::REGS; ++o) {
                T acc = partial[LO::flat(o)];
                for (int w = 1; w < warps; ++w) {
                    if (w == warp) warp_prefix[o] = acc;
                    acc = combine(acc, partial[w * n + LO::flat(o)]);
                }
                rep_total[o] = acc;
            }
            has_warp_prefix = warp > 0;
            sync(smem);
        }
#pragma unroll
        for (int r = 0; r < L::REGS; ++r) {
            if (L::reg_coord(r, D) / run != rep) continue;
            int o = remap<LO, L>(r);
            T value = out[r];
            if (has_lane_prefix) value = combine(before[o], value);
            if (has_warp_prefix) value = combine(warp_prefix[o], value);
            if (rep > 0) value = combine(carry[o], value);
            out[r] = value;
        }
#pragma unroll
        for (int o = 0; o < LO::REGS; ++o) carry[o] = rep > 0 ? combine(carry[o], rep_total[o]) : rep_total[o];
    }
}

// Move a tile between layouts (or shapes) through shared memory: every original element is
// written at its row-major index in the source, then each destination register reads the source
// index `source(r)` gives it.
template <class LS, class LD, typename T, typename S, typename Index>
__device__ __forceinline__ void relayout(T* dst, const T* src, S smem, Index source) {
    T* buffer = static_cast<T*>(scratch(smem));
    if (LS::owner()) {
#pragma unroll
        for (int r = 0; r < LS::REGS; ++r) buffer[LS::flat(r)] = src[r];
    }
    sync(smem);
#pragma unroll
    for (int r = 0; r < LD::REGS; ++r) dst[r] = buffer[source(r)];
    sync(smem);
}

// Two tiles into one through shared memory (cat, join): each source element is written at the
// row-major index of the result that `index_a(r)` / `index_b(r)` gives its register r, then each
// result register reads its own element.
template <class LA, class LB, class LD, typename T, typename S, typename IA, typename IB>
__device__ __forceinline__ void gather2(T* dst, const T* a, const T* b, S smem, IA index_a, IB index_b) {
    T* buffer = static_cast<T*>(scratch(smem));
    if (LA::owner()) {
#pragma unroll
        for (int r = 0; r < LA::REGS; ++r) buffer[index_a(r)] = a[r];
    }
    if (LB::owner()) {
#pragma unroll
        for (int r = 0; r < LB::REGS; ++r) buffer[index_b(r)] = b[r];
    }
    sync(smem);
#pragma unroll
    for (int r = 0; r < LD::REGS; ++r) dst[r] = buffer[LD::flat(r)];
    sync(smem);
}

}  // namespace tx
#include "random.cuh"
#include "access.cuh"
#include "libdevice.cuh"
#include "mma.cuh"
