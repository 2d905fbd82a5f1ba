/* A pipelined dot loop whose every user name is one the compiler generates or once generated
 * (tests/test_pass_names.py, tests/gpu/test_names_gpu.py). A parameter `stage` offsets A and
 * `k_ahead` offsets B, both inside the addresses the pipeline copies ahead; the K-loop variable
 * is `stage_ahead`, the operands `a_t_stages` and `a_t_tile`, the accumulator `acc_0`. Before
 * generated names had a prefix of their own, the prologue's `for (int stage = 0; ...)` shadowed
 * the parameter and NVRTC compiled a kernel reading the wrong addresses.
 *
 * C [M, N] (f32, row-major) = A [M, K] @ B [K, N], A at a + stage (row stride K), B at
 * b + k_ahead (row stride N).
 */

kernel names(f32 *c, const f16 *a, const f16 *b, i32 M, i32 N, i32 K, i32 stage, i32 k_ahead,
             const i32 BM, const i32 BN, const i32 BK)
{
    tile i = expand_dims(program_id(0) * BM + arange(0, BM), 1);
    tile L0 = expand_dims(program_id(1) * BN + arange(0, BN), 0);
    tile load_0 = expand_dims(arange(0, BK), 0);
    tile mask = expand_dims(arange(0, BK), 1);
    f32 acc_0[BM][BN] = 0;
    for (i32 stage_ahead = 0; stage_ahead < K; stage_ahead += BK) {
        tile a_t_stages = load(a + stage + i * K + (load_0 + stage_ahead),
                               (i < M) & (load_0 + stage_ahead < K), 0);
        tile a_t_tile = load(b + k_ahead + (mask + stage_ahead) * N + L0,
                             (mask + stage_ahead < K) & (L0 < N), 0);
        acc_0 = dot(a_t_stages, a_t_tile, acc_0);
    }
    tile value = acc_0;
    store(c + i * N + L0, value, (i < M) & (L0 < N));
}
