/* Reductions (chapter 7 of the book). */
tile mul(tile a, tile b)
{
    return a * b;
}

/* One program per block of n values: its max, the index of its max, its product. */
kernel block_stats(f32 *mx, i32 *at, f32 *prod, const f32 *in, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile x = load(in + offs, mask, -INF);           /* -INF: the identity of max */
    store(mx + program_id(0), max(x));
    store(at + program_id(0), argmax(x, 0));
    store(prod + program_id(0), reduce(load(in + offs, mask, 1.0f), 0, mul));  /* 1: of * */
}
