/* Cross-entropy of a language model's logits with torch's and Liger's options: class weights,
 * label smoothing and the z-loss, per row (the reduction is the caller's), forward and
 * backward.
 *
 * logits [rows, n_cols] (f16, bf16, f32 or f64; a row stride in elements, columns
 * contiguous); targets [rows] i64; weight [n_cols] (read when WEIGHTED != 0, else every class
 * weighs 1); loss and lse [rows] in acc_t (f32; f64 for f64 logits). With t = targets[row],
 * lse = logsumexp(x), W = sum_c w_c and e = smoothing:
 *
 *   lm_loss_fwd:  loss = (1 - e) w_t (lse - x_t) + e / n_cols * sum_c w_c (lse - x_c)
 *                        + z_coef * lse^2
 *                 0 for a row whose target is ignore_index (the caller refuses targets
 *                 outside [0, n_cols) first; the kernel gives them NaN)
 *   lm_loss_bwd:  dx_c = g * ((1 - e) w_t (p_c - [c == t]) + e / n_cols * (W p_c - w_c)
 *                             + 2 z_coef lse p_c),   p_c = exp(x_c - lse)
 *                 g = grad[row] (the gradient of the row's loss), 0 on ignored rows
 *
 * torch.nn.functional.cross_entropy(x, t, weight, ignore_index=, label_smoothing=e) is the
 * sum or the mean of these rows (mean: divided by the sum of w_t over the rows kept). The
 * forward is one program per row, reading it in chunks of BLOCK (online logsumexp); the
 * backward one program per (row, chunk); BLOCK and num_warps are the wrapper's. dlogits may
 * be the logits themselves (each element is read before it is written, by the program that
 * writes it): the fused linear cross-entropy computes its gradient in place.
 */

kernel lm_loss_fwd(any *loss, any *lse, const any *logits, const i64 *targets, const any *weight,
                   i32 n_cols, i64 stride, i64 ignore_index, f32 smoothing, f32 z_coef,
                   const i32 WEIGHTED, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile x = logits + row * stride;
    tile cols = arange(0, BLOCK);
    acc_t m[BLOCK] = -INF;
    acc_t s[BLOCK] = 0;
    acc_t wx[BLOCK] = 0;
    acc_t ws[BLOCK] = 0;
    for (i32 c = 0; c * BLOCK < n_cols; c++) {
        tile offs = c * BLOCK + cols;
        tile inside = offs < n_cols;
        tile v = (acc_t)load(x + offs, inside, -INF);
        tile e = exp(-abs(v - m));
        s = where(v > m, s * e + 1.0f, where(v == -INF, s, s + e));
        m = maximum(m, v);
        tile w = (acc_t)where(inside, 1.0f, 0.0f);
        if (WEIGHTED != 0) {
            w = (acc_t)load(weight + offs, inside, 0.0f);
        }
        wx += where(inside, w * v, 0.0f);
        ws += w;
    }
    acc_t mx = max(m);
    acc_t l = mx + log(sum(s * exp(m - mx)));
    i64 t = load(targets + row);
    bool valid = t >= 0 && t < n_cols;
    acc_t picked = (acc_t)load(x + t, valid, 0.0f);
    acc_t wt = 1.0f;
    if (WEIGHTED != 0) {
        wt = (acc_t)load(weight + t, valid, 0.0f);
    }
    acc_t smooth = sum(ws) * l - sum(wx);
    acc_t value = (1.0f - smoothing) * wt * (l - picked) + smoothing / n_cols * smooth;
    value += z_coef * l * l;
    store(lse + row, l);
    store(loss + row, t == ignore_index ? 0.0f : (valid ? value : NAN));
}

kernel lm_loss_bwd(any *dlogits, const any *logits, const i64 *targets, const any *weight,
                   const any *weight_sum, const any *lse, const any *grad, i32 n_cols,
                   i64 stride, i64 d_stride, i64 ignore_index, f32 smoothing, f32 z_coef,
                   const i32 WEIGHTED, const i32 BLOCK)
{
    i32 row = program_id(0);
    tile offs = program_id(1) * BLOCK + arange(0, BLOCK);
    tile inside = offs < n_cols;
    i64 t = load(targets + row);
    bool valid = t >= 0 && t < n_cols;
    acc_t g = t == ignore_index ? 0.0f : (acc_t)load(grad + row);
    acc_t l = (acc_t)load(lse + row);
    tile v = (acc_t)load(logits + row * stride + offs, inside, 0.0f);
    tile p = exp(v - l);
    tile w = (acc_t)where(inside, 1.0f, 0.0f);
    acc_t wt = 1.0f;
    acc_t total = (acc_t)n_cols;
    if (WEIGHTED != 0) {
        w = (acc_t)load(weight + offs, inside, 0.0f);
        wt = (acc_t)load(weight + t, valid, 0.0f);
        total = (acc_t)load(weight_sum);
    }
    tile hit = where(offs == t, 1.0f, 0.0f);
    tile d = (1.0f - smoothing) * wt * (p - hit) + smoothing / n_cols * (total * p - w);
    d += 2.0f * z_coef * l * p;
    store(dlogits + row * d_stride + offs, g * d, inside);
}
