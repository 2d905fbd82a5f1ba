/* One AdamW step (torch.optim.AdamW's arithmetic, Loshchilov & Hutter's decoupled weight
 * decay) over n contiguous elements of a parameter, its gradient and its two moments, updated
 * in place in one pass:
 *
 *   p  = p * (1 - lr * weight_decay)
 *   m  = beta1 * m + (1 - beta1) * g
 *   v  = beta2 * v + (1 - beta2) * g^2
 *   p  = p - step_size * m / (sqrt(v) / bc2_sqrt + eps)
 *
 * with step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t) computed by the caller
 * for step t. p and g are any float dtype; m and v are f32 (f64 for f64 parameters). The
 * scalars are f64, as torch's are Python floats, so the arithmetic runs in f64 and each of p,
 * m and v is rounded once when it is stored.
 *
 * A launch steps one contiguous buffer. teeny_tx.torch.AdamW fuses the step over many
 * tensors by keeping each param group's parameters of one dtype (and their gradients and
 * moments) as views of one flat buffer, stepped by one launch: the language has no table of
 * pointers (no integer-to-pointer conversion), so a launch cannot walk a list of tensors.
 */

kernel adamw_step(any *p, const any *g, any *m, any *v, i32 n, f64 lr, f64 beta1, f64 beta2,
                  f64 eps, f64 weight_decay, f64 step_size, f64 bc2_sqrt, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile pv = load(p + offs, mask, 0.0f) * (1.0 - lr * weight_decay);
    tile gv = (f64)load(g + offs, mask, 0.0f);
    tile mv = beta1 * load(m + offs, mask, 0.0f) + (1.0 - beta1) * gv;
    tile vv = beta2 * load(v + offs, mask, 0.0f) + (1.0 - beta2) * gv * gv;
    store(m + offs, mv, mask);
    store(v + offs, vv, mask);
    store(p + offs, pv - step_size * mv / (sqrt(vv) / bc2_sqrt + eps), mask);
}
