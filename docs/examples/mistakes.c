/* Three kernels with a mistake each (chapter 5 of the book). */
kernel no_mask(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs) * 2.0f);
}

kernel relu(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile v = load(x + offs, offs < n);
    if (v > 0.0f) {
        store(out + offs, v, offs < n);
    }
}

kernel write_input(const f32 *x, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(x + offs, 0.0f, offs < n);
}

kernel mismatch(f32 *out, const f32 *x, const i32 BLOCK)
{
    tile a = load(x + arange(0, BLOCK));
    tile b = load(x + arange(0, 2 * BLOCK));
    store(out + arange(0, BLOCK), a + b);
}

kernel block_max(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    tile offs = arange(0, BLOCK);
    store(out, max(load(x + offs, offs < n)));
}
