/* RMS normalisation over the rows of a 2-D array, forward and backward.
 *
 * Rows are the first dimension; the last is contiguous; each 2-D array has its own row stride
 * (in elements). x, y, dy, dx, w and dw are f16, bf16 or f32 (each its own); rstd is f32, one
 * per row. Everything is computed in f32; one row is one tile of BLOCK >= n_cols columns (a
 * power of two).
 *
 *   forward:   rstd = 1 / sqrt(sum(x^2) / n + eps),  y = x * rstd * w
 *   backward:  xhat = x * rstd,  g = w * dy
 *              dx = rstd * (g - xhat * sum(g * xhat) / n)
 *              dw = sum over rows of dy * xhat
 *
 * dW takes two kernels and no atomics, as in layernorm.c: program p of rms_norm_bwd_dx keeps
 * the dW of its rows [p * rows_per_program, (p + 1) * rows_per_program) in f32 registers and
 * writes it to row p of dw_part [programs, n_cols]; rms_norm_bwd_dw sums those rows.
 */

kernel rms_norm_fwd(any *y, f32 *rstd, const any *x, const any *w, i32 n_cols, i32 x_stride,
                    i32 y_stride, f32 eps, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile v = (f32)load(x + row * x_stride + cols, mask, 0.0f);
    f32 r = rsqrt(sum(v * v) / n_cols + eps);
    tile wv = (f32)load(w + cols, mask, 0.0f);
    store(y + row * y_stride + cols, v * r * wv, mask);
    store(rstd + row, r);
}

kernel rms_norm_bwd_dx(any *dx, f32 *dw_part, const any *dy, const any *x, const any *w,
                       const f32 *rstd, i32 n_rows, i32 n_cols, i32 dy_stride, i32 x_stride,
                       i32 dx_stride, i32 rows_per_program, const i32 BLOCK)
{
    i32 pid = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile wv = (f32)load(w + cols, mask, 0.0f);
    f32 dw_acc[BLOCK] = 0;
    i32 first = pid * rows_per_program;
    for (i32 row = first; row < first + rows_per_program && row < n_rows; row++) {
        tile g = (f32)load(dy + row * dy_stride + cols, mask, 0.0f);
        f32 r = load(rstd + row);
        tile xhat = (f32)load(x + row * x_stride + cols, mask, 0.0f) * r;
        tile wg = wv * g;
        f32 c1 = sum(xhat * wg) / n_cols;
        store(dx + row * dx_stride + cols, (wg - xhat * c1) * r, mask);
        dw_acc += g * xhat;
    }
    store(dw_part + pid * n_cols + cols, dw_acc, mask);
}

/* dw[j] = sum over p of dw_part[p, j]; one program per BLOCK_N columns, reading BLOCK_P
 * partial rows at a time. */
kernel rms_norm_bwd_dw(any *dw, const f32 *dw_part, i32 n_parts, i32 n_cols, const i32 BLOCK_P,
                       const i32 BLOCK_N)
{
    tile cols = program_id(0) * BLOCK_N + arange(0, BLOCK_N);
    tile parts = expand_dims(arange(0, BLOCK_P), 1);
    f32 acc[BLOCK_P][BLOCK_N] = 0;
    for (i32 c = 0; c * BLOCK_P < n_parts; c++) {
        tile p = c * BLOCK_P + parts;
        tile mask = (p < n_parts) & (expand_dims(cols, 0) < n_cols);
        acc += load(dw_part + p * n_cols + expand_dims(cols, 0), mask, 0.0f);
    }
    store(dw + cols, sum(acc, 0), cols < n_cols);
}
