/* The pointwise activation family: y = act(x) and dx = act'(x) * dy over n contiguous elements
 * of any float dtype, computed in acc_t (f32; f64 for f64 data) and rounded once at the store.
 *
 * ACT selects the activation (a constexpr: each specialisation keeps one branch); a and b are
 * its parameters (torch's names in teeny_tx/library/families.py, the table that numbers ACT
 * and generates the ops, modules and docs from these two kernels). Adding an activation is a
 * branch in pw_fwd, a branch in pw_grad and a row of that table.
 *
 * PReLU's parameter is a tensor, one slope per channel: prelu_fwd and prelu_bwd read a = w[c]
 * for each element (x as [N, C, inner]) and call the same helpers; prelu_bwd also sums
 * x * dy where x <= 0 per row (n, c), which prelu_wsum adds up per channel (dweight).
 */

/* log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|) */
tile pw_softplus(tile x)
{
    return maximum(x, 0.0f) + log(1.0f + exp(-abs(x)));
}

/* act(x) for ACT; a, b the activation's parameters (scalars, or PReLU's per-element slope) */
tile pw_fwd(tile x, tile a, tile b, const i32 ACT)
{
    tile y = x;
    if (ACT == 1) {         /* elu(alpha=a) */
        y = where(x > 0.0f, x, a * (exp(x) - 1.0f));
    } else if (ACT == 2) {  /* selu */
        y = 1.0507009873554804934193349852946f
            * where(x > 0.0f, x, 1.6732632423543772848170429916717f * (exp(x) - 1.0f));
    } else if (ACT == 3) {  /* celu(alpha=a) */
        y = where(x > 0.0f, x, a * (exp(x / a) - 1.0f));
    } else if (ACT == 4) {  /* mish */
        y = x * tanh(pw_softplus(x));
    } else if (ACT == 5) {  /* hardswish */
        y = x * minimum(maximum(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    } else if (ACT == 6) {  /* hardsigmoid; NaN stays NaN */
        y = where(x != x, x, minimum(maximum(x + 3.0f, 0.0f), 6.0f) / 6.0f);
    } else if (ACT == 7) {  /* hardtanh(min_val=a, max_val=b); NaN stays NaN */
        y = where(x < a, a, where(x > b, b, x));
    } else if (ACT == 8) {  /* softplus(beta=a, threshold=b) */
        y = where(x * a > b, x, pw_softplus(x * a) / a);
    } else if (ACT == 9) {  /* softsign */
        y = x / (1.0f + abs(x));
    } else if (ACT == 10) { /* tanhshrink */
        y = x - tanh(x);
    } else if (ACT == 11) { /* logsigmoid */
        y = minimum(x, 0.0f) - log(1.0f + exp(-abs(x)));
    } else if (ACT == 12) { /* sigmoid */
        y = sigmoid(x);
    } else if (ACT == 13) { /* tanh */
        y = tanh(x);
    } else if (ACT == 14) { /* relu6; NaN stays NaN */
        y = where(x < 0.0f, 0.0f, where(x > 6.0f, 6.0f, x));
    } else if (ACT == 15) { /* threshold(threshold=a, value=b); NaN stays NaN */
        y = where(x <= a, b, x);
    } else if (ACT == 16) { /* prelu(weight: a per element) */
        y = where(x > 0.0f, x, a * x);
    }
    return y;
}

/* act'(x) for ACT, with torch's choices at the kinks */
tile pw_grad(tile x, tile a, tile b, const i32 ACT)
{
    tile zero = minimum(abs(x), 0.0f); /* 0 in x's dtype and shape, also where x is inf */
    tile one = zero + 1.0f;
    tile d = one;
    if (ACT == 1) { /* (the x <= 0 test: NaN takes the x > 0 branch's 1, as in torch) */
        d = where(x <= 0.0f, a * exp(x), one);
    } else if (ACT == 2) {
        d = 1.0507009873554804934193349852946f
            * where(x <= 0.0f, 1.6732632423543772848170429916717f * exp(x), one);
    } else if (ACT == 3) {
        d = where(x <= 0.0f, exp(x / a), one);
    } else if (ACT == 4) {
        tile t = tanh(pw_softplus(x));
        d = t + x * sigmoid(x) * (1.0f - t * t);
    } else if (ACT == 5) {
        d = where(x <= -3.0f, zero, where(x < 3.0f, x / 3.0f + 0.5f, one));
    } else if (ACT == 6) {
        d = where(x > -3.0f && x < 3.0f, zero + 1.0f / 6.0f, zero);
    } else if (ACT == 7) {
        d = where(x <= a || x >= b, zero, one);
    } else if (ACT == 8) {
        d = where(x * a > b, one, sigmoid(x * a));
    } else if (ACT == 9) {
        tile r = 1.0f / (1.0f + abs(x));
        d = r * r;
    } else if (ACT == 10) {
        tile t = tanh(x);
        d = t * t;
    } else if (ACT == 11) {
        d = sigmoid(-x);
    } else if (ACT == 12) {
        tile s = sigmoid(x);
        d = s * (1.0f - s);
    } else if (ACT == 13) {
        tile t = tanh(x);
        d = 1.0f - t * t;
    } else if (ACT == 14) {
        d = where(x <= 0.0f || x >= 6.0f, zero, one);
    } else if (ACT == 15) {
        d = where(x <= a, zero, one);
    } else if (ACT == 16) {
        d = where(x > 0.0f, one, zero + a);
    }
    return d;
}

kernel pointwise_fwd(any *y, const any *x, f32 a, f32 b, i32 n, const i32 ACT, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile v = (acc_t)load(x + offs, mask, 0.0f);
    store(y + offs, pw_fwd(v, a, b, ACT), mask);
}

kernel pointwise_bwd(any *dx, const any *x, const any *dy, f32 a, f32 b, i32 n, const i32 ACT,
                     const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile v = (acc_t)load(x + offs, mask, 0.0f);
    tile g = (acc_t)load(dy + offs, mask, 0.0f);
    store(dx + offs, pw_grad(v, a, b, ACT) * g, mask);
}

/* PReLU: y = x where x > 0, else w[c] x, over n elements of x as [N, C, inner] (C = 1: one
 * slope for all) */
kernel prelu_fwd(any *y, const any *x, const any *w, i32 n, i32 C, i32 inner, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile v = (acc_t)load(x + offs, mask, 0.0f);
    tile a = (acc_t)load(w + (offs / inner) % C, mask, 0.0f);
    store(y + offs, pw_fwd(v, a, 0.0f, 16), mask);
}

/* dx = dy where x > 0, else w[c] dy; part[r] = the sum of x dy where x <= 0 over row r =
 * (n, c) of inner elements; ROWS rows per program, BLOCK of their elements at a time */
kernel prelu_bwd(any *dx, any *part, const any *x, const any *dy, const any *w, i32 rows, i32 C,
                 i32 inner, const i32 ROWS, const i32 BLOCK)
{
    tile r = program_id(0) * ROWS + arange(0, ROWS);
    tile r2 = expand_dims(r, 1);
    tile a = expand_dims((acc_t)load(w + r % C, r < rows, 0.0f), 1);
    tile cols = expand_dims(arange(0, BLOCK), 0);
    acc_t acc[ROWS][BLOCK] = 0;
    for (i32 s = 0; s < inner; s += BLOCK) {
        tile mask = (r2 < rows) & (s + cols < inner);
        tile offs = r2 * inner + s + cols;
        tile v = (acc_t)load(x + offs, mask, 0.0f);
        tile g = (acc_t)load(dy + offs, mask, 0.0f);
        store(dx + offs, pw_grad(v, a, 0.0f, 16) * g, mask);
        acc += where(v > 0.0f, 0.0f, v * g);
    }
    store(part + r, sum(acc, 1), r < rows);
}

/* dw[c] = the sum over the N rows (n, c) of part */
kernel prelu_wsum(any *dw, const any *part, i32 N, i32 C, const i32 BLOCK)
{
    tile c = program_id(0) * BLOCK + arange(0, BLOCK);
    acc_t acc[BLOCK] = 0;
    for (i32 i = 0; i < N; i++) {
        acc += (acc_t)load(part + i * C + c, c < C, 0.0f);
    }
    store(dw + c, acc, c < C);
}
