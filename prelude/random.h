/* teeny_tx prelude: random numbers (parsed after language.h).
 *
 * Counter-based, as Triton's tl.rand: no state, one Philox4x32-10 block cipher call per lane.
 * The same (seed, offset) gives the same number on the GPU and on the NumPy interpreter, in
 * every launch and under every layout, so a kernel regenerates a mask instead of storing it.
 *   key     = seed converted to u64: k0 = its low 32 bits, k1 = its high 32 bits
 *   counter = offset converted to u64 (sign-extended when signed): c0 = low 32 bits,
 *             c1 = high 32 bits, c2 = c3 = 0  (for 0 <= offset < 2^32 this is Triton's counter)
 *   words   = Philox4x32-10(counter, key): Random123's rounds and constants, 10 rounds
 * seed: an integer scalar or tile; offset: an integer tile or scalar; the two broadcast.
 * Distinct offsets give independent numbers: give every element its own (e.g. its index).
 */

/* ---- random numbers (counter-based Philox4x32-10: a seed and an offset name one value) ---- */
tile rand(tile seed, tile offset);             /* f32 uniform in [0, 1): (word0 >> 8) * 2^-24, exact on both backends */
tile randn(tile seed, tile offset);            /* f32 standard normal: Box-Muller on words 0 and 1 (see random.cuh) */
tile randint(tile seed, tile offset);          /* u32: word 0 (Triton's tl.randint) */
tile randint4x(tile seed, tile offset, i32 k); /* u32: word k of the four, k a constant 0..3 */
