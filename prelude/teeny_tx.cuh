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
// Blocked1D<N, SPT, THREADS>: a tile of N elements; each thread holds SPT contiguous elements
// per repetition, the block's THREADS threads cover SPT * THREADS elements, repeated to cover
// N. When N is smaller than one repetition, threads wrap around and hold copies (owner() says
// which copy writes).
template <int N, int SPT, int THREADS>
struct Blocked1D {
    static constexpr int TILE = SPT * THREADS;
    static constexpr int REGS = N >= TILE ? SPT * (N / TILE) : (SPT < N ? SPT : N);
    static constexpr int WRAP = N >= TILE ? TILE : N;
    __device__ __forceinline__ static int coord(int r) {
        return (r / SPT) * TILE + (int(threadIdx.x) * SPT) % WRAP + r % SPT;
    }
    __device__ __forceinline__ static bool owner() {
        return N >= TILE || int(threadIdx.x) * SPT < N;
    }
};

// ---- conversions --------------------------------------------------------------------------
template <typename To, typename From>
__device__ __forceinline__ To cast(From x) { return static_cast<To>(x); }
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

template <int VEC, typename T>
__device__ __forceinline__ void load_vec(T* dst, const T* p, const bool* mask, T other) {
    bool all = true;
#pragma unroll
    for (int j = 0; j < VEC; ++j) all = all && mask[j];
    if (all) {
        Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(p);
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst[j] = v.v[j];
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst[j] = mask[j] ? p[j] : other;
    }
}

template <int VEC, typename T>
__device__ __forceinline__ void load_vec(T* dst, const T* p) {
    Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(p);
#pragma unroll
    for (int j = 0; j < VEC; ++j) dst[j] = v.v[j];
}

template <int VEC, typename T>
__device__ __forceinline__ void store_vec(T* p, const T* src, const bool* mask) {
    bool all = true;
#pragma unroll
    for (int j = 0; j < VEC; ++j) all = all && mask[j];
    if (all) {
        Vec<T, VEC> v;
#pragma unroll
        for (int j = 0; j < VEC; ++j) v.v[j] = src[j];
        *reinterpret_cast<Vec<T, VEC>*>(p) = v;
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
            if (mask[j]) p[j] = src[j];
    }
}

template <int VEC, typename T>
__device__ __forceinline__ void store_vec(T* p, const T* src) {
    Vec<T, VEC> v;
#pragma unroll
    for (int j = 0; j < VEC; ++j) v.v[j] = src[j];
    *reinterpret_cast<Vec<T, VEC>*>(p) = v;
}

}  // namespace tx
