/* Reductions and scans of tuples: several tiles combined together by a helper that takes the
 * items of two tuples and returns a tuple. Used by tests/test_tuples.py, its GPU twin and the
 * goldens tuples.*.cu. */

/* the larger value, its index (ties keep the lower index) and the payload that goes with it */
tile argmax_combine(tile v0, tile i0, tile p0, tile v1, tile i1, tile p1)
{
    bool take = v1 > v0 || (v1 == v0 && i1 < i0);
    return (where(take, v1, v0), where(take, i1, i0), where(take, p1, p0));
}

/* the row's maximum and where it is, with a payload carried along: the value of `w` there */
kernel argmax_payload(any *best, i32 *where_, f32 *payload, const any *x, const f32 *w,
                      i32 rows, i32 cols, i32 stride, const i32 BR, const i32 BC)
{
    tile r = program_id(0) * BR + arange(0, BR);
    tile c = arange(0, BC);
    tile mask = (expand_dims(r, 1) < rows) & (expand_dims(c, 0) < cols);
    tile offs = expand_dims(r, 1) * stride + expand_dims(c, 0);
    tile v = load(x + offs, mask, -INF);
    tile index = broadcast_to(expand_dims(c, 0), BR, BC);
    tile got = reduce((v, index, load(w + offs, mask, 0.0f)), 1, argmax_combine);
    store(best + r, got[0], r < rows);
    store(where_ + r, got[1], r < rows);
    store(payload + r, got[2], r < rows);
}

/* Chan's merge of two (mean, M2, count) partial statistics */
tile welford_combine(tile mean0, tile m20, tile n0, tile mean1, tile m21, tile n1)
{
    tile n = n0 + n1;
    tile share = where(n == 0.0f, 0.0f, n1 / n);
    tile delta = mean1 - mean0;
    return (mean0 + delta * share, m20 + m21 + delta * delta * n0 * share, n);
}

/* the mean and the (biased) variance of each row, in one pass */
kernel welford(any *mean, any *var, const any *x, i32 rows, i32 cols, const i32 BC)
{
    i32 r = program_id(0);
    tile c = arange(0, BC);
    tile mask = c < cols;
    tile v = (acc_t)load(x + r * cols + c, mask, 0.0f);
    tile stats = reduce((v, (acc_t)0, (acc_t)mask), 0, welford_combine);
    store(mean + r, stats[0]);
    store(var + r, stats[1] / stats[2]);
}

/* (a0, b0) then (a1, b1) applied to h: h -> a1 * (a0 * h + b0) + b1 */
tile affine_combine(tile a0, tile b0, tile a1, tile b1)
{
    return (a0 * a1, a1 * b0 + b1);
}

/* h[t] = a[t] * h[t-1] + b[t] along each row (h[-1] = 0), or from the end when REVERSE */
kernel recurrence(f32 *h, const f32 *a, const f32 *b, i32 rows, i32 cols,
                  const i32 BR, const i32 BC, const i32 REVERSE)
{
    tile r = program_id(0) * BR + arange(0, BR);
    tile c = arange(0, BC);
    tile mask = (expand_dims(r, 1) < rows) & (expand_dims(c, 0) < cols);
    tile offs = expand_dims(r, 1) * cols + expand_dims(c, 0);
    tile ab = associative_scan((load(a + offs, mask, 1.0f), load(b + offs, mask, 0.0f)), 1,
                               affine_combine, REVERSE);
    store(h + offs, ab[1], mask);
}

/* a helper returning a tuple, and a tuple carried around a loop */
tile min_max(tile x)
{
    return (min(x, 0), max(x, 0));
}

kernel running_range(f32 *lo, f32 *hi, const f32 *x, i32 n, const i32 BLOCK)
{
    tile o = arange(0, BLOCK);
    tile range = (INF, -INF);
    for (i32 start = 0; start < n; start += BLOCK) {
        tile part = min_max(load(x + start + o, start + o < n, NAN));
        range = (minimum(range[0], part[0]), maximum(range[1], part[1]));
    }
    store(lo, range[0]);
    store(hi, range[1]);
}
