/* Dropout as in Triton's "low-memory dropout" tutorial: element i is kept where
 * rand(seed, i) > p and scaled by 1 / (1 - p), zeroed elsewhere. The mask is never stored: the
 * backward kernel regenerates it from the same seed and offsets. Computed in f32, stored in
 * out's dtype; p = 1 zeroes everything. */

/* x where rand(seed, offs) > p, scaled by 1 / (1 - p); 0 elsewhere. */
tile dropout_apply(tile x, f32 p, i64 seed, tile offs)
{
    tile keep = rand(seed, offs) > p;
    return where(keep, x / (1.0f - p), 0.0f);
}

kernel dropout(any *out, const any *x, f32 p, i64 seed, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile v = (f32)load(x + offs, mask, 0.0f);
    store(out + offs, dropout_apply(v, p, seed, offs), mask);
}

/* The gradient of dropout: dx = dy on the lanes the forward kernel kept (same seed, same
 * offsets), scaled by 1 / (1 - p); 0 elsewhere. */
kernel dropout_backward(any *dx, const any *dy, f32 p, i64 seed, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile g = (f32)load(dy + offs, mask, 0.0f);
    store(dx + offs, dropout_apply(g, p, seed, offs), mask);
}

/* Dropout with its seed read from device memory (seed[0], i64): the forward and, with the same
 * seed buffer, the backward (they are the same map). A CUDA graph replays with whatever seed
 * the buffer then holds, and torch.compile traces the seed as a tensor. Computed in f32, or in
 * f64 for f64 data (a typed f32 one promotes f16/bf16 to f32 and leaves f64). */
kernel dropout_seeded(any *out, const any *x, f32 p, const i64 *seed, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    f32 one = 1.0f;
    tile v = load(x + offs, mask, 0.0f) * one;
    store(out + offs, dropout_apply(v, p, load(seed), offs), mask);
}
