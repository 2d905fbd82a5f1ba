/* The pointwise loss family: l = loss(x, t) elementwise over n contiguous elements of input x
 * and target t (any float dtype, computed in acc_t), then torch's reduction: 'none' stores l,
 * 'sum' and 'mean' reduce it in two passes (per-program partial sums in acc_t, then one
 * program adds them and divides by count: n for 'mean', 1 for 'sum').
 *
 * LOSS selects the loss (a constexpr); a is its parameter (torch's name in
 * teeny_tx/library/families.py, the table that numbers LOSS and generates the ops, modules and
 * docs from these kernels). Adding a loss is a branch in pl_loss, one in pl_grad and a row.
 */

/* sign(d): 1, -1 or 0 (torch's sgn, the L1 gradient's choice at 0) */
tile pl_sign(tile d)
{
    tile zero = d * 0.0f;
    return where(d > 0.0f, zero + 1.0f, where(d < 0.0f, zero - 1.0f, zero));
}

/* loss(x, t) for LOSS; a its parameter */
tile pl_loss(tile x, tile t, f32 a, const i32 LOSS)
{
    tile d = x - t;
    tile l = d * d;         /* mse_loss */
    if (LOSS == 2) {        /* l1_loss */
        l = abs(d);
    } else if (LOSS == 3) { /* smooth_l1_loss(beta=a) */
        l = where(abs(d) < a, 0.5f * d * d / a, abs(d) - 0.5f * a);
    } else if (LOSS == 4) { /* huber_loss(delta=a) */
        l = where(abs(d) < a, 0.5f * d * d, a * (abs(d) - 0.5f * a));
    } else if (LOSS == 5) { /* binary_cross_entropy_with_logits */
        l = (1.0f - t) * x + maximum(-x, 0.0f) + log(1.0f + exp(-abs(x)));
    }
    return l;
}

/* d loss / d x for LOSS (the target's gradient is its negation but for BCE's, -x) */
tile pl_grad(tile x, tile t, f32 a, const i32 LOSS)
{
    tile d = x - t;
    tile g = 2.0f * d;
    if (LOSS == 2) {
        g = pl_sign(d);
    } else if (LOSS == 3) {
        g = where(abs(d) < a, d / a, pl_sign(d));
    } else if (LOSS == 4) {
        g = where(abs(d) < a, d, a * pl_sign(d));
    } else if (LOSS == 5) {
        g = sigmoid(x) - t;
    }
    return g;
}

kernel loss_none(any *out, const any *x, const any *t, f32 a, i32 n, const i32 LOSS,
                 const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile xv = (acc_t)load(x + offs, mask, 0.0f);
    tile tv = (acc_t)load(t + offs, mask, 0.0f);
    store(out + offs, pl_loss(xv, tv, a, LOSS), mask);
}

/* part[pid] = the sum of this program's losses (part in acc_t's dtype) */
kernel loss_partial(any *part, const any *x, const any *t, f32 a, i32 n, const i32 LOSS,
                    const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile xv = (acc_t)load(x + offs, mask, 0.0f);
    tile tv = (acc_t)load(t + offs, mask, 0.0f);
    store(part + program_id(0), sum(where(mask, pl_loss(xv, tv, a, LOSS), 0.0f), 0));
}

/* out (0-d) = the sum of part[0:n_parts] / count; one program */
kernel loss_total(any *out, const any *part, i32 n_parts, f32 count, const i32 BLOCK)
{
    tile offs = arange(0, BLOCK);
    tile acc = (acc_t)load(part + offs, offs < n_parts, 0.0f);
    for (i32 c = 1; c * BLOCK < n_parts; c++) {
        tile p = c * BLOCK + offs;
        acc += (acc_t)load(part + p, p < n_parts, 0.0f);
    }
    store(out, sum(acc, 0) / count);
}

/* dx, dt = loss' * g: g elementwise (REDUCED 0) or the 0-d gradient of the reduction divided
 * by count (REDUCED 1) */
kernel loss_bwd(any *dx, any *dt, const any *x, const any *t, const any *g, f32 a, f32 count,
                i32 n, const i32 LOSS, const i32 REDUCED, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile xv = (acc_t)load(x + offs, mask, 0.0f);
    tile tv = (acc_t)load(t + offs, mask, 0.0f);
    tile gv = xv * 0.0f;
    if (REDUCED) {
        gv = gv + (acc_t)load(g) / count;
    } else {
        gv = (acc_t)load(g + offs, mask, 0.0f);
    }
    tile dl = pl_grad(xv, tv, a, LOSS) * gv;
    store(dx + offs, dl, mask);
    if (LOSS == 5) {
        store(dt + offs, -xv * gv, mask);
    } else {
        store(dt + offs, -dl, mask);
    }
}
