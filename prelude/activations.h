/* teeny_tx prelude: activation functions, as helpers written in the language.
 *
 * Functions with a body in the prelude are helpers like those of a kernel file: visible to
 * every kernel and inlined at each call (a kernel file cannot define one of the same name).
 * They compute in the dtype of their argument: convert f16/bf16 to f32 first, e.g.
 * gelu_exact((f32)x), to compute in f32 and round once at the store, as kernels/activations.c
 * and kernels/matmul.c do.
 */

/* GELU, exact form: x * Phi(x), the normal CDF written through erf (PyTorch's default). */
tile gelu_exact(tile x)
{
    return 0.5f * x * (1.0f + erf(x * 0.7071067811865476f));
}

/* GELU, tanh approximation (GPT-2; PyTorch's approximate='tanh'). */
tile gelu_tanh(tile x)
{
    tile inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanh(inner));
}
