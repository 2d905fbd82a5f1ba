/* Test kernels for 2-D tiles, shape operations and reductions. OP selects the reduction:
 * 0 sum, 1 max, 2 min, 3 argmax, 4 argmin, 5 xor_sum, 6 a user combiner (product). */

tile times(tile a, tile b)
{
    return a * b;
}

tile reduce_op(tile x, const i32 OP, const i32 AXIS)
{
    return OP == 0 ? sum(x, AXIS) : OP == 1 ? max(x, AXIS) : OP == 2 ? min(x, AXIS)
         : OP == 3 ? argmax(x, AXIS) : OP == 4 ? argmin(x, AXIS) : OP == 5 ? xor_sum(x, AXIS)
         : reduce(x, AXIS, times);
}

/* out[r] = reduce over columns of in[r, :] (AXIS 1), or out[c] over rows (AXIS 0). */
kernel reduce2d(any *out, const any *in, i32 M, i32 N, i32 stride, const i32 OP, const i32 AXIS,
                const i32 BM, const i32 BN)
{
    tile rows = arange(0, BM);
    tile cols = arange(0, BN);
    tile mask = (expand_dims(rows, 1) < M) & (expand_dims(cols, 0) < N);
    tile x = load(in + expand_dims(rows, 1) * stride + expand_dims(cols, 0), mask, 0);
    tile r = reduce_op(x, OP, AXIS);
    if (AXIS == 1) {
        store(out + rows, r, rows < M);
    } else {
        store(out + cols, r, cols < N);
    }
}

/* out[pid] = reduce of the whole 1-D block pid of in. */
kernel reduce1d(any *out, const any *in, i32 n, const i32 OP, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile x = load(in + offs, offs < n, 0);
    store(out + program_id(0), reduce_op(x, OP, 0));
}

/* out = x - max over each row (keep_dims), then divided by the sum of the whole tile. */
kernel keepdims(f32 *out, const f32 *in, const i32 BM, const i32 BN)
{
    tile offs = expand_dims(arange(0, BM), 1) * BN + expand_dims(arange(0, BN), 0);
    tile x = load(in + offs);
    tile centred = x - max(x, 1, 1);
    store(out + offs, centred / sum(abs(centred)));
}

/* out[BN, BM] = trans(in[BM, BN]); flat[BM * BN] = reshape(in). */
kernel shapes(any *out, any *flat, const any *in, const i32 BM, const i32 BN)
{
    tile x = load(in + expand_dims(arange(0, BM), 1) * BN + expand_dims(arange(0, BN), 0));
    tile t = trans(x);
    store(out + expand_dims(arange(0, BN), 1) * BM + expand_dims(arange(0, BM), 0), t);
    store(flat + arange(0, BM * BN), reshape(x, BM * BN));
}

/* A 1-D tile used both as a row index and as a column index (a layout conversion). */
kernel outer(f32 *out, const f32 *v, const i32 B)
{
    tile i = arange(0, B);
    tile x = load(v + i);
    tile grid = expand_dims(x, 1) * expand_dims(x, 0);
    store(out + expand_dims(i, 1) * B + expand_dims(i, 0), grid);
}

tile maxc(tile a, tile b)
{
    return maximum(a, b);
}

/* Scans along AXIS of a [BM, BN] tile. KIND: 0 cumsum, 1 cumprod, 2 running max (a user
 * combiner); REVERSE scans from the end. */
kernel scan2d(any *out, const any *in, const i32 KIND, const i32 AXIS, const i32 REVERSE,
              const i32 BM, const i32 BN)
{
    tile offs = expand_dims(arange(0, BM), 1) * BN + expand_dims(arange(0, BN), 0);
    tile x = load(in + offs);
    tile y = KIND == 0 ? cumsum(x, AXIS, REVERSE) : KIND == 1 ? cumprod(x, AXIS, REVERSE)
           : associative_scan(x, AXIS, maxc, REVERSE);
    store(out + offs, y);
}

/* A long 1-D running sum across programs' blocks (each block scanned on its own). */
kernel scan1d(any *out, const any *in, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    store(out + offs, cumsum(load(in + offs, mask, 0)), mask);
}

kernel flip2d(any *out, const any *in, const i32 AXIS, const i32 BM, const i32 BN)
{
    tile offs = expand_dims(arange(0, BM), 1) * BN + expand_dims(arange(0, BN), 0);
    store(out + offs, flip(load(in + offs), AXIS));
}

/* out = cat(a, b, AXIS) of two [BM, BN] tiles; pairs = join(a, b); halves = split(pairs, K). */
kernel combine(any *out, any *pairs, any *half, const any *a, const any *b, const i32 AXIS,
               const i32 K, const i32 BM, const i32 BN)
{
    tile rows = expand_dims(arange(0, BM), 1);
    tile cols = expand_dims(arange(0, BN), 0);
    tile x = load(a + rows * BN + cols);
    tile y = load(b + rows * BN + cols);
    tile both = cat(x, y, AXIS);
    if (AXIS == 0) {
        store(out + expand_dims(arange(0, 2 * BM), 1) * BN + cols, both);
    } else {
        store(out + rows * (2 * BN) + expand_dims(arange(0, 2 * BN), 0), both);
    }
    tile p = join(x, y);
    store(pairs + expand_dims(rows * BN + cols, 2) * 2 + expand_dims(expand_dims(arange(0, 2), 0), 0), p);
    store(half + rows * BN + cols, split(p, K));
}
