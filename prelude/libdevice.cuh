// teeny_tx device header: CUDA's libdevice math functions (included by teeny_tx.cuh).
//
// One overload set per operation of prelude/libdevice.h, so generated code spells each one way
// for every dtype: f32 and f64 call CUDA's function of that type; f16 and bf16 compute in f32
// and round once. The interpreter's twins are in teeny_tx/lower/ops/libdevice.py.
#pragma once

namespace tx {

#define TX_MATH1(name, f32fn, f64fn)                                                          \
    __device__ __forceinline__ float name(float x) { return f32fn(x); }                       \
    __device__ __forceinline__ double name(double x) { return f64fn(x); }                     \
    __device__ __forceinline__ __half name(__half x) { return __float2half_rn(f32fn(__half2float(x))); } \
    __device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 x) { return __float2bfloat16_rn(f32fn(__bfloat162float(x))); }
TX_MATH1(tan, ::tanf, ::tan)
TX_MATH1(asin, ::asinf, ::asin)
TX_MATH1(acos, ::acosf, ::acos)
TX_MATH1(atan, ::atanf, ::atan)
TX_MATH1(sinpi, ::sinpif, ::sinpi)
TX_MATH1(cospi, ::cospif, ::cospi)
TX_MATH1(sinh, ::sinhf, ::sinh)
TX_MATH1(cosh, ::coshf, ::cosh)
TX_MATH1(asinh, ::asinhf, ::asinh)
TX_MATH1(acosh, ::acoshf, ::acosh)
TX_MATH1(atanh, ::atanhf, ::atanh)
TX_MATH1(exp10, ::exp10f, ::exp10)
TX_MATH1(expm1, ::expm1f, ::expm1)
TX_MATH1(log10, ::log10f, ::log10)
TX_MATH1(log1p, ::log1pf, ::log1p)
TX_MATH1(cbrt, ::cbrtf, ::cbrt)
TX_MATH1(rcbrt, ::rcbrtf, ::rcbrt)
TX_MATH1(erfc, ::erfcf, ::erfc)
TX_MATH1(erfinv, ::erfinvf, ::erfinv)
TX_MATH1(erfcinv, ::erfcinvf, ::erfcinv)
TX_MATH1(erfcx, ::erfcxf, ::erfcx)
TX_MATH1(normcdf, ::normcdff, ::normcdf)
TX_MATH1(normcdfinv, ::normcdfinvf, ::normcdfinv)
TX_MATH1(lgamma, ::lgammaf, ::lgamma)
TX_MATH1(tgamma, ::tgammaf, ::tgamma)
TX_MATH1(j0, ::j0f, ::j0)
TX_MATH1(j1, ::j1f, ::j1)
TX_MATH1(cyl_bessel_i0, ::cyl_bessel_i0f, ::cyl_bessel_i0)
TX_MATH1(cyl_bessel_i1, ::cyl_bessel_i1f, ::cyl_bessel_i1)
TX_MATH1(trunc, ::truncf, ::trunc)
TX_MATH1(round, ::roundf, ::round)
TX_MATH1(rint, ::rintf, ::rint)
TX_MATH1(nearbyint, ::nearbyintf, ::nearbyint)
TX_MATH1(logb, ::logbf, ::logb)
#undef TX_MATH1

#define TX_MATH2(name, f32fn, f64fn)                                                          \
    __device__ __forceinline__ float name(float x, float y) { return f32fn(x, y); }           \
    __device__ __forceinline__ double name(double x, double y) { return f64fn(x, y); }        \
    __device__ __forceinline__ __half name(__half x, __half y) { return __float2half_rn(f32fn(__half2float(x), __half2float(y))); } \
    __device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 x, __nv_bfloat16 y) { return __float2bfloat16_rn(f32fn(__bfloat162float(x), __bfloat162float(y))); }
TX_MATH2(atan2, ::atan2f, ::atan2)
TX_MATH2(hypot, ::hypotf, ::hypot)
TX_MATH2(rhypot, ::rhypotf, ::rhypot)
TX_MATH2(remainder, ::remainderf, ::remainder)
TX_MATH2(copysign, ::copysignf, ::copysign)
TX_MATH2(fdim, ::fdimf, ::fdim)
#undef TX_MATH2

// nextafter steps in its own type: f32 and f64 only (the language refuses 16-bit operands)
__device__ __forceinline__ float nextafter(float x, float y) { return ::nextafterf(x, y); }
__device__ __forceinline__ double nextafter(double x, double y) { return ::nextafter(x, y); }

// x * 2^n: exact but where the result is subnormal or overflows (f16/bf16: in f32, rounded once)
#define TX_SCALE(name, f32fn, f64fn)                                                          \
    __device__ __forceinline__ float name(float x, int n) { return f32fn(x, n); }             \
    __device__ __forceinline__ double name(double x, int n) { return f64fn(x, n); }           \
    __device__ __forceinline__ __half name(__half x, int n) { return __float2half_rn(f32fn(__half2float(x), n)); } \
    __device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 x, int n) { return __float2bfloat16_rn(f32fn(__bfloat162float(x), n)); }
TX_SCALE(ldexp, ::ldexpf, ::ldexp)
TX_SCALE(scalbn, ::scalbnf, ::scalbn)
#undef TX_SCALE

template <typename T> __device__ __forceinline__ T norm3d(T a, T b, T c) { return cast<T>(::norm3df(widen(a), widen(b), widen(c))); }
template <typename T> __device__ __forceinline__ T rnorm3d(T a, T b, T c) { return cast<T>(::rnorm3df(widen(a), widen(b), widen(c))); }
template <typename T> __device__ __forceinline__ T norm4d(T a, T b, T c, T d) { return cast<T>(::norm4df(widen(a), widen(b), widen(c), widen(d))); }
template <typename T> __device__ __forceinline__ T rnorm4d(T a, T b, T c, T d) { return cast<T>(::rnorm4df(widen(a), widen(b), widen(c), widen(d))); }
__device__ __forceinline__ double norm3d(double a, double b, double c) { return ::norm3d(a, b, c); }
__device__ __forceinline__ double rnorm3d(double a, double b, double c) { return ::rnorm3d(a, b, c); }
__device__ __forceinline__ double norm4d(double a, double b, double c, double d) { return ::norm4d(a, b, c, d); }
__device__ __forceinline__ double rnorm4d(double a, double b, double c, double d) { return ::rnorm4d(a, b, c, d); }

// predicates and the integer results of floats: computed on the f32 (or f64) value, exact
template <typename T> __device__ __forceinline__ bool isnan(T x) { return ::isnan(widen(x)); }
template <typename T> __device__ __forceinline__ bool isinf(T x) { return ::isinf(widen(x)); }
template <typename T> __device__ __forceinline__ bool isfinite(T x) { return ::isfinite(widen(x)); }
template <typename T> __device__ __forceinline__ bool signbit(T x) { return ::signbit(widen(x)); }
template <typename T> __device__ __forceinline__ int ilogb(T x) { return ::ilogbf(widen(x)); }
__device__ __forceinline__ int ilogb(double x) { return ::ilogb(x); }
template <typename T> __device__ __forceinline__ long long llrint(T x) { return ::llrintf(widen(x)); }
__device__ __forceinline__ long long llrint(double x) { return ::llrint(x); }
template <typename T> __device__ __forceinline__ long long llround(T x) { return ::llroundf(widen(x)); }
__device__ __forceinline__ long long llround(double x) { return ::llround(x); }

// integer bits, 32- and 64-bit
__device__ __forceinline__ int popc(unsigned int x) { return __popc(x); }
__device__ __forceinline__ int popc(int x) { return __popc(unsigned(x)); }
__device__ __forceinline__ int popc(unsigned long long x) { return __popcll(x); }
__device__ __forceinline__ int popc(long long x) { return __popcll((unsigned long long)x); }
__device__ __forceinline__ int clz(unsigned int x) { return __clz(int(x)); }
__device__ __forceinline__ int clz(int x) { return __clz(x); }
__device__ __forceinline__ int clz(unsigned long long x) { return __clzll((long long)x); }
__device__ __forceinline__ int clz(long long x) { return __clzll(x); }
__device__ __forceinline__ int ffs(unsigned int x) { return __ffs(int(x)); }
__device__ __forceinline__ int ffs(int x) { return __ffs(x); }
__device__ __forceinline__ int ffs(unsigned long long x) { return __ffsll((long long)x); }
__device__ __forceinline__ int ffs(long long x) { return __ffsll(x); }
__device__ __forceinline__ unsigned int brev(unsigned int x) { return __brev(x); }
__device__ __forceinline__ int brev(int x) { return int(__brev(unsigned(x))); }
__device__ __forceinline__ unsigned long long brev(unsigned long long x) { return __brevll(x); }
__device__ __forceinline__ long long brev(long long x) { return (long long)__brevll((unsigned long long)x); }
__device__ __forceinline__ unsigned int umulhi(unsigned int x, unsigned int y) { return __umulhi(x, y); }
__device__ __forceinline__ int umulhi(int x, int y) { return int(__umulhi(unsigned(x), unsigned(y))); }
__device__ __forceinline__ unsigned long long umulhi(unsigned long long x, unsigned long long y) { return __umul64hi(x, y); }
__device__ __forceinline__ long long umulhi(long long x, long long y) { return (long long)__umul64hi((unsigned long long)x, (unsigned long long)y); }

}  // namespace tx
