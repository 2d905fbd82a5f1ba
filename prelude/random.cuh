// teeny_tx device header: counter-based random numbers (Philox4x32-10), included by teeny_tx.cuh.
//
// Philox4x32-10 is the block cipher of Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
// as easy as 1, 2, 3" (SC'11), with Random123's multipliers, key increments and round order; it
// reproduces Random123's known-answer vectors (tests/test_random.py checks the NumPy twin of
// this code against them). The language's ops map a seed and an offset to one cipher call:
//   key     k0 = low 32 bits of (u64)seed, k1 = high 32 bits
//   counter c0 = low 32 bits of (u64)offset, c1 = high 32 bits, c2 = c3 = 0
// For 0 <= offset < 2^32 this is Triton's tl.randint4x counter and key. The NumPy
// implementation (teeny_tx/lower/ops/random.py) computes the same bits: rand, randint and
// randint4x are bit-identical on both backends; randn agrees to a few ulp (logf, cosf).
#pragma once

namespace tx {

// ---- the cipher ---------------------------------------------------------------------------
__device__ __forceinline__ uint4 philox4x32_10(unsigned int c0, unsigned int c1, unsigned int c2,
                                               unsigned int c3, unsigned int k0, unsigned int k1) {
    constexpr unsigned int M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;  // round multipliers
    constexpr unsigned int W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;  // key increments (Weyl sequence)
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += W0;
            k1 += W1;
        }
        const unsigned int hi0 = __umulhi(M0, c0), lo0 = M0 * c0;
        const unsigned int hi1 = __umulhi(M1, c2), lo1 = M1 * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    return make_uint4(c0, c1, c2, c3);
}

// The four words for one lane: seed is the key, offset the counter (see the top of the file).
__device__ __forceinline__ uint4 philox(unsigned long long seed, unsigned long long offset) {
    return philox4x32_10(unsigned(offset), unsigned(offset >> 32), 0u, 0u, unsigned(seed),
                         unsigned(seed >> 32));
}

// ---- conversions --------------------------------------------------------------------------
// A word to a uniform f32: its top 24 bits times 2^-24, exact. Values k * 2^-24, k = 0..2^24-1,
// all equally likely: in [0, 1), never 1.
__device__ __forceinline__ float uniform(unsigned int x) {
    return float(x >> 8) * 5.9604644775390625e-8f;
}

// The same, reflected into (0, 1]: 1 - uniform(x), exact; never 0, so its log is finite.
__device__ __forceinline__ float uniform_open0(unsigned int x) {
    return float(16777216u - (x >> 8)) * 5.9604644775390625e-8f;
}

// Box-Muller, first output: sqrt(-2 log u1) * cos(2 pi u2), in f32 throughout (2 pi rounded to
// f32). |result| <= sqrt(48 log 2) ~ 5.77.
__device__ __forceinline__ float box_muller(unsigned int x0, unsigned int x1) {
    const float r = ::sqrtf(-2.0f * ::logf(uniform_open0(x0)));
    const float theta = 6.28318548f * uniform(x1);
    return r * ::cosf(theta);
}

// ---- the language's operations ------------------------------------------------------------
__device__ __forceinline__ float rand(unsigned long long seed, unsigned long long offset) {
    return uniform(philox(seed, offset).x);
}

__device__ __forceinline__ float randn(unsigned long long seed, unsigned long long offset) {
    const uint4 w = philox(seed, offset);
    return box_muller(w.x, w.y);
}

__device__ __forceinline__ unsigned int randint(unsigned long long seed, unsigned long long offset) {
    return philox(seed, offset).x;
}

template <int K>
__device__ __forceinline__ unsigned int randint4x(unsigned long long seed, unsigned long long offset) {
    static_assert(0 <= K && K < 4, "randint4x: k is 0, 1, 2 or 3");
    const uint4 w = philox(seed, offset);
    return K == 0 ? w.x : K == 1 ? w.y : K == 2 ? w.z : w.w;
}

}  // namespace tx
