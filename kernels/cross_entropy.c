/* Cross-entropy of rows of logits against class indices, forward and backward, with
 * ignore_index and the mean over the rows that are not ignored.
 *
 * logits [rows, n_cols] (f16, bf16 or f32; row and column strides in elements, a column stride
 * of 1 specialised as a constant: vector loads);
 * targets [rows] i64; per-row loss and lse [rows] f32. Everything is computed in f32.
 *
 *   cross_entropy_fwd:   lse = logsumexp(logits[row]); loss = lse - logits[row, target], 0 for a
 *                        row whose target is ignore_index, NaN for a target outside [0, n_cols)
 *                        (f64 logits; cross_entropy_fwd_split for the others, below)
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

/* cross_entropy_fwd's result (lse, loss per row) for f16, bf16 and f32 logits, read by
 * n_rows * n_chunks programs of one chunk each (all the device's memory parallelism, no loop
 * over the row): program row * n_chunks + chunk writes its chunk's statistics into
 * slots[row, chunk] and counts itself in arrived[row]; the program that counts last (it
 * waits for nobody: every other slot is written before its count) reads the row's slots at
 * the L2 (atomics: never a stale L1 line), combines them, picks the target's logit and writes
 * lse and loss, and sets arrived[row] back to 0 (every launch writes every slot before
 * counting, so the slots need no reset). slots [rows, n_chunks] i64 and arrived [rows] i32
 * start zero. */
#pragma autotune key(n_cols)
#pragma autotune config(CHUNK=4096, num_warps=4)
#pragma autotune config(CHUNK=4096, num_warps=8)
#pragma autotune config(CHUNK=8192, num_warps=8)
#pragma autotune config(CHUNK=8192, num_warps=16)
#pragma autotune config(CHUNK=2048, num_warps=4)
#pragma autotune config(CHUNK=2048, num_warps=2)
#pragma autotune config(CHUNK=16384, num_warps=16)
kernel cross_entropy_fwd_split(any *loss, any *lse, i64 *slots, i32 *arrived, const any *logits,
                               const i64 *targets, i32 n_cols, i32 stride, i32 step,
                               i64 ignore_index, const i32 CHUNK, const i32 SLOTS)
{
    i32 n_chunks = (n_cols + CHUNK - 1) / CHUNK;
    i32 row = program_id(0) / n_chunks;
    i32 chunk = program_id(0) % n_chunks;
    tile x = logits + row * stride;
    tile offs = chunk * CHUNK + arange(0, CHUNK);
    tile row_slots = slots + row * n_chunks;
    store(row_slots + chunk, chunk_stats((f32)load(x + offs * step, offs < n_cols, -INF)));
    /* ACQ_REL: the slot is written before the count; the last to count sees every slot */
    if (atomic_add(arrived + row, 1) == n_chunks - 1) {
        store(arrived + row, 0);
        tile lanes = arange(0, SLOTS);
        tile live = lanes < n_chunks;
        tile seen = atomic_or(row_slots + lanes, (i64)0, live, RELAXED);
        tile m = bitcast((u32)((u64)seen >> 32), f32);
        tile s = bitcast((u32)seen, f32);
        f32 mx = max(where(live, m, -INF));
        f32 l = mx + log(sum(where(live & (s != 0.0f), s * exp(m - mx), 0.0f))); /* NaN stays */
        i64 t = load(targets + row);
        bool inside = t >= 0 && t < n_cols;
        f32 picked = (f32)load(x + t * step, inside, 0.0f);
        store(lse + row, l);
        store(loss + row, t == ignore_index ? 0.0f : (inside ? l - picked : NAN));
    }
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
