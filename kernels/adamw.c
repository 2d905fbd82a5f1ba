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
 * for step t. p and g are any float dtype; m and v are f32 (f64 for f64 parameters); the
 * arithmetic runs in f32 (f64 for f64 data) and p is rounded once.
 *
 * One launch per parameter tensor: the language has no table of pointers (no integer-to-
 * pointer conversion), so a launch cannot walk a list of tensors.
 */

/* x in f32, or f64 for f64 data: the typed f32 one promotes f16/bf16 to f32 and leaves f64 */
tile wide(tile x)
{
    f32 one = 1.0f;
    return x * one;
}

kernel adamw_step(any *p, const any *g, any *m, any *v, i32 n, f32 lr, f32 beta1, f32 beta2,
                  f32 eps, f32 weight_decay, f32 step_size, f32 bc2_sqrt, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile pv = wide(load(p + offs, mask, 0.0f)) * (1.0f - lr * weight_decay);
    tile gv = wide(load(g + offs, mask, 0.0f));
    tile mv = beta1 * load(m + offs, mask, 0.0f) + (1.0f - beta1) * gv;
    tile vv = beta2 * load(v + offs, mask, 0.0f) + (1.0f - beta2) * gv * gv;
    store(m + offs, mv, mask);
    store(v + offs, vv, mask);
    store(p + offs, pv - step_size * mv / (sqrt(vv) / bc2_sqrt + eps), mask);
}
