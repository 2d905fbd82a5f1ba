// teeny_tx device support: matrix products on tensor cores (dot). Included by teeny_tx.cuh.
//
// A dot runs in three steps. Its operands reach shared memory, either copied there by cp.async
// (a pipelined loop's loads) or written from registers by stage(). Each warp then reads its
// fragments with ldmatrix. Finally it multiplies them with mma.sync into an accumulator held in
// the Mma layout. Shared tiles swizzle their 16-byte chunks so ldmatrix and cp.async do not
// conflict on banks. Instruction shapes: m16n8k16 for f16/bf16, m16n8k8 for TF32 and m16n8k32
// for i8; each consumes 32 bytes of K per row.
#pragma once

namespace tx {

// ---- the accumulator layout ---------------------------------------------------------------
// Mma<Shape, WM, WN>: WM x WN warps tile an [M, N] accumulator; warps past WM * WN hold
// copies. Each warp's [M / WM, N / WN] part is a grid of m16n8 fragments. In a fragment, lane l
// holds rows l/4 and l/4 + 8, and columns 2(l%4) and 2(l%4) + 1. Registers count along N
// fastest:
//   rn = 2 * (n fragment) + column bit
//   rm = 2 * (m fragment) + row bit
//   r  = rm * regs(1) + rn
// A dimension of size 1 is a slice: a row or column that broadcasts against the accumulator in
// registers, as with Blocked.
template <class Shape, int WM_, int WN_>
struct Mma {
    static constexpr int RANK = 2;
    static constexpr int WM = WM_, WN = WN_, WARPS = WM_ * WN_;
    __host__ __device__ static constexpr int size(int d) { return Shape::v[d]; }
    __host__ __device__ static constexpr int order(int k) { return 1 - k; }
    __host__ __device__ static constexpr int regs(int d) {
        return size(d) == 1 ? 1 : d == 0 ? 2 * (size(0) / WM / 16) : 2 * (size(1) / WN / 8);
    }
    static constexpr int REGS = regs(0) * regs(1);
    static constexpr int SIZE = size(0) * size(1);
    __host__ __device__ static constexpr int reg_coord(int r, int d) { return d == 1 ? r % regs(1) : r / regs(1); }
    __device__ static int lane() { return int(threadIdx.x) % 32; }
    __device__ static int warp_m() { return (int(threadIdx.x) / 32) % WARPS / WN; }
    __device__ static int warp_n() { return (int(threadIdx.x) / 32) % WN; }
    __device__ static int coord(int r, int d) {
        if (size(d) == 1) return 0;
        int rc = reg_coord(r, d);
        if (d == 0) return warp_m() * (size(0) / WM) + 16 * (rc >> 1) + 8 * (rc & 1) + lane() / 4;
        return warp_n() * (size(1) / WN) + 8 * (rc >> 1) + 2 * (lane() % 4) + (rc & 1);
    }
    __device__ static int coord(int r) { return coord(r, 1); }
    // what tx::reduce asks of a layout (as Blocked answers it): along N a thread holds runs of 2
    // columns and a row's 4 threads are the lanes of a quad; along M rows are single, 8 lanes
    // apart by 4
    __host__ __device__ static constexpr int spt(int d) { return d == 1 ? 2 : 1; }
    __host__ __device__ static constexpr int lanes(int d) { return d == 1 ? 4 : 8; }
    __host__ __device__ static constexpr int lane_stride(int d) { return d == 1 ? 1 : 4; }
    __host__ __device__ static constexpr int warps(int d) { return d == 1 ? WN : WM; }
    __device__ static int lane_coord(int d) { return d == 1 ? lane() % 4 : lane() / 4; }
    __device__ static int warp_coord(int d) { return d == 1 ? warp_n() : warp_m(); }
    __device__ static bool owner() {
        return int(threadIdx.x) / 32 < WARPS && (size(0) > 1 || (lane() / 4 == 0 && warp_m() == 0)) &&
               (size(1) > 1 || (lane() % 4 == 0 && warp_n() == 0));
    }
    __device__ static int flat(int r) { return coord(r, 0) * size(1) + coord(r, 1); }
};

// ---- operand tiles in shared memory -------------------------------------------------------
// SmemTile<T, ROWS, COLS>: ROWS x COLS elements, COLS contiguous, stored as panels of at most
// 128 bytes of columns (PW elements): panel p holds columns [p * PW, (p + 1) * PW) of every
// row. Within a panel, each row's 16-byte chunks are XOR-swizzled by row, so the 8 rows that
// one ldmatrix (or one warp's cp.async) touches fall in 8 different bank groups. With 128-byte
// panels and a 1024-byte aligned tile this is the 128-byte swizzle that wgmma reads.
// COLS * sizeof(T) is a multiple of 32 bytes.
template <typename T, int ROWS, int COLS>
struct SmemTile {
    static constexpr int CHUNK = 16 / int(sizeof(T));                       // elements per chunk
    static constexpr int PW = COLS * int(sizeof(T)) > 128 ? 128 / int(sizeof(T)) : COLS;  // panel width
    static constexpr int CHUNKS = PW / CHUNK;                               // chunks per panel row
    static constexpr int WAYS = CHUNKS < 8 ? CHUNKS : 8;
    static constexpr int PHASE = CHUNKS < 8 ? 8 / CHUNKS : 1;  // rows that share a swizzle
    static constexpr int NROWS = ROWS;
    static constexpr int ELEMS = ROWS * COLS;
    static constexpr int BYTES = ELEMS * int(sizeof(T));
    static_assert(COLS * sizeof(T) % 32 == 0, "a shared operand row is a multiple of 32 bytes");
    static_assert(COLS % PW == 0, "whole panels");
    __device__ static int offset(int row, int col) {
        int chunk = (col % PW / CHUNK) ^ ((row / PHASE) % WAYS);
        return col / PW * (ROWS * PW) + row * PW + chunk * CHUNK + col % CHUNK;
    }
};

__device__ __forceinline__ unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Write the registers of a tile (layout L; its axes are layout dimensions DR and DC) into a
// shared tile S, element (row, col) at S's (row, col), or at (col, row) when TRANSPOSE.
template <class L, int DR, int DC, class S, bool TRANSPOSE, typename T>
__device__ __forceinline__ void stage(T* smem, const T* regs) {
    if (!L::owner()) return;
#pragma unroll
    for (int r = 0; r < L::REGS; ++r) {
        int row = L::coord(r, DR), col = L::coord(r, DC);
        smem[TRANSPOSE ? S::offset(col, row) : S::offset(row, col)] = regs[r];
    }
}


// ---- asynchronous copies (global -> shared, no registers) -------------------------------
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING)); }

// ---- mbarriers (shared with prelude/hopper.cuh) ---------------------------------------------
__device__ __forceinline__ void barrier_init(unsigned long long* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void barrier_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}
// Whether the phase of parity `parity` has completed (a fresh barrier is in phase 0: waiting
// for parity 1 returns at once, which is how a producer's first pass finds every stage empty).
__device__ __forceinline__ bool barrier_try_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.b32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
    return done != 0;
}
// With TX_HOPPER_WATCHDOG defined (a number of tries), a wait that never ends reports the
// barrier and traps instead of hanging the device: a debugging aid the GPU tests turn on.
__device__ __forceinline__ void barrier_wait(unsigned long long* bar, unsigned parity) {
#ifdef TX_HOPPER_WATCHDOG
    long long tries = 0;
    while (!barrier_try_wait(bar, parity)) {
        if (++tries == (long long)(TX_HOPPER_WATCHDOG)) {
            printf("teeny_tx watchdog: block %d thread %d waits on mbarrier at smem 0x%x for parity %u\n",
                   int(blockIdx.x), int(threadIdx.x), smem_address(bar), parity);
            __trap();
        }
    }
#else
    while (!barrier_try_wait(bar, parity)) {
    }
#endif
}


// ---- stage hand-over by mbarriers (a pipelined loop whose wgmma finish within the iteration)
// Per stage s of the ring, full[s] and empty[s] = bars[s] and bars[STAGES + s], each counting
// every thread of the block. A thread's copies into s arrive on full[s] once they have landed
// (cp.async.mbarrier.arrive.noinc: the copies' completion is the thread's arrival; the loop's
// copies are all whole 16-byte cp.async chunks); once its dots have read s, it arrives on
// empty[s]. The copies into a stage wait for its previous readers only,
// so warpgroups are not held together at a block-wide barrier every iteration.
__device__ __forceinline__ void stage_barriers_init(unsigned long long* bars, int count) {
    if (threadIdx.x == 0) {
        for (int i = 0; i < count; ++i) barrier_init(bars + i, int(blockDim.x * blockDim.y * blockDim.z));
    }
}
// The same for a loop whose stages TMA fills: a full barrier takes one arrival (the issuing
// thread's, with the stage's bytes), an empty one every thread's.
__device__ __forceinline__ void stage_barriers_init_tma(unsigned long long* bars, int stages) {
    if (threadIdx.x == 0) {
        for (int i = 0; i < stages; ++i) barrier_init(bars + i, 1);
        for (int i = 0; i < stages; ++i) barrier_init(bars + stages + i, int(blockDim.x * blockDim.y * blockDim.z));
    }
}
// The same for a warp-specialised loop (lower/passes/warp_spec.py): its stages are read by the
// `readers` threads of the compute warps only (the producer warpgroup's one thread fills them).
__device__ __forceinline__ void stage_barriers_init_tma(unsigned long long* bars, int stages, int readers) {
    for (int i = 0; i < stages; ++i) barrier_init(bars + i, 1);
    for (int i = 0; i < stages; ++i) barrier_init(bars + stages + i, readers);
}
__device__ __forceinline__ void stage_arrive_full(unsigned long long* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_address(bar)) : "memory");
}
__device__ __forceinline__ void stage_arrive_empty(unsigned long long* bar) { barrier_arrive(bar); }
__device__ __forceinline__ void stage_wait_full(unsigned long long* bar, unsigned parity) { barrier_wait(bar, parity); }
__device__ __forceinline__ void stage_wait_empty(unsigned long long* bar, unsigned parity) { barrier_wait(bar, parity); }
// After the loop's `iterations` iterations: wait for the phases no iteration waited on (the
// copies issued for iterations past the end, and the reads of the last STAGES - AHEAD), so
// every barrier is idle before the region is used again (or initialised again by a loop that
// runs this one more than once).
template <int STAGES, int AHEAD>
__device__ __forceinline__ void stage_barriers_drain(unsigned long long* bars, unsigned iterations) {
#pragma unroll
    for (unsigned j = 0; j < unsigned(AHEAD); ++j)
        barrier_wait(&bars[(iterations + j) % STAGES], ((iterations + j) / STAGES) & 1);
    const unsigned unread = unsigned(STAGES - AHEAD);
#pragma unroll
    for (unsigned j = 0; j < unread; ++j) {
        if (iterations < unread - j) continue;  // fewer iterations than that ran
        const unsigned i = iterations - (unread - j);
        barrier_wait(&bars[STAGES + i % STAGES], (i / STAGES) & 1);
    }
}

// One 16-byte chunk (VEC contiguous elements) of a load. The chunk is copied if all its lanes
// are on, and zero-filled if all are off. At a ragged edge, where only some lanes are on, the
// chunk is written element by element, with 0 for the lanes that are off.
template <int VEC, typename T>
__device__ __forceinline__ void copy_chunk(T* dst, const T* src, const bool* mask) {
    bool all = true, any = false;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
        all = all && mask[j];
        any = any || mask[j];
    }
    if (all || !any) {
        cp_async16(dst, src, all);
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst[j] = mask[j] ? src[j] : cast<T>(0.0f);
    }
}
template <int VEC, typename T>
__device__ __forceinline__ void copy_chunk(T* dst, const T* src) { cp_async16(dst, src, true); }

// ---- fragments and instructions -----------------------------------------------------------
__device__ __forceinline__ void ldmatrix_x4(unsigned* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(p)));
}

// f32 bits rounded to TF32 (10 mantissa bits), to nearest even: the interpreter's rounding.
__device__ __forceinline__ unsigned tf32_round(unsigned x) { return (x + 0xFFFu + ((x >> 13) & 1u)) & 0xFFFFE000u; }

// The instruction of each input type: T (the element), Acc (the accumulator), mma(c, a, b) on
// one m16n8 fragment (c0..c3 as the Mma layout numbers them).
#define TX_MMA_16816(NAME, TYPE, PTX)                                                                          \
    struct NAME {                                                                                              \
        using T = TYPE;                                                                                        \
        using Acc = float;                                                                                     \
        static constexpr bool TRANSPOSABLE = true;                                                             \
        __device__ static void prepare(unsigned*, int) {}                                                      \
        __device__ static void mma(float& c0, float& c1, float& c2, float& c3, const unsigned* a,              \
                                   const unsigned* b) {                                                        \
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX "." PTX ".f32 "                            \
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                    \
                         : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)                                              \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                  \
        }                                                                                                      \
    };
TX_MMA_16816(MmaF16, __half, "f16")
TX_MMA_16816(MmaBF16, __nv_bfloat16, "bf16")
#undef TX_MMA_16816

__device__ __forceinline__ void mma_tf32(float& c0, float& c1, float& c2, float& c3, const unsigned* a,
                                         const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// TF32: f32 inputs rounded to TF32, one product.
struct MmaTF32 {
    using T = float;
    using Acc = float;
    static constexpr bool TRANSPOSABLE = false;
    __device__ static void prepare(unsigned* x, int n) {
#pragma unroll
        for (int i = 0; i < n; ++i) x[i] = tf32_round(x[i]);
    }
    __device__ static void mma(float& c0, float& c1, float& c2, float& c3, const unsigned* a, const unsigned* b) {
        mma_tf32(c0, c1, c2, c3, a, b);
    }
};

// TF32X3: x = big + small with big = tf32(x), small = tf32(x - big); three products (the
// small x small term is dropped), small terms first: close to f32 accuracy.
struct MmaTF32x3 {
    using T = float;
    using Acc = float;
    static constexpr bool TRANSPOSABLE = false;
    __device__ static void prepare(unsigned*, int) {}
    __device__ static void split(const unsigned* x, unsigned* big, unsigned* small, int n) {
#pragma unroll
        for (int i = 0; i < n; ++i) {
            big[i] = tf32_round(x[i]);
            small[i] = tf32_round(__float_as_uint(__uint_as_float(x[i]) - __uint_as_float(big[i])));
        }
    }
    __device__ static void mma(float& c0, float& c1, float& c2, float& c3, const unsigned* a, const unsigned* b) {
        unsigned ab[4], as[4], bb[2], bs[2];
        split(a, ab, as, 4);
        split(b, bb, bs, 2);
        mma_tf32(c0, c1, c2, c3, as, bb);
        mma_tf32(c0, c1, c2, c3, ab, bs);
        mma_tf32(c0, c1, c2, c3, ab, bb);
    }
};

struct MmaI8 {
    using T = signed char;
    using Acc = int;
    static constexpr bool TRANSPOSABLE = false;
    __device__ static void prepare(unsigned*, int) {}
    __device__ static void mma(int& c0, int& c1, int& c2, int& c3, const unsigned* a, const unsigned* b) {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+r"(c0), "+r"(c1), "+r"(c2), "+r"(c3)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

// The A and B fragments of one warp for the K step at kk (see mma below).
template <class Acc, class Inst, class SA, bool A_KMAJOR, class SB, bool B_KMAJOR, int MT, int NT>
__device__ __forceinline__ void load_fragments(unsigned (&a)[MT][4], unsigned (&b)[NT][2], const typename Inst::T* sA,
                                               const typename Inst::T* sB, int m0, int n0, int kk) {
    constexpr int CH = 16 / int(sizeof(typename Inst::T));  // elements per 16-byte chunk
    const int lane = int(threadIdx.x) % 32;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        if (A_KMAJOR)
            ldmatrix_x4(a[mt], sA + SA::offset(m0 + 16 * mt + lane % 8 + 8 * ((lane / 8) % 2), kk + CH * (lane / 16)));
        else
            ldmatrix_x4_trans(a[mt], sA + SA::offset(kk + lane % 8 + 8 * (lane / 16), m0 + 16 * mt + 8 * ((lane / 8) % 2)));
        Inst::prepare(a[mt], 4);
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
        unsigned r[4];
        if (B_KMAJOR)
            ldmatrix_x4(r, sB + SB::offset(n0 + 16 * np + lane % 8 + 8 * (lane / 16), kk + CH * ((lane / 8) % 2)));
        else
            ldmatrix_x4_trans(r, sB + SB::offset(kk + lane % 8 + 8 * ((lane / 8) % 2), n0 + 16 * np + 8 * (lane / 16)));
        Inst::prepare(r, 4);
        b[2 * np][0] = r[0];
        b[2 * np][1] = r[1];
        b[2 * np + 1][0] = r[2];
        b[2 * np + 1][1] = r[3];
    }
}

// acc += A @ B on the block's tensor cores. A [M, K] and B [K, N] are in shared memory:
//   A: SA holds [M][K] when A_KMAJOR, else [K][M] (read with ldmatrix.trans, 16-bit types only)
//   B: SB holds [N][K] when B_KMAJOR, else [K][N] (likewise)
// Each warp computes its part of the accumulator (layout Acc), 32 bytes of K per step; the
// fragments of step s + 1 are loaded before the products of step s are issued (two fragment
// buffers), so ldmatrix latency hides behind the tensor cores.
template <class Acc, class Inst, class SA, bool A_KMAJOR, class SB, bool B_KMAJOR, int K>
__device__ __forceinline__ void mma(typename Inst::Acc* acc, const typename Inst::T* sA, const typename Inst::T* sB) {
    using T = typename Inst::T;
    static_assert(Inst::TRANSPOSABLE || (A_KMAJOR && B_KMAJOR), "ldmatrix.trans moves 16-bit elements only");
    constexpr int TM = Acc::size(0) / Acc::WM, TN = Acc::size(1) / Acc::WN;
    constexpr int MT = TM / 16, NT = TN / 8;  // fragments per warp along M and N
    constexpr int KS = 32 / int(sizeof(T));   // K per instruction
    static_assert(TM % 16 == 0 && TN % 16 == 0 && K % KS == 0, "dot tile shape");
    const int m0 = Acc::warp_m() * TM, n0 = Acc::warp_n() * TN;
    unsigned a[2][MT][4], b[2][NT][2];
    load_fragments<Acc, Inst, SA, A_KMAJOR, SB, B_KMAJOR, MT, NT>(a[0], b[0], sA, sB, m0, n0, 0);
#pragma unroll
    for (int step = 0; step < K / KS; ++step) {
        const int cur = step % 2;
        if (step + 1 < K / KS)
            load_fragments<Acc, Inst, SA, A_KMAJOR, SB, B_KMAJOR, MT, NT>(a[cur ^ 1], b[cur ^ 1], sA, sB, m0, n0,
                                                                          (step + 1) * KS);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                typename Inst::Acc* c = acc + (2 * mt) * Acc::regs(1) + 2 * nt;
                Inst::mma(c[0], c[1], c[Acc::regs(1)], c[Acc::regs(1) + 1], a[cur][mt], b[cur][nt]);
            }
        }
    }
}

// ---- Hopper: warpgroup MMA (sm_90a) ------------------------------------------------------
// wgmma reads both operands straight from shared memory through 64-bit descriptors: the start
// address, the byte distances between 8-row core-matrix groups and between 128-byte panels,
// and the 128-byte swizzle. Each warpgroup (4 warps) computes 64 rows of the accumulator: its
// layout is Mma<[16 * warps, N], warps, 1>, the same registers mma.sync would hold.
__device__ __forceinline__ unsigned long long gmma_desc(const void* p, int lbo, int sbo) {
    unsigned long long address = smem_address(p);
    return ((address & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// The descriptor of one operand for the 16-deep K step at k0, rows mn0.. of its MN extent.
// K-major (tile [MN][K]): 8-row groups 1024 bytes apart, the K step inside a 128-byte row.
// MN-major (tile [K][MN]): 64-wide panels ROWS * 128 bytes apart, 8-row K groups 1024 apart.
template <class S, bool KMAJOR, typename T>
__device__ __forceinline__ unsigned long long operand_desc(const T* tile, int mn0, int k0) {
    if (KMAJOR) return gmma_desc(tile + k0 / S::PW * (S::NROWS * S::PW) + mn0 * S::PW + k0 % S::PW, 16, 1024);
    return gmma_desc(tile + mn0 / S::PW * (S::NROWS * S::PW) + k0 * S::PW, S::NROWS * 128, 1024);
}

__device__ __forceinline__ void fence_async_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory"); }

// acc += A @ B by warpgroups: Instr(acc, desc_a, desc_b) is the kernel's wgmma instruction
// (m64nNk16, or m64nNk8 for TF32, generated with the kernel); wgmma_issue issues one per 32
// bytes of K as one group; wgmma() then waits until at most PENDING groups run on (1 in a
// pipelined loop: the next iteration's copies overlap the products; the loop waits for all
// after its last iteration).
template <class Acc, class SA, bool A_KMAJOR, class SB, bool B_KMAJOR, int K, typename T, typename Instr>
__device__ __forceinline__ void wgmma_issue(float* acc, const T* sA, const T* sB, Instr instr) {
    const int m0 = (int(threadIdx.x) / 128) * 64;
    wgmma_fence();
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 32 / int(sizeof(T)))  // 32 bytes of K per instruction
        instr(acc, operand_desc<SA, A_KMAJOR>(sA, m0, k0), operand_desc<SB, B_KMAJOR>(sB, 0, k0));
    wgmma_commit();
}
template <class Acc, class SA, bool A_KMAJOR, class SB, bool B_KMAJOR, int K, int PENDING, typename T,
          typename Instr>
__device__ __forceinline__ void wgmma(float* acc, const T* sA, const T* sB, Instr instr) {
    wgmma_issue<Acc, SA, A_KMAJOR, SB, B_KMAJOR, K>(acc, sA, sB, instr);
    wgmma_wait<PENDING>();
}

// The registers of a tile, fenced: the compiler may not move a read or a write of them across
// this point (wgmma_async's result is read only after the wgmma_wait before it; the work done
// while it ran stays before that wait).
__device__ __forceinline__ void fence_register(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void fence_register(int& x) { asm volatile("" : "+r"(x)::"memory"); }
__device__ __forceinline__ void fence_register(__half& x) {
    asm volatile("" : "+h"(reinterpret_cast<unsigned short&>(x))::"memory");
}
__device__ __forceinline__ void fence_register(__nv_bfloat16& x) {
    asm volatile("" : "+h"(reinterpret_cast<unsigned short&>(x))::"memory");
}
template <class L, typename T>
__device__ __forceinline__ void fence_registers(T* r) {
#pragma unroll
    for (int i = 0; i < L::REGS; ++i) fence_register(r[i]);
}

// wgmma() issued without waiting: the product runs on while the code after it does, until a
// wgmma_wait<N>() and fence_registers<Acc>(acc) before the first statement that reads acc
// (lower/passes/dot_plan.py places them). acc's registers are fenced first, so the writes
// before stay before the issue.
template <class Acc, class SA, bool A_KMAJOR, class SB, bool B_KMAJOR, int K, typename T, typename Instr>
__device__ __forceinline__ void wgmma_async(float* acc, const T* sA, const T* sB, Instr instr) {
    fence_registers<Acc>(acc);
    wgmma_issue<Acc, SA, A_KMAJOR, SB, B_KMAJOR, K>(acc, sA, sB, instr);
}

// Two 16-bit values as one 32-bit register, the first in the low half (fragment order).
__device__ __forceinline__ unsigned pack2(__half lo, __half hi) {
    return unsigned(__half_as_ushort(lo)) | (unsigned(__half_as_ushort(hi)) << 16);
}
__device__ __forceinline__ unsigned pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return unsigned(__bfloat16_as_ushort(lo)) | (unsigned(__bfloat16_as_ushort(hi)) << 16);
}

// acc += A @ B with A in registers (wgmma's register-A form): A is a 16-bit tile held in the
// Mma layout LA of a wgmma accumulator (Mma<[16 * warps, K], warps, 1>: P of attention, computed
// from a product), whose registers are already the A fragments of m64nNk16: for the K step k0
// a thread passes rows l/4 and l/4 + 8 of its warp's 16, columns k0 + 2(l%4) (+1) and + 8.
// Instr(acc, a, desc_b) takes the 4 packed registers. B is in shared memory, as in wgmma().
template <class LA, int K, typename T>
__device__ __forceinline__ void pack_a(unsigned (&r)[K / 16][4], const T* a) {
    static_assert(LA::regs(0) == 2 && LA::regs(1) == K / 4, "A holds one m16 fragment row per warp");
    constexpr int Q = LA::regs(1);  // registers per row half
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int c = k0 / 4;  // the first of this step's four registers in a row half
        r[k0 / 16][0] = pack2(a[c], a[c + 1]);
        r[k0 / 16][1] = pack2(a[Q + c], a[Q + c + 1]);
        r[k0 / 16][2] = pack2(a[c + 2], a[c + 3]);
        r[k0 / 16][3] = pack2(a[Q + c + 2], a[Q + c + 3]);
    }
}
template <class SB, bool B_KMAJOR, int K, typename T, typename Instr>
__device__ __forceinline__ void wgmma_rs_packed(float* acc, const unsigned (&r)[K / 16][4], const T* sB, Instr instr) {
    wgmma_fence();
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 16) instr(acc, r[k0 / 16], operand_desc<SB, B_KMAJOR>(sB, 0, k0));
    wgmma_commit();
}
template <class Acc, class LA, class SB, bool B_KMAJOR, int K, int PENDING, typename T, typename Instr>
__device__ __forceinline__ void wgmma_rs(float* acc, const T* a, const T* sB, Instr instr) {
    // every step's A fragments packed before the first wgmma: registers written between the
    // wgmmas of one group would make ptxas wait for each product before the next
    unsigned r[K / 16][4];
    pack_a<LA, K>(r, a);
    wgmma_rs_packed<SB, B_KMAJOR, K>(acc, r, sB, instr);
    wgmma_wait<PENDING>();
}

// wgmma_rs() issued without waiting (see wgmma_async), its A fragments packed into r, which
// the caller keeps until the wait (fence_fragments after it): registers a running wgmma reads
// are not free for other values, and ptxas would wait for the product before reusing them.
template <class Acc, class LA, class SB, bool B_KMAJOR, int K, typename T, typename Instr>
__device__ __forceinline__ void wgmma_rs_async(float* acc, unsigned (&r)[K / 16][4], const T* a, const T* sB,
                                               Instr instr) {
    fence_registers<Acc>(acc);
    pack_a<LA, K>(r, a);
    wgmma_rs_packed<SB, B_KMAJOR, K>(acc, r, sB, instr);
}
// The end of a basic block, here: ptxas schedules a wgmma wait as early in its block as it can,
// above the work the program placed before it to run while the products do (attention's
// softmax), and the overlap is lost. A branch it cannot fold ends the block: on the dynamic
// shared memory size, which is never 4 GiB, so its body (a zero sleep) never runs. The size is
// uniform and fixed for the launch; the branch costs one predicated jump.
__device__ __forceinline__ void block_boundary() {
    unsigned size;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(size));
    if (size == 0xffffffffu) __nanosleep(0);
}

template <int STEPS>
__device__ __forceinline__ void fence_fragments(unsigned (&r)[STEPS][4]) {
#pragma unroll
    for (int i = 0; i < STEPS; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// TF32 operands are rounded to nearest even in shared memory before wgmma reads them (wgmma
// would ignore the low mantissa bits): each thread rounds the 16-byte chunks it copied.
__device__ __forceinline__ void tf32_round_chunk(float* chunk) {
    uint4 v = *reinterpret_cast<uint4*>(chunk);
    v.x = tf32_round(v.x);
    v.y = tf32_round(v.y);
    v.z = tf32_round(v.z);
    v.w = tf32_round(v.w);
    *reinterpret_cast<uint4*>(chunk) = v;
}
template <typename T> __device__ __forceinline__ T tf32_value(T x) { return x; }
__device__ __forceinline__ float tf32_value(float x) { return __uint_as_float(tf32_round(__float_as_uint(x))); }

// stage(), with f32 values rounded to TF32 on the way (for wgmma's TF32 reads).
template <class L, int DR, int DC, class S, bool TRANSPOSE>
__device__ __forceinline__ void stage_tf32(float* smem, const float* regs) {
    if (!L::owner()) return;
#pragma unroll
    for (int r = 0; r < L::REGS; ++r) {
        int row = L::coord(r, DR), col = L::coord(r, DC);
        smem[TRANSPOSE ? S::offset(col, row) : S::offset(row, col)] = tf32_value(regs[r]);
    }
}

// A pointer into shared memory rounded up to a 1024-byte boundary (the 128-byte swizzle's
// period), for tiles wgmma reads.
__device__ __forceinline__ unsigned char* align1024(unsigned char* p) {
    return p + ((1024 - (smem_address(p) & 1023)) & 1023);
}

// acc += A @ B in FMAs of T (IEEE f32 or f64 dot: no tensor cores), A as [M][K] and B as
// [N][K] in shared memory; each thread sums its own accumulator elements in order of k.
template <class Acc, class SA, class SB, int K, class T>
__device__ __forceinline__ void dot_fma(T* acc, const T* sA, const T* sB) {
#pragma unroll
    for (int r = 0; r < Acc::REGS; ++r) {
        const int m = Acc::coord(r, 0), n = Acc::coord(r, 1);
        T s = acc[r];
#pragma unroll 8
        for (int k = 0; k < K; ++k) s = tx::fma(sA[SA::offset(m, k)], sB[SB::offset(n, k)], s);
        acc[r] = s;
    }
}

}  // namespace tx
