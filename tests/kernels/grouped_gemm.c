/* Triton's grouped GEMM (tutorial 08) in the C syntax: one launch multiplies `group_size`
 * problems C_g = A_g @ B_g of their own sizes, the programs walking the tiles of every problem
 * in turn. The operands are reached through tables of addresses the host filled (one i64 per
 * problem and matrix, from a.data_ptr() or a.data.ptr), read as pointers of the element type
 * the kernel declares. Unlike the tutorial, M, N and K need not be multiples of the tiles: the
 * loads and the store are masked. Used by tests/test_grouped_gemm.py and its GPU twin. */

kernel grouped_matmul(const i64 *group_a_ptrs, const i64 *group_b_ptrs, const i64 *group_c_ptrs,
                      const i32 *group_gemm_sizes, const i32 *g_lds, i32 group_size,
                      const i32 NUM_SM, const i32 BM, const i32 BN, const i32 BK)
{
    i32 tile_idx = program_id(0);
    i32 last_problem_end = 0;
    for (i32 g = 0; g < group_size; g++) {
        i32 gm = group_gemm_sizes[g * 3];
        i32 gn = group_gemm_sizes[g * 3 + 1];
        i32 gk = group_gemm_sizes[g * 3 + 2];
        i32 num_n_tiles = cdiv(gn, BN);
        i32 num_tiles = cdiv(gm, BM) * num_n_tiles;
        while (tile_idx >= last_problem_end && tile_idx < last_problem_end + num_tiles) {
            i32 lda = g_lds[g * 3];
            i32 ldb = g_lds[g * 3 + 1];
            i32 ldc = g_lds[g * 3 + 2];
            const f16 *a = (const f16 *)group_a_ptrs[g];
            const f16 *b = (const f16 *)group_b_ptrs[g];
            f16 *c = (f16 *)group_c_ptrs[g];
            i32 tile_in_gemm = tile_idx - last_problem_end;
            tile rm = tile_in_gemm / num_n_tiles * BM + arange(0, BM);
            tile rn = tile_in_gemm % num_n_tiles * BN + arange(0, BN);
            tile rk = arange(0, BK);
            tile pa = a + expand_dims(rm, 1) * lda + expand_dims(rk, 0);
            tile pb = b + expand_dims(rk, 1) * ldb + expand_dims(rn, 0);
            f32 acc[BM][BN] = 0;
            for (i32 k = 0; k < gk; k += BK) {
                tile a_t = load(pa, (expand_dims(rm, 1) < gm) & (expand_dims(rk, 0) < gk - k), 0.0f);
                tile b_t = load(pb, (expand_dims(rk, 1) < gk - k) & (expand_dims(rn, 0) < gn), 0.0f);
                acc = dot(a_t, b_t, acc);
                pa += BK;
                pb += BK * ldb;
            }
            tile mask = (expand_dims(rm, 1) < gm) & (expand_dims(rn, 0) < gn);
            store(c + expand_dims(rm, 1) * ldc + expand_dims(rn, 0), (f16)acc, mask);
            tile_idx += NUM_SM;
        }
        last_problem_end = last_problem_end + num_tiles;
    }
}
