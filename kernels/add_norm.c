/* Residual add fused with a normalisation, forward and backward: h = x + residual, then layer
 * norm or RMS norm of h over each row, in one pass over the row. A transformer block's
 * "h = h + f(h); y = norm(h)" then reads its rows once instead of twice.
 *
 * Rows are the first dimension; the last is contiguous; every 2-D array has its own row stride
 * (in elements). Data are f16, bf16, f32 or f64; everything is computed in acc_t (f32; f64
 * for f64 data) and rounded once at each store; the statistics (mean, rstd) and the
 * weight-gradient partials are f32 (f64 for f64 data). One row is one tile of BLOCK >= n_cols
 * columns (a power of two). h is rounded to its dtype before it is normalised (ROUND: 1 for
 * f16 data, 2 for bf16, 0 for f32 and f64), so the norm the backward differentiates, from the
 * stored h, is the one the forward took.
 *
 *   add_layer_norm_fwd:  h = x + r,  mean, rstd = 1 / sqrt(var(h) + eps),
 *                        y = (h - mean) * rstd * w + b
 *   add_layer_norm_bwd:  hhat = (h - mean) * rstd, g = w * dy,
 *                        dh_total = rstd * (g - hhat * mean(g * hhat) - mean(g)) + dh
 *                        (the gradient of both x and r: dh is what reached h from its other
 *                        use, the residual stream), dw, db partial sums per program
 *   add_rms_norm_fwd:    h = x + r,  rstd = 1 / sqrt(mean(h^2) + eps),  y = h * rstd * w
 *   add_rms_norm_bwd:    dh_total = rstd * (g - hhat * mean(g * hhat)) + dh, dw partials
 *   column_sum:          out[j] = sum over p of part[p, j] (the partials of dw and db)
 *
 * Program p of a backward handles rows [p * rows_per_program, (p + 1) * rows_per_program) and
 * writes its dw (and db) sums to row p of the partials: no atomics, the same result each run.
 */

/* x + r, rounded as the h array stores it (ROUND: 0 none, 1 f16, 2 bf16) */
tile residual_sum(tile x, tile r, const i32 ROUND)
{
    tile s = (acc_t)x + (acc_t)r;
    if (ROUND == 1) {
        s = (acc_t)(f16)s;
    } else if (ROUND == 2) {
        s = (acc_t)(bf16)s;
    }
    return s;
}

kernel add_layer_norm_fwd(any *y, any *h, any *mean, any *rstd, const any *x, const any *r,
                          const any *w, const any *b, i32 n_cols, i32 x_stride, i32 r_stride,
                          i32 y_stride, i32 h_stride, f32 eps, const i32 ROUND,
                          const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile s = residual_sum(load(x + row * x_stride + cols, mask, 0.0f),
                          load(r + row * r_stride + cols, mask, 0.0f), ROUND);
    store(h + row * h_stride + cols, s, mask);
    tile mu = sum(s) / n_cols;
    tile centred = where(mask, s - mu, 0.0f);
    tile rs = rsqrt(sum(centred * centred) / n_cols + eps);
    tile wv = (acc_t)load(w + cols, mask, 0.0f);
    tile bv = (acc_t)load(b + cols, mask, 0.0f);
    store(y + row * y_stride + cols, centred * rs * wv + bv, mask);
    store(mean + row, mu);
    store(rstd + row, rs);
}

kernel add_layer_norm_bwd(any *dx, any *dw_part, any *db_part, const any *dy, const any *dh,
                          const any *h, const any *w, const any *mean, const any *rstd,
                          i32 n_rows, i32 n_cols, i32 dy_stride, i32 dh_stride, i32 h_stride,
                          i32 dx_stride, i32 rows_per_program, const i32 BLOCK)
{
    i32 pid = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile wv = (acc_t)load(w + cols, mask, 0.0f);
    acc_t dw_acc[BLOCK] = 0;
    acc_t db_acc[BLOCK] = 0;
    i32 first = pid * rows_per_program;
    for (i32 row = first; row < first + rows_per_program && row < n_rows; row++) {
        tile g = (acc_t)load(dy + row * dy_stride + cols, mask, 0.0f);
        tile hv = (acc_t)load(h + row * h_stride + cols, mask, 0.0f);
        tile rs = (acc_t)load(rstd + row);
        tile hhat = where(mask, (hv - (acc_t)load(mean + row)) * rs, 0.0f);
        tile wg = wv * g;
        tile c1 = sum(hhat * wg) / n_cols;
        tile c2 = sum(wg) / n_cols;
        tile carried = (acc_t)load(dh + row * dh_stride + cols, mask, 0.0f);
        store(dx + row * dx_stride + cols, (wg - hhat * c1 - c2) * rs + carried, mask);
        dw_acc += g * hhat;
        db_acc += g;
    }
    store(dw_part + pid * n_cols + cols, dw_acc, mask);
    store(db_part + pid * n_cols + cols, db_acc, mask);
}

kernel add_rms_norm_fwd(any *y, any *h, any *rstd, const any *x, const any *r, const any *w,
                        i32 n_cols, i32 x_stride, i32 r_stride, i32 y_stride, i32 h_stride,
                        f32 eps, const i32 ROUND, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile s = residual_sum(load(x + row * x_stride + cols, mask, 0.0f),
                          load(r + row * r_stride + cols, mask, 0.0f), ROUND);
    store(h + row * h_stride + cols, s, mask);
    tile rs = rsqrt(sum(s * s) / n_cols + eps);
    tile wv = (acc_t)load(w + cols, mask, 0.0f);
    store(y + row * y_stride + cols, s * rs * wv, mask);
    store(rstd + row, rs);
}

kernel add_rms_norm_bwd(any *dx, any *dw_part, const any *dy, const any *dh, const any *h,
                        const any *w, const any *rstd, i32 n_rows, i32 n_cols, i32 dy_stride,
                        i32 dh_stride, i32 h_stride, i32 dx_stride, i32 rows_per_program,
                        const i32 BLOCK)
{
    i32 pid = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile wv = (acc_t)load(w + cols, mask, 0.0f);
    acc_t dw_acc[BLOCK] = 0;
    i32 first = pid * rows_per_program;
    for (i32 row = first; row < first + rows_per_program && row < n_rows; row++) {
        tile g = (acc_t)load(dy + row * dy_stride + cols, mask, 0.0f);
        tile rs = (acc_t)load(rstd + row);
        tile hhat = (acc_t)load(h + row * h_stride + cols, mask, 0.0f) * rs;
        tile wg = wv * g;
        tile c1 = sum(hhat * wg) / n_cols;
        tile carried = (acc_t)load(dh + row * dh_stride + cols, mask, 0.0f);
        store(dx + row * dx_stride + cols, (wg - hhat * c1) * rs + carried, mask);
        dw_acc += g * hhat;
    }
    store(dw_part + pid * n_cols + cols, dw_acc, mask);
}

kernel column_sum(any *out, const any *part, i32 n_parts, i32 n_cols, const i32 BLOCK_P,
                  const i32 BLOCK_N)
{
    tile cols = expand_dims(program_id(0) * BLOCK_N + arange(0, BLOCK_N), 0);
    tile parts = expand_dims(arange(0, BLOCK_P), 1);
    tile acc = (acc_t)load(part + parts * n_cols + cols, (parts < n_parts) & (cols < n_cols), 0.0f);
    for (i32 c = 1; c * BLOCK_P < n_parts; c++) {
        tile p = c * BLOCK_P + parts;
        acc += (acc_t)load(part + p * n_cols + cols, (p < n_parts) & (cols < n_cols), 0.0f);
    }
    store(out + program_id(0) * BLOCK_N + arange(0, BLOCK_N), sum(acc, 0),
          program_id(0) * BLOCK_N + arange(0, BLOCK_N) < n_cols);
}
