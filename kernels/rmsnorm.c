/* RMS normalisation over the rows of a 2-D array, forward and backward.
 *
 * Rows are the first dimension. Each 2-D input has a row and a column stride (in elements;
 * a column stride of 1, the usual case, is specialised as a constant and gives vector loads);
 * outputs are contiguous along their rows. x, y, dy, dx, w and dw are f16, bf16 or f32 (each
 * its own); rstd is f32, one per row. Everything is computed in f32.
 *
 *   forward:   rstd = 1 / sqrt(sum(x^2) / n + eps),  y = x * rstd * w
 *   backward:  xhat = x * rstd,  g = w * dy
 *              dx = rstd * (g - xhat * sum(g * xhat) / n)
 *              dw = sum over rows of dy * xhat
 *
 * As in layernorm.c: a program holds ROWS rows of BLOCK >= n_cols columns (a power of two) as
 * one [ROWS, BLOCK] tile (the forward loads the weights after the reductions, the backward
 * with each row, from L1); ROWS and num_warps are the autotuner's configs; EVEN (n_cols ==
 * BLOCK) folds the column mask away. dW
 * takes two kernels and no atomics: program p of the G of rms_norm_bwd_dx keeps the dW of its
 * rows [p * R, (p + 1) * R), R = cdiv(n_rows, G), in f32 registers and writes it to row p of
 * dw_part [G, n_cols]; rms_norm_bwd_dw sums those rows.
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
kernel rms_norm_fwd(any *y, any *rstd, const any *x, const any *w, i32 n_rows, i32 n_cols,
                    i32 x_stride, i32 x_step, i32 y_stride, f32 eps, const i32 BLOCK,
                    const i32 ROWS, const i32 EVEN)
{
    tile rows = program_id(0) * ROWS + arange(0, ROWS);
    tile cols = arange(0, BLOCK);
    tile col_mask = (cols < n_cols) | (EVEN != 0); /* EVEN: n_cols == BLOCK, no mask */
    tile row_mask = rows < n_rows;
    tile mask = expand_dims(row_mask, 1) & expand_dims(col_mask, 0);
    tile r2 = expand_dims(rows, 1);
    tile c2 = expand_dims(cols, 0);
    tile v = (acc_t)load(x + r2 * x_stride + c2 * x_step, mask, 0.0f);
    tile r = rsqrt(sum(v * v, 1) / n_cols + eps);
    tile wv = expand_dims((acc_t)load(w + cols, col_mask, 0.0f), 0);
    store(y + r2 * y_stride + c2, v * expand_dims(r, 1) * wv, mask);
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
kernel rms_norm_bwd_dx(any *dx, any *dw_part, const any *dy, const any *x, const any *w,
                       const any *rstd, i32 n_rows, i32 n_cols, i32 dy_stride, i32 dy_step,
                       i32 x_stride, i32 x_step, i32 dx_stride, const i32 BLOCK,
                       const i32 ROWS, const i32 EVEN, const i32 INTERLEAVE)
{
    i32 pid = program_id(0);
    tile cols = arange(0, BLOCK);
    tile col_mask = (cols < n_cols) | (EVEN != 0); /* EVEN: n_cols == BLOCK, no mask */
    tile c2 = expand_dims(cols, 0);
    acc_t dw_acc[ROWS][BLOCK] = 0;
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
        tile xv = (acc_t)x_next;
        next = r2 + step;
        next_mask = (next < last) & expand_dims(col_mask, 0);
        dy_next = load(dy + next * dy_stride + c2 * dy_step, next_mask, 0.0f);
        x_next = load(x + next * x_stride + c2 * x_step, next_mask, 0.0f);
        tile r = expand_dims(load(rstd + rows, row_mask, 0.0f), 1);
        tile xhat = xv * r;
        tile wv = expand_dims((acc_t)load(w + cols, col_mask, 0.0f), 0);  /* L1-resident */
        tile wg = wv * g;
        tile c1 = expand_dims(sum(xhat * wg, 1) / n_cols, 1);
        store(dx + r2 * dx_stride + c2, (wg - xhat * c1) * r, mask);
        dw_acc += g * xhat;
    }
    store(dw_part + pid * n_cols + cols, sum(dw_acc, 0), col_mask);
}

/* dw[j] = sum over p of dw_part[p, j]; one program per BLOCK_N columns, reading BLOCK_P
 * partial rows at a time. */
kernel rms_norm_bwd_dw(any *dw, const any *dw_part, i32 n_parts, i32 n_cols, const i32 BLOCK_P,
                       const i32 BLOCK_N)
{
    tile cols = program_id(0) * BLOCK_N + arange(0, BLOCK_N);
    tile parts = expand_dims(arange(0, BLOCK_P), 1);
    acc_t acc[BLOCK_P][BLOCK_N] = 0;
    for (i32 c = 0; c * BLOCK_P < n_parts; c++) {
        tile p = c * BLOCK_P + parts;
        tile mask = (p < n_parts) & (expand_dims(cols, 0) < n_cols);
        acc += load(dw_part + p * n_cols + expand_dims(cols, 0), mask, 0.0f);
    }
    store(dw + cols, sum(acc, 0), cols < n_cols);
}
