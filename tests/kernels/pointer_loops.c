/* Matrix products written as Triton's tutorial writes them: pointer tiles advanced inside the K loop
 * (mm_advance), and a pointer tile passed through trans() (mm_trans_ptr). Used by
 * tests/test_hopper_pointer_loops.py and tests/gpu/test_matmul_gpu.py. */

kernel mm_advance(f32 *c, const f16 *a, const f16 *b, i32 M, i32 N, i32 K,
                  i32 sam, i32 sak, i32 sbk, i32 sbn, i32 scm, i32 scn,
                  const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = program_id(0) * BM + arange(0, BM);
    tile rn = program_id(1) * BN + arange(0, BN);
    tile rk = arange(0, BK);
    tile pa = a + expand_dims(rm, 1) * sam + expand_dims(rk, 0) * sak;
    tile pb = b + expand_dims(rk, 1) * sbk + expand_dims(rn, 0) * sbn;
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(pa, (expand_dims(rm, 1) < M) & (expand_dims(rk, 0) < K - k), 0.0f);
        tile b_t = load(pb, (expand_dims(rk, 1) < K - k) & (expand_dims(rn, 0) < N), 0.0f);
        acc = dot(a_t, b_t, acc);
        pa += BK * sak;
        pb += BK * sbk;
    }
    tile mask = (expand_dims(rm, 1) < M) & (expand_dims(rn, 0) < N);
    store(c + expand_dims(rm, 1) * scm + expand_dims(rn, 0) * scn, acc, mask);
}

kernel mm_trans_ptr(f32 *c, const f16 *a, const f16 *b, i32 M, i32 N, i32 K,
                    i32 sam, i32 sak, i32 sbk, i32 sbn, i32 scm, i32 scn,
                    const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = program_id(0) * BM + arange(0, BM);
    tile rn = program_id(1) * BN + arange(0, BN);
    tile rk = arange(0, BK);
    tile pat = a + expand_dims(rk, 1) * sak + expand_dims(rm, 0) * sam;   /* [BK, BM] */
    tile pa = trans(pat);                                                /* [BM, BK] */
    tile pb = b + expand_dims(rk, 1) * sbk + expand_dims(rn, 0) * sbn;
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(pa + k * sak, (expand_dims(rm, 1) < M) & (expand_dims(rk, 0) < K - k), 0.0f);
        tile b_t = load(pb + k * sbk, (expand_dims(rk, 1) < K - k) & (expand_dims(rn, 0) < N), 0.0f);
        acc = dot(a_t, b_t, acc);
    }
    tile mask = (expand_dims(rm, 1) < M) & (expand_dims(rn, 0) < N);
    store(c + expand_dims(rm, 1) * scm + expand_dims(rn, 0) * scn, acc, mask);
}

/* Pointer tiles the induction rewrite must leave alone or handle: pa read after the loop (its
 * advanced value is the result), a continue that skips an increment, a loop starting at k0 with
 * an increment that is not STEP * x, and a scalar increment changed in the loop. */
kernel advance_cases(f32 *out, const f32 *x, i32 n, i32 stride, const i32 CASE, const i32 B)
{
    tile r = arange(0, B);
    tile p = x + r;
    f32 acc[B] = 0;
    i32 inc = stride;
    if (CASE == 0) {
        for (i32 k = 0; k < n; k += 2) {
            acc += load(p, r < 1000000, 0.0f);
            p += stride;
        }
        acc += load(p, r < 1000000, 0.0f);       /* read after the loop: not rewritten */
    } else if (CASE == 1) {
        for (i32 k = 0; k < n; k += 1) {
            if (k == 2) {
                continue;                          /* skips the increment: not rewritten */
            }
            acc += load(p, r < 1000000, 0.0f);
            p += stride;
        }
    } else if (CASE == 2) {
        for (i32 k = 3; k < n; k += 3) {
            acc += load(p, r < 1000000, 0.0f);     /* rewritten: p + ((k - 3) / 3) * stride */
            p += stride;
        }
    } else {
        for (i32 k = 0; k < n; k += 1) {
            acc += load(p, r < 1000000, 0.0f);
            inc = inc + 1;
            p += inc;                              /* the increment changes: not rewritten */
        }
    }
    store(out + r, acc);
}
