/* Layer normalisation over the rows of a 2-D array, forward and backward.
 *
 * Rows are the first dimension. Each 2-D input has a row and a column stride (in elements;
 * a column stride of 1, the usual case, is specialised as a constant and gives vector loads);
 * outputs are contiguous along their rows. x, y, dy, dx, w, b, dw and db are f16, bf16 or f32
 * (each its own); mean and rstd are f32, one per row. Everything is computed in f32.
 *
 *   forward:   mean = sum(x) / n,  var = sum((x - mean)^2) / n,  rstd = 1 / sqrt(var + eps)
 *              y = (x - mean) * rstd * w + b
 *   backward:  xhat = (x - mean) * rstd,  g = w * dy
 *              dx = rstd * (g - xhat * sum(g * xhat) / n - sum(g) / n)
 *              dw = sum over rows of dy * xhat,  db = sum over rows of dy
 *
 * A program holds ROWS rows of BLOCK >= n_cols columns (a power of two) as one [ROWS, BLOCK]
 * tile: short rows put several rows in flight per program. The backward reads the weights with
 * each row (from L1: the same BLOCK columns every time), so they hold no registers across the
 * loop beside the dW/dB sums (ptxas: 114 registers instead of 127 at 8192 columns and 16
 * warps); the forward loads them after the row's reductions, where the row's registers are
 * partly free (Triton's order). The configs (ROWS and num_warps) are timed by the autotuner
 * per row length and power-of-two bucket of the row count (key(n_cols, pow2(n_rows)): 64 rows
 * and 8192 rows want different configs); teeny_tx.nn prunes those that would hold too few or
 * too many elements per thread.
 *
 * EVEN (a constexpr: teeny_tx.nn passes n_cols == BLOCK) makes the column mask a constant
 * true, so the per-element masks of where() and the masked loads and stores fold away
 * (ptxas, 4096 columns, 8 warps, f16: 632 -> 480 instructions, 48 -> 40 registers).
 *
 * dW and dB take two kernels and no atomics, as Triton's layer-norm tutorial reduces them:
 * program p of the G programs of layer_norm_bwd_dx handles the rows [p * R, (p + 1) * R),
 * R = cdiv(n_rows, G), ROWS at a time, keeps its share of dW and dB in f32 registers ([ROWS,
 * BLOCK], summed over its rows once at the end) and writes it to row p of the partial buffers
 * dw_part, db_part [G, n_cols]; layer_norm_bwd_dwdb then sums those rows, column block
 * by column block. teeny_tx.nn launches G = SMs * max(1, 16 / num_warps) programs (at most
 * cdiv(n_rows, ROWS)), about as many as are resident at once, as the tutorial sizes its
 * groups: each program's partial row costs 8 bytes per column, so fewer is less traffic.
 */

#pragma autotune key(n_cols, pow2(n_rows))
#pragma autotune config(ROWS=1, num_warps=4)
#pragma autotune config(ROWS=1, num_warps=8)
#pragma autotune config(ROWS=1, num_warps=16)
#pragma autotune config(ROWS=1, num_warps=32)
#pragma autotune config(ROWS=2, num_warps=4)
#pragma autotune config(ROWS=2, num_warps=8)
#pragma autotune config(ROWS=4, num_warps=4)
#pragma autotune config(ROWS=4, num_warps=8)
#pragma autotune config(ROWS=8, num_warps=8)
#pragma autotune config(ROWS=1, num_warps=2)
#pragma autotune config(ROWS=2, num_warps=2)
#pragma autotune config(ROWS=2, num_warps=16)
#pragma autotune config(ROWS=4, num_warps=16)
#pragma autotune config(ROWS=2, num_warps=32)
kernel layer_norm_fwd(any *y, any *mean, any *rstd, const any *x, const any *w, const any *b,
                      i32 n_rows, i32 n_cols, i32 x_stride, i32 x_step, i32 y_stride,
                      f32 eps, const i32 BLOCK, const i32 ROWS, const i32 EVEN)
{
    tile rows = program_id(0) * ROWS + arange(0, ROWS);
    tile cols = arange(0, BLOCK);
    tile col_mask = (cols < n_cols) | (EVEN != 0); /* EVEN: n_cols == BLOCK, no mask */
    tile row_mask = rows < n_rows;
    tile mask = expand_dims(row_mask, 1) & expand_dims(col_mask, 0);
    tile r2 = expand_dims(rows, 1);
    tile c2 = expand_dims(cols, 0);
    tile v = (acc_t)load(x + r2 * x_stride + c2 * x_step, mask, 0.0f);
    tile mu = sum(v, 1) / n_cols;
    tile centred = where(mask, v - expand_dims(mu, 1), 0.0f);
    tile r = rsqrt(sum(centred * centred, 1) / n_cols + eps);
    tile wv = expand_dims((acc_t)load(w + cols, col_mask, 0.0f), 0);
    tile bv = expand_dims((acc_t)load(b + cols, col_mask, 0.0f), 0);
    store(y + r2 * y_stride + c2, centred * expand_dims(r, 1) * wv + bv, mask);
    store(mean + rows, mu, row_mask);
    store(rstd + rows, r, row_mask);
}

#pragma autotune key(n_cols, pow2(n_rows))
#pragma autotune config(ROWS=1, num_warps=4, INTERLEAVE=0)
#pragma autotune config(ROWS=1, num_warps=8, INTERLEAVE=0)
#pragma autotune config(ROWS=1, num_warps=16, INTERLEAVE=0)
#pragma autotune config(ROWS=1, num_warps=32, INTERLEAVE=0)
#pragma autotune config(ROWS=2, num_warps=4, INTERLEAVE=0)
#pragma autotune config(ROWS=2, num_warps=8, INTERLEAVE=0)
#pragma autotune config(ROWS=4, num_warps=4, INTERLEAVE=0)
#pragma autotune config(ROWS=4, num_warps=8, INTERLEAVE=0)
#pragma autotune config(ROWS=1, num_warps=2, INTERLEAVE=0)
#pragma autotune config(ROWS=2, num_warps=16, INTERLEAVE=0)
#pragma autotune config(ROWS=1, num_warps=16, INTERLEAVE=1)
#pragma autotune config(ROWS=1, num_warps=32, INTERLEAVE=1)
#pragma autotune config(ROWS=2, num_warps=32, INTERLEAVE=0)
#pragma autotune config(ROWS=2, num_warps=32, INTERLEAVE=1)
#pragma autotune config(ROWS=1, num_warps=8, INTERLEAVE=1)
#pragma autotune config(ROWS=2, num_warps=8, INTERLEAVE=1)
#pragma autotune config(ROWS=4, num_warps=8, INTERLEAVE=1)
kernel layer_norm_bwd_dx(any *dx, any *dw_part, any *db_part, const any *dy, const any *x,
                         const any *w, const any *mean, const any *rstd, i32 n_rows, i32 n_cols,
                         i32 dy_stride, i32 dy_step, i32 x_stride, i32 x_step,
                         i32 dx_stride, const i32 BLOCK, const i32 ROWS, const i32 EVEN,
                         const i32 INTERLEAVE)
{
    i32 pid = program_id(0);
    tile cols = arange(0, BLOCK);
    tile col_mask = (cols < n_cols) | (EVEN != 0); /* EVEN: n_cols == BLOCK, no mask */
    tile c2 = expand_dims(cols, 0);
    acc_t dw_acc[ROWS][BLOCK] = 0;
    acc_t db_acc[ROWS][BLOCK] = 0;
    /* INTERLEAVE: rows pid * ROWS + k * G * ROWS (the programs in flight read neighbouring
     * rows); else the run [pid * R, (pid + 1) * R), R = cdiv(n_rows, G) */
    i32 per_program = (n_rows + num_programs(0) - 1) / num_programs(0);
    i32 first = INTERLEAVE != 0 ? pid * ROWS : pid * per_program;
    i32 last = INTERLEAVE != 0 ? n_rows : minimum(first + per_program, n_rows);
    i32 step = INTERLEAVE != 0 ? num_programs(0) * ROWS : ROWS;
    /* the next ROWS rows of dy and x are loaded before this ROWS are reduced (a software
     * pipeline of one stage, in registers): their reads overlap the reductions' barriers */
    tile next = expand_dims(first + arange(0, ROWS), 1);
    tile next_mask = (next < last) & expand_dims(col_mask, 0);
    tile dy_next = load(dy + next * dy_stride + c2 * dy_step, next_mask, 0.0f);
    tile x_next = load(x + next * x_stride + c2 * x_step, next_mask, 0.0f);
    for (i32 row = first; row < last; row += step) {
        tile rows = row + arange(0, ROWS);
        tile row_mask = rows < last;
        tile mask = expand_dims(row_mask, 1) & expand_dims(col_mask, 0);
        tile r2 = expand_dims(rows, 1);
        tile g = (acc_t)dy_next;
        tile v = (acc_t)x_next;
        next = r2 + step;
        next_mask = (next < last) & expand_dims(col_mask, 0);
        dy_next = load(dy + next * dy_stride + c2 * dy_step, next_mask, 0.0f);
        x_next = load(x + next * x_stride + c2 * x_step, next_mask, 0.0f);
        tile mu = expand_dims(load(mean + rows, row_mask, 0.0f), 1);
        tile r = expand_dims(load(rstd + rows, row_mask, 0.0f), 1);
        tile xhat = where(mask, (v - mu) * r, 0.0f);
        tile wv = expand_dims((acc_t)load(w + cols, col_mask, 0.0f), 0);  /* L1-resident */
        tile wg = wv * g;
        tile c1 = expand_dims(sum(xhat * wg, 1) / n_cols, 1);
        tile c0 = expand_dims(sum(wg, 1) / n_cols, 1);
        store(dx + r2 * dx_stride + c2, (wg - (xhat * c1 + c0)) * r, mask);
        dw_acc += g * xhat;
        db_acc += g;
    }
    store(dw_part + pid * n_cols + cols, sum(dw_acc, 0), col_mask);
    store(db_part + pid * n_cols + cols, sum(db_acc, 0), col_mask);
}

/* dw[j] = sum over p of dw_part[p, j] (and db likewise); one program per BLOCK_N columns,
 * reading BLOCK_P partial rows at a time. */
kernel layer_norm_bwd_dwdb(any *dw, any *db, const any *dw_part, const any *db_part,
                           i32 n_parts, i32 n_cols, const i32 BLOCK_P, const i32 BLOCK_N)
{
    tile cols = program_id(0) * BLOCK_N + arange(0, BLOCK_N);
    tile parts = expand_dims(arange(0, BLOCK_P), 1);
    acc_t dw_acc[BLOCK_P][BLOCK_N] = 0;
    acc_t db_acc[BLOCK_P][BLOCK_N] = 0;
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
