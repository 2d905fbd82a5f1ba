// teeny_tx device support for Hopper (sm_90a): the parts a warp-specialised kernel is built
// from. Included by the kernels the Hopper lowering renders (templates/hopper_*.cu.j2); matmul
// and attention are two compositions of these parts.
//
//   tensor maps    TensorMap (CUtensorMap's 128 opaque bytes, encoded on the host, passed as a
//                  `const __grid_constant__` kernel parameter), tma_load_2d (one bulk tensor copy
//                  global -> shared memory that completes on an mbarrier) and tma_store_2d (the
//                  reverse, tracked by bulk groups)
//   mbarrier ring  Ring<STAGES>: the stage and phase parity a role is at; full[s] (the producer's
//                  copies landed, counted in bytes) and empty[s] (every consumer is done with s)
//   clusters       cluster_rank, cluster_sync; tma_load_2d_multicast (one copy into every CTA of
//                  a mask) and barrier_arrive_cta (an arrival on a peer CTA's mbarrier)
//   roles          producer_registers / consumer_registers (setmaxnreg); the kernel is one
//                  if/else on the warpgroup index, under __launch_bounds__(threads, 1)
//   wgmma          operand descriptors for 128-byte-swizzled tiles (SmemTile, mma.cuh): one
//                  panel of 128 bytes per row, 8-row core groups 1024 bytes apart
//   epilogue       activations of the matmul epilogue; 2-element stores from registers, or
//                  into a swizzled staging tile (stage_pair) that TMA stores, after an
//                  async-proxy fence and a named barrier of the consumer warpgroup
//   scheduler      GroupedTiles: a persistent grid walks output tiles in grouped order
//
// The 128-byte swizzle TMA writes (16-byte chunk c of row r lands at chunk c ^ (r % 8), in
// 1024-byte aligned tiles) is SmemTile's: the same tile type serves TMA, wgmma and ldmatrix.
#pragma once

#include "teeny_tx.cuh"

namespace tx {
namespace hopper {

// ---- tensor maps ----------------------------------------------------------------------------
// The driver's CUtensorMap: 128 bytes, 64-byte aligned, opaque. Kernels take it by value as a
// `const __grid_constant__` parameter, so its address is a parameter-space address TMA reads.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ void prefetch_tensor_map(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// One box of a 2-D tensor map, at element coordinates (c0 along the contiguous axis, c1 along
// the other), copied into shared memory at dst; the copy adds its bytes to the mbarrier's
// transaction count when it lands. Elements outside the tensor are zero-filled (and counted).
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, unsigned long long* bar, int c0,
                                            int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
            smem_address(dst)),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1)
        : "memory");
}

// The same for tensors of 3, 4 and 5 dimensions (coordinates innermost first): the boxes of a
// software-pipelined loop's loads (a [B, N, H, D] tensor is a 4-D map over D, N, H, B).
#define TX_TMA_LOAD_ND(RANK, PARAMS, COORDS, ...)                                                     \
    __device__ __forceinline__ void tma_load_##RANK##d(void* dst, const TensorMap* map, unsigned long long* bar, \
                                                       PARAMS) {                                           \
        asm volatile("cp.async.bulk.tensor." #RANK "d.shared::cluster.global.mbarrier::complete_tx::bytes"    \
                     " [%0], [%1, {" COORDS "}], [%2];\n" ::"r"(smem_address(dst)),                         \
                     "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_address(bar)), __VA_ARGS__     \
                     : "memory");                                                                        \
    }
#define TX_COMMA ,
TX_TMA_LOAD_ND(3, int c0 TX_COMMA int c1 TX_COMMA int c2, "%3, %4, %5", "r"(c0), "r"(c1), "r"(c2))
TX_TMA_LOAD_ND(4, int c0 TX_COMMA int c1 TX_COMMA int c2 TX_COMMA int c3, "%3, %4, %5, %6", "r"(c0), "r"(c1),
               "r"(c2), "r"(c3))
TX_TMA_LOAD_ND(5, int c0 TX_COMMA int c1 TX_COMMA int c2 TX_COMMA int c3 TX_COMMA int c4, "%3, %4, %5, %6, %7",
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))
#undef TX_COMMA
#undef TX_TMA_LOAD_ND

// The same copy multicast to the CTAs of the cluster in `mask` (bit i: CTA rank i): the box
// lands at dst's offset in each of their shared memories and completes on the mbarrier at
// bar's offset in each (every CTA expects the bytes that reach it on its own barrier).
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TensorMap* map, unsigned long long* bar,
                                                      int c0, int c1, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_address(dst)),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "h"(mask)
        : "memory");
}

// The reverse: a box of shared memory (the same swizzled layout) into the tensor at (c0, c1);
// elements outside the tensor are not written. Completion is tracked by bulk groups.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, const void* src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(smem_address(src)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most PENDING store groups still read shared memory (the buffer may be rewritten).
template <int PENDING>
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
}
// Until the stores are complete (before the block exits).
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// A barrier among `threads` threads (a multiple of 32) of the block, numbered `id` (1..15; 0
// is __syncthreads'): one consumer warpgroup synchronises without the others.
__device__ __forceinline__ void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// An arrival on that barrier without waiting: the warps that sync on it may go on once the
// arrivals and their own make `threads` (a ping-pong's "your turn" to the other warpgroup).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- mbarriers ------------------------------------------------------------------------------
// barrier_init, barrier_arrive, barrier_try_wait and barrier_wait are mma.cuh's (tx::), shared
// with the pipelined loops' stage hand-over; the TMA- and cluster-specific ones are here.
using tx::barrier_arrive;
using tx::barrier_init;
using tx::barrier_try_wait;
using tx::barrier_wait;

// Barrier initialisation made visible to the async proxy (TMA) and the other threads' waits.
__device__ __forceinline__ void barrier_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The producer's arrival: this phase completes when `bytes` more bytes have landed.
__device__ __forceinline__ void barrier_expect_bytes(unsigned long long* bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
                 : "memory");
}
// An arrival on the mbarrier at bar's offset in the shared memory of cluster CTA `cta` (this
// one included): how a consumer releases a stage that its peer's producer multicasts into.
__device__ __forceinline__ void barrier_arrive_cta(unsigned long long* bar, unsigned cta) {
    asm volatile(
        "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_address(bar)),
        "r"(cta)
        : "memory");
}

// Where a role is in the ring of STAGES shared-memory stages: the stage, and the parity of the
// phase its barriers are in (it flips each time the ring wraps).
template <int STAGES>
struct Ring {
    int stage = 0;
    unsigned phase = 0;
    __device__ __forceinline__ void advance() {
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
        }
    }
    // n stages on at once (a ping-pong consumer passing the other one's tile)
    __device__ __forceinline__ void skip(int n) {
        const int to = stage + n;
        phase ^= unsigned(to / STAGES) & 1u;
        stage = to % STAGES;
    }
};

// ---- clusters -------------------------------------------------------------------------------
// This CTA's rank in its thread-block cluster (the kernel's __cluster_dims__), and a barrier of
// every thread of every CTA of the cluster (release/acquire: barrier inits and shared memory
// before it are visible to the peers after it). A CTA must not exit while a peer may still
// arrive on its barriers: the kernel ends with cluster_sync().
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}
__device__ __forceinline__ void cluster_sync() {
    __syncwarp();  // the barrier is .aligned: the warp's threads (some back from a role's branch) meet first
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// ---- roles ----------------------------------------------------------------------------------
// setmaxnreg moves registers between warpgroups: the producer keeps few, the consumers (whose
// accumulators live in registers) take them. It acts only under a register cap at entry
// (__launch_bounds__(threads, 1)) and must be executed by every warp of the warpgroup.
template <int REGS>
__device__ __forceinline__ void producer_registers() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void consumer_registers() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
__device__ __forceinline__ int warpgroup() { return __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0); }

// ---- wgmma operands -------------------------------------------------------------------------
// The descriptor of operand tile S (an SmemTile of one stage, 128-byte swizzle) for the 16-deep
// K step at k0 and rows mn0.. of its M or N extent; KMAJOR: the tile is [MN][K], else [K][MN].
template <class S, bool KMAJOR, typename T>
__device__ __forceinline__ unsigned long long descriptor(const T* tile, int mn0, int k0) {
    return operand_desc<S, KMAJOR>(tile, mn0, k0);
}

// ---- epilogue -------------------------------------------------------------------------------
// The matmul epilogue's activations (kernels/matmul.c's ACT): 0 none, 1 GELU (erf), 2 GELU
// (tanh), 3 ReLU (NaN stays NaN), 4 SiLU; the same formulas as prelude/activations.h.
template <int ACT>
__device__ __forceinline__ float activate(float x) {
    if (ACT == 1) return 0.5f * x * (1.0f + ::erff(x * 0.7071067811865476f));
    if (ACT == 2) return 0.5f * x * (1.0f + ::tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    if (ACT == 3) return x < 0.0f ? 0.0f : x;
    if (ACT == 4) return x * (1.0f / (1.0f + ::expf(-x)));
    return x;
}

// Two horizontally adjacent results (columns col, col + 1 of one row), stored as one 2-element
// access when both are in the matrix and the row is contiguous and aligned (PAIRS), else one by
// one under the bounds.
template <bool PAIRS, typename T>
__device__ __forceinline__ void store_pair(T* c, int row, int col, int M, int N, int scm, int scn, float v0,
                                           float v1) {
    if (row >= M) return;
    T* p = c + (long long)row * scm + (long long)col * scn;
    if (PAIRS && col + 1 < N) {
        struct alignas(2 * sizeof(T)) Two {
            T x, y;
        };
        *reinterpret_cast<Two*>(p) = Two{cast<T>(v0), cast<T>(v1)};
        return;
    }
    if (col < N) p[0] = cast<T>(v0);
    if (col + 1 < N) p[scn] = cast<T>(v1);
}

// The same two results into a consumer's staging tile S (an SmemTile, 128-byte swizzle) at
// row rr, columns cc and cc + 1, as one access; swz = rr % 8, which a thread knows without
// arithmetic (lane / 4 for every row of a wgmma accumulator).
template <class S, typename T>
__device__ __forceinline__ void stage_pair(T* tile, int rr, int cc, int swz, float v0, float v1) {
    const int chunk = (cc % S::PW) / S::CHUNK;
    T* p = tile + cc / S::PW * (S::NROWS * S::PW) + rr * S::PW + (chunk ^ swz) * S::CHUNK + cc % S::CHUNK;
    struct alignas(2 * sizeof(T)) Two {
        T x, y;
    };
    *reinterpret_cast<Two*>(p) = Two{cast<T>(v0), cast<T>(v1)};
}

// ---- tile scheduler -------------------------------------------------------------------------
// Output tiles in grouped order (prelude/matmul.h's group_pid_m/n): a persistent grid of at
// most one block per SM walks tiles blockIdx.x, blockIdx.x + gridDim.x, ...; the blocks in
// flight at once cover `group_m` rows of tiles, whose operands stay in L2.
struct GroupedTiles {
    int num_m, num_n, group_m;
    __device__ __forceinline__ int count() const { return num_m * num_n; }
    __device__ __forceinline__ void coords(int tile, int& m, int& n) const {
        const int width = group_m * num_n;
        const int first = tile / width * group_m;
        const int rows = min(num_m - first, group_m);
        m = first + tile % width % rows;
        n = tile % width / rows;
    }
};

}  // namespace hopper
}  // namespace tx
