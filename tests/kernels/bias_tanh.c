/* A fused op with its backward, the worked example of docs/graph-ops.md (and its test,
 * tests/test_torch_graph_ops.py): y = tanh(x + bias) over x [rows, cols] (row stride in
 * elements, columns contiguous) and bias [cols]; y is contiguous.
 *
 *   bias_tanh_fwd:  y = tanh(x + bias)
 *   bias_tanh_bwd:  dx = dy * (1 - y^2),  dbias = sum over rows of dx
 *
 * Program (i, j) handles BLOCK_R rows and BLOCK_C columns. dbias is summed with one relaxed
 * atomic add per column per program into a zeroed dbias. Arithmetic runs in the data's dtype
 * (tanh of f16/bf16 in f32, rounded once). */

kernel bias_tanh_fwd(any *y, const any *x, const any *bias, i32 rows, i32 cols, i32 stride,
                     const i32 BLOCK_R, const i32 BLOCK_C)
{
    tile r = expand_dims(program_id(0) * BLOCK_R + arange(0, BLOCK_R), 1);
    tile c = expand_dims(program_id(1) * BLOCK_C + arange(0, BLOCK_C), 0);
    tile mask = (r < rows) & (c < cols);
    tile v = load(x + r * stride + c, mask, 0.0f) + load(bias + c, c < cols, 0.0f);
    store(y + r * cols + c, tanh(v), mask);
}

kernel bias_tanh_bwd(any *dx, any *dbias, const any *y, const any *dy, i32 rows, i32 cols,
                     const i32 BLOCK_R, const i32 BLOCK_C)
{
    tile cols_here = program_id(1) * BLOCK_C + arange(0, BLOCK_C);
    tile r = expand_dims(program_id(0) * BLOCK_R + arange(0, BLOCK_R), 1);
    tile c = expand_dims(cols_here, 0);
    tile mask = (r < rows) & (c < cols);
    tile t = load(y + r * cols + c, mask, 0.0f);
    tile d = load(dy + r * cols + c, mask, 0.0f) * (1.0f - t * t);
    store(dx + r * cols + c, d, mask);
    atomic_add(dbias + cols_here, sum(d, 0), cols_here < cols, RELAXED);
}
