/* The optimizer family: one step of SGD, Adam, RMSprop, Adagrad or Lion over n contiguous
 * elements of a parameter p, its gradient g and up to three state buffers s0, s1, s2, updated in
 * place in one pass (teeny_tx/library/optimizers.py, the table, numbers ALGO and passes the
 * scalars; torch.optim's arithmetic). p, g and the states are any float dtype (torch keeps the
 * states in the parameter's); the scalars are f64, as torch's are Python floats, so the
 * arithmetic runs in f64 and each stored value is rounded once.
 *
 * FLAGS: 1 maximize (g = -g), 2 nesterov, 4 first (SGD: the momentum buffer starts as g),
 * 8 amsgrad, 16 decoupled weight decay (p *= 1 - lr wd), 32 centered, 64 momentum.
 *
 *   ALGO 1 SGD      g += wd p; buf = first ? g : a buf + (1 - b) g (momentum a, dampening b);
 *                   g = nesterov ? g + a buf : buf; p -= lr g                     s0 = buf
 *   ALGO 2 Adam     g += wd p (or decoupled); m = a m + (1 - a) g; v = b v + (1 - b) g^2;
 *                   vmax = max(vmax, v) (amsgrad); p -= d m / (sqrt(v or vmax) / e + c)
 *                   (betas a, b; eps c; d = lr / (1 - a^t), e = sqrt(1 - b^t))  s0 m, s1 v, s2 vmax
 *   ALGO 3 RMSprop  g += wd p; v = a v + (1 - a) g^2; ga = a ga + (1 - a) g (centered);
 *                   q = sqrt(v - ga^2 or v) + b; buf = c buf + g / q, p -= lr buf (momentum c),
 *                   or p -= lr g / q                                       s0 v, s1 buf, s2 ga
 *   ALGO 4 Adagrad  g += wd p; s += g^2; p -= lr g / (sqrt(s) + a)  (lr: torch's clr; eps a)
 *                                                                                   s0 = s
 *   ALGO 5 Lion     p *= 1 - lr wd; p -= lr sign(a m + (1 - a) g); m = b m + (1 - b) g
 *                                                                                   s0 = m
 *
 * A launch steps one contiguous buffer: teeny_tx.torch's optimizers keep each param group's
 * parameters of one device and dtype (and their gradients and states) as views of flat
 * buffers, so a bucket of any number of tensors steps in one launch.
 */

kernel optim_step(any *p, const any *g, any *s0, any *s1, any *s2, i32 n, f64 lr, f64 wd,
                  f64 a, f64 b, f64 c, f64 d, f64 e, const i32 ALGO, const i32 FLAGS,
                  const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile pv = (f64)load(p + offs, mask, 0.0f);
    tile gv = (f64)load(g + offs, mask, 0.0f);
    if (FLAGS & 1) {
        gv = -gv;
    }
    if (FLAGS & 16 || ALGO == 5) {
        pv = pv * (1.0 - lr * wd);
    } else {
        gv = gv + wd * pv;
    }
    if (ALGO == 1) {        /* SGD */
        if (FLAGS & 64) {
            tile buf = gv;
            if ((FLAGS & 4) == 0) {
                buf = a * (f64)load(s0 + offs, mask, 0.0f) + (1.0 - b) * gv;
            }
            store(s0 + offs, buf, mask);
            if (FLAGS & 2) {
                gv = gv + a * buf;
            } else {
                gv = buf;
            }
        }
        store(p + offs, pv - lr * gv, mask);
    } else if (ALGO == 2) { /* Adam */
        tile m = a * (f64)load(s0 + offs, mask, 0.0f) + (1.0 - a) * gv;
        tile v = b * (f64)load(s1 + offs, mask, 0.0f) + (1.0 - b) * gv * gv;
        store(s0 + offs, m, mask);
        store(s1 + offs, v, mask);
        tile top = v;
        if (FLAGS & 8) {
            top = maximum((f64)load(s2 + offs, mask, 0.0f), v);
            store(s2 + offs, top, mask);
        }
        store(p + offs, pv - d * m / (sqrt(top) / e + c), mask);
    } else if (ALGO == 3) { /* RMSprop */
        tile v = a * (f64)load(s0 + offs, mask, 0.0f) + (1.0 - a) * gv * gv;
        store(s0 + offs, v, mask);
        tile q = v;
        if (FLAGS & 32) {
            tile ga = a * (f64)load(s2 + offs, mask, 0.0f) + (1.0 - a) * gv;
            store(s2 + offs, ga, mask);
            q = v - ga * ga;
        }
        q = sqrt(q) + b;
        if (FLAGS & 64) {
            tile buf = c * (f64)load(s1 + offs, mask, 0.0f) + gv / q;
            store(s1 + offs, buf, mask);
            store(p + offs, pv - lr * buf, mask);
        } else {
            store(p + offs, pv - lr * gv / q, mask);
        }
    } else if (ALGO == 4) { /* Adagrad */
        tile s = (f64)load(s0 + offs, mask, 0.0f) + gv * gv;
        store(s0 + offs, s, mask);
        store(p + offs, pv - lr * gv / (sqrt(s) + a), mask);
    } else if (ALGO == 5) { /* Lion */
        tile m = (f64)load(s0 + offs, mask, 0.0f);
        tile u = a * m + (1.0 - a) * gv;
        tile sign = where(u > 0.0, 1.0, where(u < 0.0, -1.0, 0.0));
        store(p + offs, pv - lr * sign, mask);
        store(s0 + offs, b * m + (1.0 - b) * gv, mask);
    }
}
