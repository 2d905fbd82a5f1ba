/* Fragments quoted by the language guide (docs/language.md), in kernels that compile and run. */
tile softplus(tile x, f32 beta)
{
    tile bx = beta * x;
    return where(bx > 20.0f, x, log(1.0f + exp(bx)) / beta);
}

/* out[row, :] = softplus(in[row, :]) + the zero tiles below; one program per row. */
kernel declarations(f32 *out, const f32 *in, i32 n_cols, i32 stride, const i32 BLOCK,
                    const i32 BM, const i32 BN)
{
    i32 pid = program_id(0);
    i32 row = pid;
    tile offs = pid * BLOCK + arange(0, BLOCK);   /* inferred: i32[BLOCK] */
    f32 acc[BLOCK] = 0;                            /* typed, filled with 0 */
    f32 acc2[BLOCK];                               /* typed, zero-filled */
    f32 acc3[BM][BN] = 0;                          /* typed, rank 2 */
    tile cols = arange(0, BLOCK);      /* BLOCK = 1024 covers n_cols <= 1024 */
    tile x = load(in + row * stride + cols, cols < n_cols, 0.0f);
    store(out + row * stride + cols, softplus(x, 1.0f) + acc + acc2 + sum(acc3) + 0 * offs,
          cols < n_cols);
}

/* The grouped program order of a matrix product: program p's tile (pid_m, pid_n). */
kernel grouped(i32 *tile_m, i32 *tile_n, i32 M, i32 N, const i32 BM, const i32 BN,
               const i32 GROUP_M)
{
    i32 pid_m = group_pid_m(program_id(0), cdiv(M, BM), cdiv(N, BN), GROUP_M);
    i32 pid_n = group_pid_n(program_id(0), cdiv(M, BM), cdiv(N, BN), GROUP_M);
    store(tile_m + program_id(0), pid_m);
    store(tile_n + program_id(0), pid_n);
}
