/* Reductions and scans of tuples (chapter 7 of the book): several tiles combined together. */

/* Chan's merge of two (mean, M2, count) partial statistics (Welford's in one pass) */
tile welford(tile mean0, tile m20, tile n0, tile mean1, tile m21, tile n1)
{
    tile n = n0 + n1;
    tile share = where(n == 0.0f, 0.0f, n1 / n);
    tile delta = mean1 - mean0;
    return (mean0 + delta * share, m20 + m21 + delta * delta * n0 * share, n);
}

/* (a0, b0) then (a1, b1) applied to h: the step of h = a * h + b */
tile affine(tile a0, tile b0, tile a1, tile b1)
{
    return (a0 * a1, a1 * b0 + b1);
}

kernel row_stats(f32 *mean, f32 *var, f32 *h, const f32 *a, const f32 *x, i32 n, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n;
    tile v = load(x + row * n + cols, mask);
    tile stats = reduce((v, 0.0f, (f32)mask), 0, welford);   /* three tiles, one tuple */
    store(mean + row, stats[0]);
    store(var + row, stats[1] / stats[2]);
    tile ab = associative_scan((load(a + row * n + cols, mask, 1.0f), v), 0, affine);
    store(h + row * n + cols, ab[1], mask);                  /* h[t] = a[t] h[t-1] + x[t] */
}
