/* Integer division and remainder truncate toward zero, as in C (chapter 7 of the book). */
kernel divide(i32 *q, i32 *r, const i32 *a, const i32 *b, const i32 BLOCK)
{
    tile i = arange(0, BLOCK);
    tile x = load(a + i);
    tile y = load(b + i);
    store(q + i, x / y);
    store(r + i, x % y);
}
