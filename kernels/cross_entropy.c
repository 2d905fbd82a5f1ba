/* Cross-entropy of rows of logits against class indices, forward and backward, with
 * ignore_index and the mean over the rows that are not ignored.
 *
 * logits [rows, n_cols] (f16, bf16 or f32; row and column strides in elements, a column stride
 * of 1 specialised as a constant: vector loads);
 * targets [rows] i64; per-row loss and lse [rows] f32. Everything is computed in f32.
 *
 *   cross_entropy_fwd:   lse = logsumexp(logits[row]); loss = lse - logits[row, target], 0 for a
 *                        row whose target is ignore_index, NaN for a target outside [0, n_cols)
 *                        (f64 logits; cross_entropy_chunks + cross_entropy_rows for the others)
 *   cross_entropy_mean:  loss_mean = sum(loss) / count, count = rows not ignored (one program;
 *                        0 / 0 = NaN when every row is ignored, as torch)
 *   cross_entropy_count: count alone, for the backward
 *   cross_entropy_bwd:   dlogits = (exp(logits - lse) - onehot(target)) * grad / count, 0 on
 *                        ignored rows; program (row, chunk) writes BLOCK columns of one row
 *
 * The row kernels' BLOCK and num_warps are the autotuner's, per row length (teeny_tx.nn prunes
 * the BLOCKs longer than a row needs).
 */

/* logsumexp of a row of n_cols elements, read in chunks of BLOCK (online softmax): each lane
 * keeps a running maximum m and the sum s of exp(x - m), with one exp per element (see
 * kernels/softmax.c, which has the same helper). Loops step by chunk number so that the
 * compiler sees aligned chunks (vector loads). */
acc_t row_logsumexp(tile row, i32 n_cols, i32 step, const i32 BLOCK)
{
    tile cols = arange(0, BLOCK);
    acc_t m[BLOCK] = -INF;
    acc_t s[BLOCK] = 0;
    for (i32 c = 0; c * BLOCK < n_cols; c++) {
        tile offs = c * BLOCK + cols;
        tile x = (acc_t)load(row + offs * step, offs < n_cols, -INF);
        tile e = exp(-abs(x - m));
        s = where(x > m, s * e + 1.0f, where(x == -INF, s, s + e));
        m = maximum(m, x);
    }
    acc_t mx = max(m);
    return mx + log(sum(s * exp(m - mx)));
}

/* The number of targets[0 .. n_rows) that are not ignore_index, read BLOCK at a time. */
acc_t count_kept(const i64 *targets, i32 n_rows, i64 ignore_index, const i32 BLOCK)
{
    tile lanes = arange(0, BLOCK);
    i32 kept[BLOCK] = 0;
    for (i32 c = 0; c * BLOCK < n_rows; c++) {
        tile rows = c * BLOCK + lanes;
        tile t = load(targets + rows, rows < n_rows, ignore_index);
        kept += (i32)(t != ignore_index);
    }
    return (acc_t)sum(kept);
}

#pragma autotune key(n_cols)
#pragma autotune config(BLOCK=4096, num_warps=16)
#pragma autotune config(BLOCK=4096, num_warps=8)
#pragma autotune config(BLOCK=8192, num_warps=16)
#pragma autotune config(BLOCK=8192, num_warps=32)
#pragma autotune config(BLOCK=2048, num_warps=8)
#pragma autotune config(BLOCK=2048, num_warps=4)
#pragma autotune config(BLOCK=1024, num_warps=4)
#pragma autotune config(BLOCK=16384, num_warps=32)
kernel cross_entropy_fwd(any *loss, any *lse, const any *logits, const i64 *targets, i32 n_cols,
                         i32 stride, i32 step, i64 ignore_index, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile x = logits + row * stride;
    acc_t l = row_logsumexp(x, n_cols, step, BLOCK);
    i64 t = load(targets + row);
    bool inside = t >= 0 && t < n_cols;
    acc_t picked = (acc_t)load(x + t * step, inside, 0.0f);
    store(lse + row, l);
    store(loss + row, t == ignore_index ? 0.0f : (inside ? l - picked : NAN));
}

/* ---- forward over chunks: a program per (row, chunk); the row's last one combines -------- */

/* (max, sum of exp(x - max)) of a chunk of f32 (masked lanes -INF) packed into 64 bits, the
 * max's bits high, the sum's low: as kernels/softmax.c's chunk_stats (never 0 once written). */
i64 chunk_stats(tile x)
{
    f32 m = max(x);
    f32 s = m == -INF ? 0.0f : sum(exp(x - m));
    return (i64)(((u64)bitcast(m, u32) << 32) | (u64)bitcast(s, u32));
}

/* cross_entropy_fwd's result (lse, loss per row) for f16, bf16 and f32 logits in two kernels:
 * cross_entropy_chunks reads the logits with one program per (row, chunk), all the device's
 * memory parallelism, no loop over the row, and no program waits for another: program
 * row * n_chunks + chunk writes its chunk's statistics into slots[row, chunk];
 * cross_entropy_rows then combines each row's slots (ROWS rows a program, from the previous
 * kernel's writes: no atomics), picks the target's logit and writes lse and loss. slots
 * [rows, n_chunks] i64 needs no initial value. */
#pragma autotune key(n_cols)
#pragma autotune config(CHUNK=4096, num_warps=4)
#pragma autotune config(CHUNK=4096, num_warps=8)
#pragma autotune config(CHUNK=8192, num_warps=8)
#pragma autotune config(CHUNK=8192, num_warps=16)
#pragma autotune config(CHUNK=2048, num_warps=4)
#pragma autotune config(CHUNK=2048, num_warps=2)
#pragma autotune config(CHUNK=16384, num_warps=16)
kernel cross_entropy_chunks(i64 *slots, const any *logits, i32 n_cols, i32 stride, i32 step,
                            const i32 CHUNK)
{
    i32 n_chunks = (n_cols + CHUNK - 1) / CHUNK;
    i32 row = program_id(0) / n_chunks;
    i32 chunk = program_id(0) % n_chunks;
    tile offs = chunk * CHUNK + arange(0, CHUNK);
    tile x = (f32)load(logits + row * stride + offs * step, offs < n_cols, -INF);
    store(slots + program_id(0), chunk_stats(x));
}

kernel cross_entropy_rows(any *loss, any *lse, const i64 *slots, const any *logits,
                          const i64 *targets, i32 n_rows, i32 n_cols, i32 n_chunks, i32 stride,
                          i32 step, i64 ignore_index, const i32 ROWS, const i32 SLOTS)
{
    tile rows = program_id(0) * ROWS + arange(0, ROWS);
    tile row_ok = rows < n_rows;
    tile lanes = expand_dims(arange(0, SLOTS), 0);
    tile live = expand_dims(row_ok, 1) & (lanes < n_chunks);
    tile seen = load(slots + expand_dims(rows, 1) * n_chunks + lanes, live, (i64)0);
    tile m = bitcast((u32)((u64)seen >> 32), f32);
    tile s = bitcast((u32)seen, f32);
    tile mx = max(where(live, m, -INF), 1);
    tile terms = where(live & (s != 0.0f), s * exp(m - expand_dims(mx, 1)), 0.0f);
    tile l = mx + log(sum(terms, 1)); /* NaN stays NaN */
    tile t = load(targets + rows, row_ok, ignore_index);
    tile inside = (t >= 0) & (t < n_cols);
    tile picked = (f32)load(logits + rows * stride + t * step, row_ok & inside, 0.0f);
    store(lse + rows, l, row_ok);
    store(loss + rows, where(t == ignore_index, 0.0f, where(inside, l - picked, NAN)), row_ok);
}

kernel cross_entropy_mean(any *loss_mean, any *count, const any *loss, const i64 *targets,
                          i32 n_rows, i64 ignore_index, const i32 BLOCK)
{
    tile lanes = arange(0, BLOCK);
    acc_t total[BLOCK] = 0;
    for (i32 c = 0; c * BLOCK < n_rows; c++) {
        tile rows = c * BLOCK + lanes;
        total += load(loss + rows, rows < n_rows, 0.0f);
    }
    acc_t n = count_kept(targets, n_rows, ignore_index, BLOCK);
    store(count, n);
    store(loss_mean, sum(total) / n);
}

kernel cross_entropy_count(any *count, const i64 *targets, i32 n_rows, i64 ignore_index,
                           const i32 BLOCK)
{
    store(count, count_kept(targets, n_rows, ignore_index, BLOCK));
}

#pragma autotune key(n_cols)
#pragma autotune config(BLOCK=4096, num_warps=16)
#pragma autotune config(BLOCK=4096, num_warps=8)
#pragma autotune config(BLOCK=8192, num_warps=16)
#pragma autotune config(BLOCK=8192, num_warps=32)
#pragma autotune config(BLOCK=2048, num_warps=8)
#pragma autotune config(BLOCK=2048, num_warps=4)
#pragma autotune config(BLOCK=1024, num_warps=4)
#pragma autotune config(BLOCK=16384, num_warps=32)
#pragma autotune config(BLOCK=4096, num_warps=4)
#pragma autotune config(BLOCK=2048, num_warps=2)
#pragma autotune config(BLOCK=1024, num_warps=2)
kernel cross_entropy_bwd(any *dlogits, const any *logits, const i64 *targets, const any *lse,
                         const any *count, i32 n_cols, i32 stride, i32 step, i32 d_stride,
                         i64 ignore_index, f32 grad, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = program_id(1) * BLOCK + arange(0, BLOCK);
    tile mask = cols < n_cols;
    i64 t = load(targets + row);
    if (t == ignore_index) {
        store(dlogits + row * d_stride + cols, 0.0f, mask);
        return;
    }
    tile x = (acc_t)load(logits + row * stride + cols * step, mask, 0.0f);
    tile p = exp(x - load(lse + row));
    store(dlogits + row * d_stride + cols, (p - (acc_t)(cols == t)) * (grad / load(count)), mask);
}
