/* Layer normalisation over the rows of a 2-D array, forward and backward.
 *
 * Rows are the first dimension; the last is contiguous; each 2-D array has its own row stride
 * (in elements). x, y, dy, dx, w, b, dw and db are f16, bf16 or f32 (each its own); mean and
 * rstd are f32, one per row. Everything is computed in f32; one row is one tile of BLOCK >=
 * n_cols columns (a power of two).
 *
 *   forward:   mean = sum(x) / n,  var = sum((x - mean)^2) / n,  rstd = 1 / sqrt(var + eps)
 *              y = (x - mean) * rstd * w + b
 *   backward:  xhat = (x - mean) * rstd,  g = w * dy
 *              dx = rstd * (g - xhat * sum(g * xhat) / n - sum(g) / n)
 *              dw = sum over rows of dy * xhat,  db = sum over rows of dy
 *
 * dW and dB take two kernels and no atomics: program p of layer_norm_bwd_dx handles the rows
 * [p * rows_per_program, (p + 1) * rows_per_program), keeps its share of dW and dB in f32
 * registers and writes it to row p of the partial buffers dw_part, db_part [programs, n_cols];
 * layer_norm_bwd_dwdb then sums those rows, column block by column block.
 */

kernel layer_norm_fwd(any *y, f32 *mean, f32 *rstd, const any *x, const any *w, const any *b,
                      i32 n_cols, i32 x_stride, i32 y_stride, f32 eps, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile v = (f32)load(x + row * x_stride + cols, mask, 0.0f);
    f32 mu = sum(v) / n_cols;
    tile centred = where(mask, v - mu, 0.0f);
    f32 r = rsqrt(sum(centred * centred) / n_cols + eps);
    tile wv = (f32)load(w + cols, mask, 0.0f);
    tile bv = (f32)load(b + cols, mask, 0.0f);
    store(y + row * y_stride + cols, centred * r * wv + bv, mask);
    store(mean + row, mu);
    store(rstd + row, r);
}

kernel layer_norm_bwd_dx(any *dx, f32 *dw_part, f32 *db_part, const any *dy, const any *x,
                         const any *w, const f32 *mean, const f32 *rstd, i32 n_rows, i32 n_cols,
                         i32 dy_stride, i32 x_stride, i32 dx_stride, i32 rows_per_program,
                         const i32 BLOCK)
{
    i32 pid = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile wv = (f32)load(w + cols, mask, 0.0f);
    f32 dw_acc[BLOCK] = 0;
    f32 db_acc[BLOCK] = 0;
    i32 first = pid * rows_per_program;
    for (i32 row = first; row < first + rows_per_program && row < n_rows; row++) {
        tile g = (f32)load(dy + row * dy_stride + cols, mask, 0.0f);
        tile v = (f32)load(x + row * x_stride + cols, mask, 0.0f);
        f32 r = load(rstd + row);
        tile xhat = where(mask, (v - load(mean + row)) * r, 0.0f);
        tile wg = wv * g;
        f32 c1 = sum(xhat * wg) / n_cols;
        f32 c2 = sum(wg) / n_cols;
        store(dx + row * dx_stride + cols, (wg - (xhat * c1 + c2)) * r, mask);
        dw_acc += g * xhat;
        db_acc += g;
    }
    store(dw_part + pid * n_cols + cols, dw_acc, mask);
    store(db_part + pid * n_cols + cols, db_acc, mask);
}

/* dw[j] = sum over p of dw_part[p, j] (and db likewise); one program per BLOCK_N columns,
 * reading BLOCK_P partial rows at a time. */
kernel layer_norm_bwd_dwdb(any *dw, any *db, const f32 *dw_part, const f32 *db_part,
                           i32 n_parts, i32 n_cols, const i32 BLOCK_P, const i32 BLOCK_N)
{
    tile cols = program_id(0) * BLOCK_N + arange(0, BLOCK_N);
    tile parts = expand_dims(arange(0, BLOCK_P), 1);
    f32 dw_acc[BLOCK_P][BLOCK_N] = 0;
    f32 db_acc[BLOCK_P][BLOCK_N] = 0;
    for (i32 c = 0; c * BLOCK_P < n_parts; c++) {
        tile p = c * BLOCK_P + parts;
        tile mask = (p < n_parts) & (expand_dims(cols, 0) < n_cols);
        tile offs = p * n_cols + expand_dims(cols, 0);
        dw_acc += load(dw_part + offs, mask, 0.0f);
        db_acc += load(db_part + offs, mask, 0.0f);
    }
    store(dw + cols, sum(dw_acc, 0), cols < n_cols);
    store(db + cols, sum(db_acc, 0), cols < n_cols);
}
