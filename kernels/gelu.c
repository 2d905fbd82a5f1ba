/* Activations a model trains with, forward and backward: GELU (exact and tanh), ReLU, SiLU, and
 * SwiGLU, silu(gate) * up. Elementwise over n contiguous elements of any float dtype.
 *
 * Each computes in acc_t (f32; f64 for f64 data) and rounds once when it stores.
 * ACT numbers the activation as kernels/matmul.c's epilogue does: 1 GELU (erf), 2 GELU (tanh
 * approximation), 3 ReLU, 4 SiLU, so a linear layer's fused epilogue has its backward here.
 *
 *   activation_fwd:  y = act(x)
 *   activation_bwd:  dx = act'(x) * dy
 *       GELU:       act(x) = x Phi(x),  act'(x) = Phi(x) + x phi(x)
 *       GELU tanh:  act(x) = x (1 + t) / 2, t = tanh(k (x + c x^3)),
 *                   act'(x) = (1 + t) / 2 + x (1 - t^2) k (1 + 3 c x^2) / 2
 *       ReLU:       act'(x) = 1 for x > 0, else 0 (torch's choice at 0)
 *       SiLU:       act(x) = x s, s = sigmoid(x),  act'(x) = s (1 + x (1 - s))
 *   swiglu_fwd:      y = silu(gate) * up
 *   swiglu_bwd:      dgate = dy * up * silu'(gate),  dup = dy * silu(gate)
 */

tile act_fwd(tile x, const i32 ACT)
{
    tile y = x * sigmoid(x);
    if (ACT == 1) {
        y = gelu_exact(x);
    } else if (ACT == 2) {
        y = gelu_tanh(x);
    } else if (ACT == 3) {
        y = where(x < 0.0f, 0.0f, x);
    }
    return y;
}

/* act'(x), ACT as above */
tile act_grad(tile x, const i32 ACT)
{
    tile s = sigmoid(x);
    tile d = s * (1.0f + x * (1.0f - s));
    if (ACT == 1) {
        tile cdf = 0.5f * (1.0f + erf(x * 0.7071067811865476f));
        d = cdf + x * 0.3989422804014327f * exp(-0.5f * x * x);
    } else if (ACT == 2) {
        tile t = tanh(0.7978845608028654f * (x + 0.044715f * x * x * x));
        tile inner = 0.7978845608028654f * (1.0f + 0.134145f * x * x);
        d = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * inner;
    } else if (ACT == 3) {
        tile zero = d * 0.0f;   /* 0 of the computing dtype (d is finite) */
        d = where(x > 0.0f, zero + 1.0f, zero);
    }
    return d;
}

kernel activation_fwd(any *y, const any *x, i32 n, const i32 ACT, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile v = (acc_t)load(x + offs, mask, 0.0f);
    store(y + offs, act_fwd(v, ACT), mask);
}

kernel activation_bwd(any *dx, const any *x, const any *dy, i32 n, const i32 ACT,
                      const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile v = (acc_t)load(x + offs, mask, 0.0f);
    tile g = (acc_t)load(dy + offs, mask, 0.0f);
    store(dx + offs, act_grad(v, ACT) * g, mask);
}

kernel swiglu_fwd(any *y, const any *gate, const any *up, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile g = (acc_t)load(gate + offs, mask, 0.0f);
    tile u = (acc_t)load(up + offs, mask, 0.0f);
    store(y + offs, g * sigmoid(g) * u, mask);
}

kernel swiglu_bwd(any *dgate, any *dup, const any *gate, const any *up, const any *dy, i32 n,
                  const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile g = (acc_t)load(gate + offs, mask, 0.0f);
    tile u = (acc_t)load(up + offs, mask, 0.0f);
    tile d = (acc_t)load(dy + offs, mask, 0.0f);
    tile s = sigmoid(g);
    store(dgate + offs, d * u * s * (1.0f + g * (1.0f - s)), mask);
    store(dup + offs, d * g * s, mask);
}

/* Gated linear units, GeGLU (ACT 2: tanh GELU, as Gemma and Liger; ACT 1: exact) and SwiGLU
 * (ACT 4), ACT numbered as above:
 *   glu_fwd:  y = act(gate) * up
 *   glu_bwd:  dgate = dy * up * act'(gate),  dup = dy * act(gate)   */
kernel glu_fwd(any *y, const any *gate, const any *up, i32 n, const i32 ACT, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile g = (acc_t)load(gate + offs, mask, 0.0f);
    tile u = (acc_t)load(up + offs, mask, 0.0f);
    store(y + offs, act_fwd(g, ACT) * u, mask);
}

kernel glu_bwd(any *dgate, any *dup, const any *gate, const any *up, const any *dy, i32 n,
               const i32 ACT, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile g = (acc_t)load(gate + offs, mask, 0.0f);
    tile u = (acc_t)load(up + offs, mask, 0.0f);
    tile d = (acc_t)load(dy + offs, mask, 0.0f);
    store(dgate + offs, d * u * act_grad(g, ACT), mask);
    store(dup + offs, d * act_fwd(g, ACT), mask);
}
