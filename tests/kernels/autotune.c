/* Autotuned kernels of tests/test_autotune.py and tests/gpu/test_autotune_gpu.py. */

/* out = x^T for x [M, N] (row-major): each program transposes one [BM, BN] tile through shared
 * memory (BM * BN * 4 bytes of it), so BM = BN = 256 does not fit a block on any target. */
#pragma autotune key(M, N, x)
#pragma autotune config(BM=256, BN=256, num_warps=4)
#pragma autotune config(BM=16, BN=32, num_warps=2)
#pragma autotune config(BM=32, BN=32, num_warps=4, num_stages=3)
kernel transpose(any *out, const any *x, i32 M, i32 N, const i32 BM, const i32 BN)
{
    tile rm = program_id(0) * BM + arange(0, BM);
    tile rn = program_id(1) * BN + arange(0, BN);
    tile mask = (expand_dims(rm, 1) < M) & (expand_dims(rn, 0) < N);
    tile t = load(x + expand_dims(rm, 1) * N + expand_dims(rn, 0), mask, 0);
    tile back = (expand_dims(rn, 1) < N) & (expand_dims(rm, 0) < M);
    store(out + expand_dims(rn, 1) * M + expand_dims(rm, 0), trans(t), back);
}

/* out = alpha * x + y: the key is n; configs tried in order. */
#pragma autotune key(n)
#pragma autotune config(BLOCK=4096, num_warps=1)
#pragma autotune config(BLOCK=256, num_warps=2)
#pragma autotune config(BLOCK=1024, num_warps=4)
#pragma autotune config(BLOCK=2048, num_warps=8)
kernel axpy(f32 *out, const f32 *x, const f32 *y, f32 alpha, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    store(out + offs, alpha * load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
}
