/* The debugging operations (chapter 7 of the book); device_print and device_assert need a
 * debug build: teeny_tx.compile(path, debug=True) or TEENY_TX_DEBUG=1. */
kernel checked(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    static_assert(BLOCK >= 16, "BLOCK must be at least 16");
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile v = load(x + offs, offs < n, 1.0f);
    device_assert(v > 0.0f, "inputs must be positive");
    device_print("v", v, offs);
    device_print("n", n);
    store(out + offs, sqrt(v), offs < n);
}
