/* dot() test kernels: one per lowering path (tests/test_dot_lowering.py, tests/gpu/test_dot_gpu.py).
 *
 *   mm          A [M, K] @ B [K, N], any strides: a K loop the pipeliner recognises
 *               (cp.async stages when the operand's last axis is contiguous and 16-byte aligned)
 *   mm_nt       B given as Bt [N, K]: dot(a, trans(bt)), the transpose costs nothing
 *   mm_tn       A given as At [K, M]: dot(trans(at), b)
 *   mm_staged   operands computed in registers (scaled loads), written to shared memory by stage()
 *   mm_stats    the accumulator reduced (row sums) and broadcast (minus its row mean) in the
 *               epilogue: layout changes out of the accumulator
 *   imm         i8 A [M, K] @ Bt [N, K] transposed, into i32
 * C is f32 [M, N] row-major (stride scm for mm).
 */

kernel mm(any *c, const any *a, const any *b, i32 M, i32 N, i32 K, i32 sam, i32 sak, i32 sbk,
          i32 sbn, i32 scm, const i32 PRECISION, const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = expand_dims(program_id(0) * BM + arange(0, BM), 1);
    tile rn = expand_dims(program_id(1) * BN + arange(0, BN), 0);
    tile rka = expand_dims(arange(0, BK), 0);
    tile rkb = expand_dims(arange(0, BK), 1);
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(a + rm * sam + (rka + k) * sak, (rm < M) & (rka + k < K), 0);
        tile b_t = load(b + (rkb + k) * sbk + rn * sbn, (rkb + k < K) & (rn < N), 0);
        acc = dot(a_t, b_t, acc, PRECISION);
    }
    store(c + rm * scm + rn, acc, (rm < M) & (rn < N));
}

kernel imm(i32 *c, const i8 *a, const i8 *b, i32 M, i32 N, i32 K, const i32 BM, const i32 BN,
           const i32 BK)
{
    tile rm = expand_dims(program_id(0) * BM + arange(0, BM), 1);
    tile rn = expand_dims(program_id(1) * BN + arange(0, BN), 1);
    tile rk = expand_dims(arange(0, BK), 0);
    i32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(a + rm * K + rk + k, (rm < M) & (rk + k < K), 0);
        tile bt_t = load(b + rn * K + rk + k, (rn < N) & (rk + k < K), 0);
        acc = dot(a_t, trans(bt_t), acc);
    }
    tile cn = expand_dims(program_id(1) * BN + arange(0, BN), 0);
    store(c + rm * N + cn, acc, (rm < M) & (cn < N));
}

kernel mm_nt(f32 *c, const any *a, const any *bt, i32 M, i32 N, i32 K, const i32 PRECISION,
             const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = expand_dims(program_id(0) * BM + arange(0, BM), 1);
    tile rn = expand_dims(program_id(1) * BN + arange(0, BN), 1);
    tile rk = expand_dims(arange(0, BK), 0);
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(a + rm * K + rk + k, (rm < M) & (rk + k < K), 0);
        tile bt_t = load(bt + rn * K + rk + k, (rn < N) & (rk + k < K), 0);
        acc = dot(a_t, trans(bt_t), acc, PRECISION);
    }
    tile cn = expand_dims(program_id(1) * BN + arange(0, BN), 0);
    store(c + rm * N + cn, acc, (rm < M) & (cn < N));
}

kernel mm_tn(f32 *c, const any *at, const any *b, i32 M, i32 N, i32 K, const i32 PRECISION,
             const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = expand_dims(program_id(0) * BM + arange(0, BM), 0);
    tile rn = expand_dims(program_id(1) * BN + arange(0, BN), 0);
    tile rk = expand_dims(arange(0, BK), 1);
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile at_t = load(at + (rk + k) * M + rm, (rk + k < K) & (rm < M), 0);
        tile b_t = load(b + (rk + k) * N + rn, (rk + k < K) & (rn < N), 0);
        acc = dot(trans(at_t), b_t, acc, PRECISION);
    }
    tile cm = expand_dims(program_id(0) * BM + arange(0, BM), 1);
    store(c + cm * N + rn, acc, (cm < M) & (rn < N));
}

kernel mm_staged(f32 *c, const any *a, const any *b, i32 M, i32 N, i32 K, const i32 PRECISION,
                 const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = expand_dims(program_id(0) * BM + arange(0, BM), 1);
    tile rn = expand_dims(program_id(1) * BN + arange(0, BN), 0);
    tile rka = expand_dims(arange(0, BK), 0);
    tile rkb = expand_dims(arange(0, BK), 1);
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(a + rm * K + rka + k, (rm < M) & (rka + k < K), 0);
        tile b_t = load(b + (rkb + k) * N + rn, (rkb + k < K) & (rn < N), 0);
        acc = dot(a_t * 2, b_t, acc, PRECISION);
    }
    store(c + rm * N + rn, acc, (rm < M) & (rn < N));
}

kernel mm_stats(f32 *c, f32 *row_sum, const any *a, const any *b, i32 M, i32 N, i32 K,
                const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = expand_dims(program_id(0) * BM + arange(0, BM), 1);
    tile rn = expand_dims(arange(0, BN), 0);
    tile rka = expand_dims(arange(0, BK), 0);
    tile rkb = expand_dims(arange(0, BK), 1);
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(a + rm * K + rka + k, (rm < M) & (rka + k < K), 0);
        tile b_t = load(b + (rkb + k) * N + rn, (rkb + k < K) & (rn < N), 0);
        acc = dot(a_t, b_t, acc);
    }
    tile s = sum(acc, 1);
    store(row_sum + program_id(0) * BM + arange(0, BM), s, program_id(0) * BM + arange(0, BM) < M);
    store(c + rm * N + rn, acc - expand_dims(s, 1) / N, (rm < M) & (rn < N));
}
