/* out[i, j] = in[i, j] for an M x N matrix given by its strides (in elements). */
kernel copy2d(f32 *out, const f32 *in, i32 M, i32 N, i32 stride_m, i32 stride_n,
              const i32 BM, const i32 BN)
{
    tile rows = expand_dims(program_id(0) * BM + arange(0, BM), 1);   /* [BM, 1] */
    tile cols = expand_dims(program_id(1) * BN + arange(0, BN), 0);   /* [1, BN] */
    tile mask = (rows < M) & (cols < N);                               /* [BM, BN] */
    tile x = load(in + rows * stride_m + cols * stride_n, mask);
    store(out + rows * N + cols, x, mask);
}
