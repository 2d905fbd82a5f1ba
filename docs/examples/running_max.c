/* Scans along the rows of a tile (chapter 7 of the book). */
tile maxc(tile a, tile b)
{
    return maximum(a, b);
}

kernel running_max(f32 *out, const f32 *in, const i32 BM, const i32 BN)
{
    tile offs = expand_dims(arange(0, BM), 1) * BN + expand_dims(arange(0, BN), 0);
    tile x = load(in + offs);
    store(out + offs, associative_scan(x, 1, maxc));   /* along each row */
    store(out + BM * BN + offs, cumsum(x, 1, 1));      /* reverse: sums of the suffixes */
}
