/* Softmax of BM rows at a time: one program owns a [BM, BN] block of rows. */
kernel softmax_rows(f32 *out, const f32 *in, i32 n_rows, i32 n_cols, i32 stride,
                    const i32 BM, const i32 BN)
{
    tile rows = program_id(0) * BM + arange(0, BM);        /* i32[BM]     */
    tile cols = arange(0, BN);                             /* i32[BN]     */
    tile offs = expand_dims(rows, 1) * stride + expand_dims(cols, 0);   /* [BM, BN] */
    tile mask = (expand_dims(rows, 1) < n_rows) & (expand_dims(cols, 0) < n_cols);
    tile x = load(in + offs, mask, -INF);                  /* f32[BM, BN] */
    tile e = exp(x - max(x, 1, 1));                        /* row max, kept as [BM, 1] */
    store(out + offs, e / sum(e, 1, 1), mask);
}
