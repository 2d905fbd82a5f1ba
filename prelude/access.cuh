// teeny_tx device header: cache modifiers and L2 eviction priorities of loads and stores
// (included by teeny_tx.cuh; Triton's cache_modifier= and eviction_policy=).
//
// Hint<COP, EVICT> is the access policy of a hinted load or store (teeny_tx.cuh's load_vec and
// store_vec take it, the generated code calls it by lane): PTX's ld.global / st.global with the
// cache operator COP (.ca, .cg, .cs, .lu, .cv; .wb, .cg, .cs, .wt) and, for EVICT, an L2 cache
// policy made by createpolicy (L2::evict_first, L2::evict_last) on .L2::cache_hint, of 1 to
// 16 bytes moved as b8/b16/b32/b64 or v4.b32. The asm is volatile with a memory clobber: it keeps
// its place among the thread's other accesses, as a dereference does.
#pragma once

namespace tx {

enum {
    CACHE_CA = 30, CACHE_CG = 31, CACHE_CS = 32, CACHE_LU = 33, CACHE_CV = 34, CACHE_WB = 35,
    CACHE_WT = 36, EVICT_NORMAL = 40, EVICT_FIRST = 41, EVICT_LAST = 42
};

template <int EVICT> __device__ __forceinline__ unsigned long long l2_policy() {
    unsigned long long policy;
    if constexpr (EVICT == EVICT_FIRST)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    else if constexpr (EVICT == EVICT_LAST)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

// one access of `ty` with cache operator `cop` (a string: "" or ".cg"...), with or without the
// L2 policy of EVICT
#define TX_LD(cop, ty, c)                                                                        \
    if constexpr (EVICT == 0)                                                                    \
        asm volatile("ld.global" cop "." ty " %0, [%1];" : "=" c(v) : "l"(p) : "memory");        \
    else                                                                                         \
        asm volatile("ld.global" cop ".L2::cache_hint." ty " %0, [%1], %2;"                      \
                     : "=" c(v) : "l"(p), "l"(l2_policy<EVICT>()) : "memory");
#define TX_LD4(cop)                                                                              \
    if constexpr (EVICT == 0)                                                                    \
        asm volatile("ld.global" cop ".v4.b32 {%0, %1, %2, %3}, [%4];"                           \
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");          \
    else                                                                                         \
        asm volatile("ld.global" cop ".L2::cache_hint.v4.b32 {%0, %1, %2, %3}, [%4], %5;"       \
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                                \
                     : "l"(p), "l"(l2_policy<EVICT>()) : "memory");
#define TX_ST(cop, ty, c)                                                                        \
    if constexpr (EVICT == 0)                                                                    \
        asm volatile("st.global" cop "." ty " [%0], %1;" ::"l"(p), c(v) : "memory");             \
    else                                                                                         \
        asm volatile("st.global" cop ".L2::cache_hint." ty " [%0], %1, %2;"                      \
                     ::"l"(p), c(v), "l"(l2_policy<EVICT>()) : "memory");
#define TX_ST4(cop)                                                                              \
    if constexpr (EVICT == 0)                                                                    \
        asm volatile("st.global" cop ".v4.b32 [%0], {%1, %2, %3, %4};"                           \
                     ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");               \
    else                                                                                         \
        asm volatile("st.global" cop ".L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;"       \
                     ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(l2_policy<EVICT>())   \
                     : "memory");
// every cache operator of a load (of a store), dispatched on COP at compile time
#define TX_LOAD_COPS(M, ...)                                                                     \
    if constexpr (COP == CACHE_CA) { M(".ca" __VA_ARGS__) }                                      \
    else if constexpr (COP == CACHE_CG) { M(".cg" __VA_ARGS__) }                                 \
    else if constexpr (COP == CACHE_CS) { M(".cs" __VA_ARGS__) }                                 \
    else if constexpr (COP == CACHE_LU) { M(".lu" __VA_ARGS__) }                                 \
    else if constexpr (COP == CACHE_CV) { M(".cv" __VA_ARGS__) }                                 \
    else { M("" __VA_ARGS__) }
#define TX_STORE_COPS(M, ...)                                                                    \
    if constexpr (COP == CACHE_WB) { M(".wb" __VA_ARGS__) }                                      \
    else if constexpr (COP == CACHE_CG) { M(".cg" __VA_ARGS__) }                                 \
    else if constexpr (COP == CACHE_CS) { M(".cs" __VA_ARGS__) }                                 \
    else if constexpr (COP == CACHE_WT) { M(".wt" __VA_ARGS__) }                                 \
    else { M("" __VA_ARGS__) }

template <int COP, int EVICT>
struct Hint {
    template <typename T> __device__ __forceinline__ static T load(const T* p) {
        static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 ||
                          sizeof(T) == 16, "an access of 1 to 16 bytes");
        T out;
        if constexpr (sizeof(T) == 1) {
            unsigned short v;
            TX_LOAD_COPS(TX_LD, , "u8", "h")
            unsigned char byte = (unsigned char)v;
            memcpy(&out, &byte, 1);
        } else if constexpr (sizeof(T) == 2) {
            unsigned short v;
            TX_LOAD_COPS(TX_LD, , "b16", "h")
            memcpy(&out, &v, 2);
        } else if constexpr (sizeof(T) == 4) {
            unsigned int v;
            TX_LOAD_COPS(TX_LD, , "b32", "r")
            memcpy(&out, &v, 4);
        } else if constexpr (sizeof(T) == 8) {
            unsigned long long v;
            TX_LOAD_COPS(TX_LD, , "b64", "l")
            memcpy(&out, &v, 8);
        } else {
            uint4 v;
            TX_LOAD_COPS(TX_LD4, )
            memcpy(&out, &v, 16);
        }
        return out;
    }
    template <typename T> __device__ __forceinline__ static void store(T* p, T value) {
        static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 ||
                          sizeof(T) == 16, "an access of 1 to 16 bytes");
        if constexpr (sizeof(T) == 1) {
            unsigned char byte;
            memcpy(&byte, &value, 1);
            unsigned short v = byte;
            TX_STORE_COPS(TX_ST, , "u8", "h")
        } else if constexpr (sizeof(T) == 2) {
            unsigned short v;
            memcpy(&v, &value, 2);
            TX_STORE_COPS(TX_ST, , "b16", "h")
        } else if constexpr (sizeof(T) == 4) {
            unsigned int v;
            memcpy(&v, &value, 4);
            TX_STORE_COPS(TX_ST, , "b32", "r")
        } else if constexpr (sizeof(T) == 8) {
            unsigned long long v;
            memcpy(&v, &value, 8);
            TX_STORE_COPS(TX_ST, , "b64", "l")
        } else {
            uint4 v;
            memcpy(&v, &value, 16);
            TX_STORE_COPS(TX_ST4, )
        }
    }
};
#undef TX_LD
#undef TX_LD4
#undef TX_ST
#undef TX_ST4
#undef TX_LOAD_COPS
#undef TX_STORE_COPS

}  // namespace tx
