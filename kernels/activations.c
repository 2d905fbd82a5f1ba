/* Fused elementwise activations: out = f(x), for f16, bf16 and f32 data.
 * Each computes in f32 and rounds once when it stores into out's dtype. gelu_exact and
 * gelu_tanh are helpers of the prelude (prelude/activations.h), shared with kernels/matmul.c. */

/* GELU: exact (erf) or, with APPROXIMATE, the tanh approximation. */
kernel gelu(any *out, const any *in, i32 n, const i32 APPROXIMATE, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile x = (f32)load(in + offs, mask, 0.0f);
    if (APPROXIMATE) {
        store(out + offs, gelu_tanh(x), mask);
    } else {
        store(out + offs, gelu_exact(x), mask);
    }
}

/* SiLU (swish): x * sigmoid(x). */
kernel silu(any *out, const any *in, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile x = (f32)load(in + offs, mask, 0.0f);
    store(out + offs, x * sigmoid(x), mask);
}

/* Leaky ReLU: x where x >= 0, slope * x elsewhere. */
kernel leaky_relu(any *out, const any *in, f32 slope, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile x = (f32)load(in + offs, mask, 0.0f);
    store(out + offs, where(x >= 0.0f, x, slope * x), mask);
}

/* Clamp to [lo, hi]; a NaN input stays NaN. */
kernel clamp(any *out, const any *in, f32 lo, f32 hi, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile x = (f32)load(in + offs, mask, 0.0f);
    store(out + offs, where(x < lo, lo, where(x > hi, hi, x)), mask);
}
