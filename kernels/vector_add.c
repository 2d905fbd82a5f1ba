/* out = a + b, elementwise, for any dtype (f32, f16, bf16, ...). */
kernel vector_add(const any *a, const any *b, any *out, i32 n, const i32 BLOCK)
{
    i32 pid = program_id(0);
    tile offs = pid * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile x = load(a + offs, mask, 0.0f);
    tile y = load(b + offs, mask, 0.0f);
    store(out + offs, x + y, mask);
}
