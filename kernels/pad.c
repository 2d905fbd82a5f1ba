/* The padding family: torch.nn.functional.pad's constant, reflect, replicate and circular modes
 * over the last one, two or three dimensions of a contiguous tensor, forward and backward, any
 * float dtype (the backward sums in acc_t: f32; f64 for f64 data).
 *
 * The tensor is [B, n2, n1, n0] (n0 the last dimension; a dimension not padded has size 1 and
 * no pads), the output [B, o2, o1, o0] with o = n + lo + hi per dimension. Output index o of a
 * dimension reads the input index source(o), s = o - lo:
 *
 *   MODE 0  constant   s, or the value where s is outside [0, n)
 *   MODE 1  reflect    -s where s < 0, 2 (n - 1) - s where s >= n, else s (|pads| < n)
 *   MODE 2  replicate  s clamped to [0, n - 1]
 *   MODE 3  circular   off + (s mod p): the p = n - crop elements left after negative pads
 *                      crop off elements at the front (lo is then max(pad, 0)), as torch
 *
 * The backward is the adjoint, one dimension at a time (padding is separable): dx[a, i, b] is
 * the sum of dy[a, o, b] over the outputs o whose source is i, found by a candidate rule per
 * mode (pd_candidate), so every element is a gather and the result is deterministic.
 * teeny_tx/library/pad_families.py is the table that numbers MODE.
 */

/* the input index that output index o reads along a dimension of n inputs */
tile pd_source(tile o, i32 n, i32 lo, i32 period, i32 off, const i32 MODE)
{
    tile s = o - lo;
    if (MODE == 1) {        /* reflect */
        s = where(s < 0, -s, where(s >= n, 2 * (n - 1) - s, s));
    } else if (MODE == 2) { /* replicate */
        s = minimum(maximum(s, 0), n - 1);
    } else if (MODE == 3) { /* circular */
        s = off + (s % period + period) % period;
    }
    return s;
}

/* the t-th output index (t < T) whose source is input index i, or -1: constant one (T = 1),
 * reflect three (itself, its mirrors on either side), replicate the run of outputs clamped to
 * an edge (T = max(lo, hi) + 1), circular three (a period either way) */
tile pd_candidate(tile i, i32 t, i32 n, i32 n_out, i32 lo, i32 period, i32 off,
                  const i32 MODE)
{
    tile o = i + lo;
    tile ok = i >= 0;
    if (MODE == 1) {
        if (t == 1) {
            o = lo - i;
            ok = i > 0;
        } else if (t == 2) {
            o = lo + 2 * (n - 1) - i;
            ok = i < n - 1;
        }
    } else if (MODE == 2) {
        tile first = where(i == 0, 0, i + lo);
        tile last = where(i == n - 1, n_out, i + lo + 1);
        o = maximum(first, 0) + t;
        ok = o < last;
    } else if (MODE == 3) {
        o = lo + (i - off) + (t - 1) * period;
        ok = (i >= off) & (i < off + period);
    }
    return where(ok & (o >= 0) & (o < n_out), o, -1);
}

kernel pad_fwd(any *y, const any *x, f64 value, i32 n, i32 o0, i32 o1, i32 o2, i32 n0, i32 n1,
               i32 n2, i32 lo0, i32 lo1, i32 lo2, i32 p0, i32 p1, i32 p2, i32 f0, i32 f1,
               i32 f2, const i32 MODE, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile i0 = offs % o0;
    tile i1 = (offs / o0) % o1;
    tile i2 = (offs / o0 / o1) % o2;
    tile b = offs / o0 / o1 / o2;
    tile s0 = pd_source(i0, n0, lo0, p0, f0, MODE);
    tile s1 = pd_source(i1, n1, lo1, p1, f1, MODE);
    tile s2 = pd_source(i2, n2, lo2, p2, f2, MODE);
    tile inside = mask;
    if (MODE == 0) {
        inside = mask & (s0 >= 0) & (s0 < n0) & (s1 >= 0) & (s1 < n1) & (s2 >= 0) & (s2 < n2);
    }
    tile v = load(x + ((b * n2 + s2) * n1 + s1) * n0 + s0, inside, 0.0f);
    if (MODE == 0) {
        store(y + offs, where(inside, v, value), mask);
    } else {
        store(y + offs, v, mask);
    }
}

/* the adjoint along one dimension: dx [A, n_in, B] from dy [A, n_out, B], n = A * n_in * B */
kernel pad_bwd_dim(any *dx, const any *dy, i32 n, i32 n_in, i32 n_out, i32 inner, i32 lo,
                   i32 period, i32 off, i32 T, const i32 MODE, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile b = offs % inner;
    tile i = (offs / inner) % n_in;
    tile a = offs / inner / n_in;
    acc_t acc[BLOCK] = 0;
    for (i32 t = 0; t < T; t++) {
        tile o = pd_candidate(i, t, n_in, n_out, lo, period, off, MODE);
        acc += (acc_t)load(dy + (a * n_out + o) * inner + b, mask & (o >= 0), 0.0f);
    }
    store(dx + offs, acc, mask);
}
