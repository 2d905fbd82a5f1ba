/* Matrix products: C = act(alpha * (A @ B) + bias), batched or not, and the column sums that
 * give a linear layer's bias gradient.
 *
 * A [M, K], B [K, N] and C [M, N] are f16, bf16 or f32 (A and B one dtype, C its own), each
 * with arbitrary element strides (sam, sak: A's strides along M and K, and so on), and, for a
 * batch of products, a stride between batches (sab, sbb, scb; 0 for a single product). Products
 * accumulate in f32 (dot); the epilogue runs in f32, and the result is rounded once, to C's
 * dtype, at the store. f32 inputs are multiplied as PRECISION says (IEEE, TF32 or TF32X3, the
 * dot() constants); f16 and bf16 take IEEE. bias is a vector [N] of any float dtype (HAS_BIAS = 0: no bias, and
 * any pointer may be passed). ACT: 0 none, 1 GELU (exact, erf), 2 GELU (tanh approximation),
 * 3 ReLU, 4 SiLU (gelu_exact and gelu_tanh are prelude helpers, prelude/activations.h).
 *
 * One program computes one BM x BN tile of C, stepping through K by BK. The grid is 1-D over
 * the tiles of one product (cdiv(M, BM) * cdiv(N, BN) programs) in grouped order, GROUP_M rows
 * of tiles at a time (group_pid_m/group_pid_n, prelude/matmul.h: programs in flight share
 * tiles of A and B in L2); axis 1 of the grid is the batch.
 *
 * Each load runs along its operand's contiguous axis: A's tile is [BM, BK], or, with A_T
 * (A contiguous along M, such as the transpose of a row-major array), [BK, BM], transposed in
 * dot(); B's is [BK, BN], or [BN, BK] with B_T (B contiguous along K, such as a row-major
 * weight W [N, K] read as W^T). So x @ W^T (a linear layer) and dY^T @ X (its weight
 * gradient) read row-major arrays row by row.
 *
 * The K loop keeps the shape the software pipeliner recognises: a plain counted loop whose body
 * is the two loads, with pointers and masks made of k, parameters and tiles set before the
 * loop, then the dot. Masked-off elements (ragged M, N and K edges) load 0.
 *
 *   matmul:     C[b] = act(alpha * A[b] @ B[b] + bias)         b = program_id(1)
 *   linear_db:  db[j] = sum over rows t of dy[t, j]            (f32 partial sums by row chunks)
 */

/* Tile configs, timed on first use of each (M, N, K, dtypes, epilogue) by kernel.tune (what
 * teeny_tx.linalg launches). On the H200 the 16-rows-per-warp tiles (BM = 16 * num_warps) of
 * f16/bf16 (BK = 64) and of TF32 with K-contiguous operands (BK = 32) run on wgmma, the
 * others on mma.sync; f32's BK = 64 tiles do not fit in shared memory and are pruned. */
#pragma autotune key(M, N, K)
#pragma autotune config(BM=128, BN=256, BK=64, num_warps=8, num_stages=4)
#pragma autotune config(BM=128, BN=256, BK=64, num_warps=8, num_stages=3)
#pragma autotune config(BM=128, BN=128, BK=64, num_warps=8, num_stages=4)
#pragma autotune config(BM=64, BN=256, BK=64, num_warps=4, num_stages=4)
#pragma autotune config(BM=128, BN=256, BK=32, num_warps=8, num_stages=4)
#pragma autotune config(BM=128, BN=128, BK=32, num_warps=8, num_stages=4)
#pragma autotune config(BM=128, BN=128, BK=32, num_warps=4, num_stages=4)
#pragma autotune config(BM=64, BN=128, BK=32, num_warps=4, num_stages=4)
#pragma autotune config(BM=64, BN=64, BK=32, num_warps=4, num_stages=3)
kernel matmul(any *c, const any *a, const any *b, const any *bias, i32 M, i32 N, i32 K,
              i32 sam, i32 sak, i32 sbk, i32 sbn, i32 scm, i32 scn, i32 sab, i32 sbb, i32 scb,
              f32 alpha, const i32 HAS_BIAS, const i32 ACT, const i32 PRECISION, const i32 A_T,
              const i32 B_T, const i32 BM, const i32 BN, const i32 BK, const i32 GROUP_M)
{
    i32 num_m = cdiv(M, BM);
    i32 num_n = cdiv(N, BN);
    i32 pid_m = group_pid_m(program_id(0), num_m, num_n, GROUP_M);
    i32 pid_n = group_pid_n(program_id(0), num_m, num_n, GROUP_M);
    i32 batch = program_id(1);
    tile rm = pid_m * BM + arange(0, BM);
    tile rn = pid_n * BN + arange(0, BN);
    tile rk = arange(0, BK);
    tile am = A_T ? expand_dims(rm, 0) : expand_dims(rm, 1);     /* [1, BM] or [BM, 1] */
    tile ak = A_T ? expand_dims(rk, 1) : expand_dims(rk, 0);     /* [BK, 1] or [1, BK] */
    tile bk = B_T ? expand_dims(rk, 0) : expand_dims(rk, 1);     /* [1, BK] or [BK, 1] */
    tile bn = B_T ? expand_dims(rn, 1) : expand_dims(rn, 0);     /* [BN, 1] or [1, BN] */
    acc_t acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(a + batch * sab + am * sam + (ak + k) * sak, (am < M) & (ak + k < K), 0);
        tile b_t = load(b + batch * sbb + (bk + k) * sbk + bn * sbn, (bk + k < K) & (bn < N), 0);
        acc = dot(A_T ? trans(a_t) : a_t, B_T ? trans(b_t) : b_t, acc, PRECISION);
    }
    tile out = acc * alpha;
    if (HAS_BIAS) {
        out += (acc_t)load(bias + rn, rn < N, 0);
    }
    if (ACT == 1) {
        out = gelu_exact(out);
    } else if (ACT == 2) {
        out = gelu_tanh(out);
    } else if (ACT == 3) {
        out = where(out < 0.0f, 0.0f, out);   /* NaN stays NaN, as in torch.relu */
    } else if (ACT == 4) {
        out = out * sigmoid(out);
    }
    tile cm = expand_dims(rm, 1);
    tile cn = expand_dims(rn, 0);
    store(c + batch * scb + cm * scm + cn * scn, out, (cm < M) & (cn < N));
}

/* Sums over rows of x [rows, cols] (strides s_row, s_col), in f32: program (j, p) adds rows
 * [p * chunk, (p + 1) * chunk) of columns [j * BN, (j + 1) * BN), BT rows at a time, and
 * writes out[p * cols + column] (out is [cdiv(rows, chunk), cols]; chunk = rows writes the
 * sums themselves). A second launch over those partial rows finishes the sum. */
kernel linear_db(any *out, const any *x, i32 rows, i32 cols, i32 s_row, i32 s_col, i32 chunk,
                 const i32 BT, const i32 BN)
{
    tile cn = program_id(0) * BN + arange(0, BN);
    i32 first = program_id(1) * chunk;
    i32 last = minimum(first + chunk, rows);
    tile rt = expand_dims(arange(0, BT), 1);
    tile col = expand_dims(cn, 0);
    acc_t acc[BT][BN] = 0;
    for (i32 t = first; t < last; t += BT) {
        acc += (acc_t)load(x + (rt + t) * s_row + col * s_col, (rt + t < last) & (col < cols), 0);
    }
    store(out + program_id(1) * cols + cn, sum(acc, 0), cn < cols);
}
