/* Softmax and log-softmax over the rows of a 2-D array, forward and backward.
 *
 * Rows are the first dimension. Inputs have a row and a column stride (in elements; a column
 * stride of 1, the usual case, is specialised as a constant and gives vector loads); outputs
 * are contiguous along their rows, with their own row stride. Data are f16, bf16, f32 or f64;
 * every kernel computes in acc_t (f32; f64 for f64) and rounds once when it stores. The plain
 * kernels hold whole rows in one tile (BLOCK >= n_cols, a power of two; the forward ones ROWS
 * rows per program); softmax_split spreads a longer row over programs (forward, not f64);
 * the _looped kernels take any row length in one program, reading it in chunks of BLOCK.
 *
 *   softmax:      y = exp(x - max(x)) / sum(exp(x - max(x)))
 *   log_softmax:  y = x - logsumexp(x)
 *   backward:     dx = y * (dy - sum(y * dy))        for softmax
 *                 dx = dy - exp(y) * sum(dy)          for log_softmax (y = log-probabilities)
 *
 * Loops step by chunk number, offset c * BLOCK: the compiler then knows each chunk starts on a
 * multiple of BLOCK and uses vector loads.
 *
 * The _looped kernels read a row twice (its statistic, then the pass that writes): the second
 * pass walks the chunks from the last to the first, so it starts on the chunks the first pass
 * read last, which the L2 may still hold (a 1 MB row of 262144 f32 does not fit, but its tail
 * can). Their BLOCK and num_warps are the autotuner's (the rows in flight per SM decide how much
 * of each row's tail stays in L2); teeny_tx.nn launches the choice.
 */

/* ---- helpers ------------------------------------------------------------------------------ */

/* logsumexp of a row of n_cols elements, read in chunks of BLOCK (online softmax). Each lane
 * keeps a running maximum m and the sum s of exp(x - m) over the elements it has seen; the
 * lanes are combined once at the end. One exp per element: e = exp(-|x - m|) is exp(m - x),
 * the factor that rescales s, when x is a new maximum, else exp(x - m), the term to add. A -INF
 * element (masked-off lanes too) adds nothing, so a lane that saw only -INF keeps s = 0. */
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

/* sum(a * b) over a row of n_cols elements (column strides a_step, b_step), in chunks of
 * BLOCK. */
acc_t row_dot(tile a, i32 a_step, tile b, i32 b_step, i32 n_cols, const i32 BLOCK)
{
    tile cols = arange(0, BLOCK);
    acc_t acc[BLOCK] = 0;
    for (i32 c = 0; c * BLOCK < n_cols; c++) {
        tile offs = c * BLOCK + cols;
        tile mask = offs < n_cols;
        tile pa = (acc_t)load(a + offs * a_step, mask, 0.0f);
        acc += pa * (acc_t)load(b + offs * b_step, mask, 0.0f);
    }
    return sum(acc);
}

/* sum(a) over a row of n_cols elements (column stride step), in chunks of BLOCK. */
acc_t row_sum(tile a, i32 step, i32 n_cols, const i32 BLOCK)
{
    tile cols = arange(0, BLOCK);
    acc_t acc[BLOCK] = 0;
    for (i32 c = 0; c * BLOCK < n_cols; c++) {
        tile offs = c * BLOCK + cols;
        acc += (acc_t)load(a + offs * step, offs < n_cols, 0.0f);
    }
    return sum(acc);
}

/* ---- forward, one tile per row ------------------------------------------------------------ */

/* A program holds ROWS rows of BLOCK >= n_cols columns as one [ROWS, BLOCK] tile (short rows:
 * several rows in flight per program, as the norms); ROWS and num_warps are the autotuner's,
 * per row length and power-of-two bucket of the row count, pruned by teeny_tx.nn as the norms'
 * forward configs are (elements per thread). */

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
kernel softmax(any *out, const any *x, i32 n_rows, i32 n_cols, i32 x_stride, i32 x_step,
               i32 out_stride, const i32 BLOCK, const i32 ROWS)
{
    tile rows = expand_dims(program_id(0) * ROWS + arange(0, ROWS), 1);
    tile cols = expand_dims(arange(0, BLOCK), 0);
    tile mask = ((rows < n_rows) | (ROWS == 1)) & (cols < n_cols); /* one row: always a row */
    tile v = (acc_t)load(x + rows * x_stride + cols * x_step, mask, -INF);
    tile e = exp(v - expand_dims(max(v, 1), 1));
    store(out + rows * out_stride + cols, e * expand_dims(1.0f / sum(e, 1), 1), mask);
}

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
kernel log_softmax(any *out, const any *x, i32 n_rows, i32 n_cols, i32 x_stride, i32 x_step,
                   i32 out_stride, const i32 BLOCK, const i32 ROWS)
{
    tile rows = expand_dims(program_id(0) * ROWS + arange(0, ROWS), 1);
    tile cols = expand_dims(arange(0, BLOCK), 0);
    tile mask = ((rows < n_rows) | (ROWS == 1)) & (cols < n_cols); /* one row: always a row */
    tile v = (acc_t)load(x + rows * x_stride + cols * x_step, mask, -INF);
    tile shifted = v - expand_dims(max(v, 1), 1);
    store(out + rows * out_stride + cols, shifted - expand_dims(log(sum(exp(shifted), 1)), 1),
          mask);
}

/* ---- forward, any row length: one pass for logsumexp, one to write (last chunk first) ------ */

#pragma autotune key(n_cols)
#pragma autotune config(BLOCK=4096, num_warps=16)
#pragma autotune config(BLOCK=4096, num_warps=8)
#pragma autotune config(BLOCK=8192, num_warps=16)
#pragma autotune config(BLOCK=8192, num_warps=32)
#pragma autotune config(BLOCK=1024, num_warps=4)
#pragma autotune config(BLOCK=2048, num_warps=8)
#pragma autotune config(BLOCK=2048, num_warps=4)
kernel softmax_looped(any *out, const any *in, i32 n_cols, i32 in_stride, i32 in_step,
                      i32 out_stride, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    acc_t lse = row_logsumexp(in + row * in_stride, n_cols, in_step, BLOCK);
    for (i32 c = (n_cols - 1) / BLOCK; c >= 0; c--) { /* 0 columns: one chunk, masked off */
        tile offs = c * BLOCK + cols;
        tile mask = offs < n_cols;
        tile x = (acc_t)load(in + row * in_stride + offs * in_step, mask, 0.0f);
        store(out + row * out_stride + offs, exp(x - lse), mask);
    }
}

#pragma autotune key(n_cols)
#pragma autotune config(BLOCK=4096, num_warps=16)
#pragma autotune config(BLOCK=4096, num_warps=8)
#pragma autotune config(BLOCK=8192, num_warps=16)
#pragma autotune config(BLOCK=8192, num_warps=32)
#pragma autotune config(BLOCK=1024, num_warps=4)
#pragma autotune config(BLOCK=2048, num_warps=8)
#pragma autotune config(BLOCK=2048, num_warps=4)
kernel log_softmax_looped(any *out, const any *in, i32 n_cols, i32 in_stride, i32 in_step,
                          i32 out_stride, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    acc_t lse = row_logsumexp(in + row * in_stride, n_cols, in_step, BLOCK);
    for (i32 c = (n_cols - 1) / BLOCK; c >= 0; c--) { /* 0 columns: one chunk, masked off */
        tile offs = c * BLOCK + cols;
        tile mask = offs < n_cols;
        tile x = (acc_t)load(in + row * in_stride + offs * in_step, mask, 0.0f);
        store(out + row * out_stride + offs, x - lse, mask);
    }
}

/* ---- forward, long rows split over programs: one read, one write ------------------------- */

/* softmax (LOG = 0) and log_softmax (LOG = 1) of rows longer than one tile.
 *
 * A row of n_cols is cut into chunks of CHUNK columns, one program each (program
 * row * n_chunks + chunk, so a row's chunks are neighbours in launch order and run at about the
 * same time). A program loads its chunk once, into registers, and publishes the chunk's
 * (max, sum of exp(x - max)) as 64 bits in slots[row, chunk]; once every chunk of the row has
 * published (counted in count[row]), it combines them into the row's logsumexp and writes its
 * chunk: the
 * row is read once and written once (the two-pass _looped kernels read it twice: at most 2/3
 * of copy bandwidth for rows the L2 cannot hold).
 *
 * Measured on the H200 (8192 x 262144 f32, the same run): the best config 2.41 TB/s, 56% of
 * copy; the two-pass kernel 2.74 TB/s, 64%. A program holds its chunk in registers from its
 * load until the row's other chunks have published, so the bytes in flight per SM are bounded
 * by the register file (about 100 KB of chunk data at 3-7 programs per SM) times the share of
 * each program's life spent loading, not by the memory system. teeny_tx.nn launches the
 * two-pass kernels (nn.SPLIT_SOFTMAX switches this one on).
 *
 * No program waits unboundedly: after `spins` reads of the row's count, a program computes each
 * chunk still missing itself, from the input (the same helper, the same arithmetic: the same
 * bits as the chunk's owner would publish). So the kernel finishes whatever runs at once (a
 * grid larger than the device holds, other work on the SMs, the interpreter, which runs
 * programs one after another and is given spins = 0), and its output does not depend on
 * timing. Slots and counts are read with atomics (at the L2, never a stale L1 line); a slot of
 * 0 is empty (a packed chunk is never 0: see chunk_stats). count[row] counts arrivals (low 16
 * bits: n_chunks <= 1024) and departures (above); the last to leave sets the row's slots and count back to 0,
 * so the buffers are zero again after every launch: the autotuner's repeated launches and a
 * captured graph's replays see what the first launch saw. slots [rows, n_chunks] i64 and
 * count [rows] i32 start zero. */

/* (max, sum of exp(x - max)) of a chunk of f32 (masked lanes -INF), packed into 64 bits: the
 * max's bits high, the sum's low (an i64, as torch makes i64 buffers everywhere). A chunk of
 * only -INF packs (-INF, 0); any other has a sum >= 1 or NaN: never 0, the empty slot. */
i64 chunk_stats(tile x)
{
    f32 m = max(x);
    f32 s = m == -INF ? 0.0f : sum(exp(x - m));
    return (i64)(((u64)bitcast(m, u32) << 32) | (u64)bitcast(s, u32));
}

#pragma autotune key(n_cols)
#pragma autotune config(CHUNK=8192, num_warps=8)
#pragma autotune config(CHUNK=8192, num_warps=4)
#pragma autotune config(CHUNK=4096, num_warps=4)
#pragma autotune config(CHUNK=16384, num_warps=16)
#pragma autotune config(CHUNK=4096, num_warps=8)
#pragma autotune config(CHUNK=2048, num_warps=4)
#pragma autotune config(CHUNK=16384, num_warps=8)
kernel softmax_split(any *out, i64 *slots, i32 *count, const any *in, i32 n_cols, i32 in_stride,
                     i32 in_step, i32 out_stride, i32 spins, const i32 CHUNK, const i32 SLOTS,
                     const i32 LOG)
{
    i32 n_chunks = (n_cols + CHUNK - 1) / CHUNK;
    i32 row = program_id(0) / n_chunks;
    i32 chunk = program_id(0) % n_chunks;
    tile offs = chunk * CHUNK + arange(0, CHUNK);
    tile mask = offs < n_cols;
    tile x = (f32)load(in + row * in_stride + offs * in_step, mask, -INF);
    tile row_slots = slots + row * n_chunks;
    store(row_slots + chunk, chunk_stats(x));
    /* ACQ_REL: the slot is written before the arrival is counted; n_chunks arrivals seen, every
     * slot of the row is. Arrivals count in the low 16 bits, departures from bit 16 (a program
     * that stopped waiting may leave before another arrives) */
    i32 arrived = (atomic_add(count + row, 1) + 1) & 65535;
    for (i32 t = 0; t < spins && arrived < n_chunks; t++) {
        arrived = atomic_add(count + row, 0) & 65535;
    }
    tile lanes = arange(0, SLOTS);
    tile live = lanes < n_chunks;
    tile seen = atomic_or(row_slots + lanes, (i64)0, live, RELAXED);
    if (arrived < n_chunks) { /* the programs of some chunks have not run yet: do their part */
        for (i32 c = 0; c < n_chunks; c++) {
            if (sum((i32)((lanes == c) & (seen == 0))) > 0) {
                tile others = c * CHUNK + arange(0, CHUNK);
                tile xc = (f32)load(in + row * in_stride + others * in_step, others < n_cols, -INF);
                seen = where(lanes == c, chunk_stats(xc), seen);
            }
        }
        /* read again: x is dead in this branch, so its registers hold the other chunks (kept
         * live across it, they would double the kernel's registers and halve its programs) */
        x = (f32)load(in + row * in_stride + offs * in_step, mask, -INF);
    }
    tile m = bitcast((u32)((u64)seen >> 32), f32);
    tile s = bitcast((u32)seen, f32);
    f32 mx = max(where(live, m, -INF));
    f32 lse = mx + log(sum(where(live & (s != 0.0f), s * exp(m - mx), 0.0f))); /* NaN stays */
    /* ACQ_REL: the departures follow every read of the slots; the last zeroes them after every
     * slot of the row is written (every program arrives before it leaves) */
    if (atomic_add(count + row, 65536) >> 16 == n_chunks - 1) {
        store(row_slots + lanes, (i64)0, live);
        store(count + row, 0);
    }
    if (LOG != 0) {
        store(out + row * out_stride + offs, x - lse, mask);
    } else {
        store(out + row * out_stride + offs, exp(x - lse), mask);
    }
}

/* ---- backward, one tile per row ----------------------------------------------------------- */

kernel softmax_backward(any *dx, const any *y, const any *dy, i32 n_cols, i32 y_stride,
                        i32 y_step, i32 dy_stride, i32 dy_step, i32 dx_stride, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile p = (acc_t)load(y + row * y_stride + cols * y_step, mask, 0.0f);
    tile g = (acc_t)load(dy + row * dy_stride + cols * dy_step, mask, 0.0f);
    store(dx + row * dx_stride + cols, p * (g - sum(p * g)), mask);
}

kernel log_softmax_backward(any *dx, const any *y, const any *dy, i32 n_cols, i32 y_stride,
                            i32 y_step, i32 dy_stride, i32 dy_step, i32 dx_stride,
                            const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile logp = (acc_t)load(y + row * y_stride + cols * y_step, mask, 0.0f);
    tile g = (acc_t)load(dy + row * dy_stride + cols * dy_step, mask, 0.0f);
    store(dx + row * dx_stride + cols, g - exp(logp) * sum(g), mask);
}

/* ---- backward, any row length: one pass for the row's sum, one to write (last chunk first) - */

#pragma autotune key(n_cols)
#pragma autotune config(BLOCK=4096, num_warps=16)
#pragma autotune config(BLOCK=4096, num_warps=8)
#pragma autotune config(BLOCK=8192, num_warps=16)
#pragma autotune config(BLOCK=8192, num_warps=32)
#pragma autotune config(BLOCK=1024, num_warps=4)
#pragma autotune config(BLOCK=2048, num_warps=8)
#pragma autotune config(BLOCK=2048, num_warps=4)
kernel softmax_backward_looped(any *dx, const any *y, const any *dy, i32 n_cols, i32 y_stride,
                               i32 y_step, i32 dy_stride, i32 dy_step, i32 dx_stride,
                               const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    acc_t dot = row_dot(y + row * y_stride, y_step, dy + row * dy_stride, dy_step, n_cols, BLOCK);
    for (i32 c = (n_cols - 1) / BLOCK; c >= 0; c--) { /* 0 columns: one chunk, masked off */
        tile offs = c * BLOCK + cols;
        tile mask = offs < n_cols;
        tile p = (acc_t)load(y + row * y_stride + offs * y_step, mask, 0.0f);
        tile g = (acc_t)load(dy + row * dy_stride + offs * dy_step, mask, 0.0f);
        store(dx + row * dx_stride + offs, p * (g - dot), mask);
    }
}

#pragma autotune key(n_cols)
#pragma autotune config(BLOCK=4096, num_warps=16)
#pragma autotune config(BLOCK=4096, num_warps=8)
#pragma autotune config(BLOCK=8192, num_warps=16)
#pragma autotune config(BLOCK=8192, num_warps=32)
#pragma autotune config(BLOCK=1024, num_warps=4)
#pragma autotune config(BLOCK=2048, num_warps=8)
#pragma autotune config(BLOCK=2048, num_warps=4)
kernel log_softmax_backward_looped(any *dx, const any *y, const any *dy, i32 n_cols,
                                   i32 y_stride, i32 y_step, i32 dy_stride, i32 dy_step,
                                   i32 dx_stride, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    acc_t total = row_sum(dy + row * dy_stride, dy_step, n_cols, BLOCK);
    for (i32 c = (n_cols - 1) / BLOCK; c >= 0; c--) { /* 0 columns: one chunk, masked off */
        tile offs = c * BLOCK + cols;
        tile mask = offs < n_cols;
        tile logp = (acc_t)load(y + row * y_stride + offs * y_step, mask, 0.0f);
        tile g = (acc_t)load(dy + row * dy_stride + offs * dy_step, mask, 0.0f);
        store(dx + row * dx_stride + offs, g - exp(logp) * total, mask);
    }
}
