/* out = alpha * x + beta * y, elementwise; computed in f32 and stored in out's dtype. */
kernel axpby(any *out, const any *x, const any *y, f32 alpha, f32 beta, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile a = (f32)load(x + offs, mask, 0.0f);
    tile b = (f32)load(y + offs, mask, 0.0f);
    store(out + offs, alpha * a + beta * b, mask);
}
