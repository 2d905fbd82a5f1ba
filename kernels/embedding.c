/* Embedding lookup and its backward: out[t, :] = weight[indices[t], :] for n_tokens tokens of
 * dim features, and dweight[indices[t], :] += dy[t, :].
 *
 * weight [num, dim] (row stride w_stride, any float dtype), indices [n_tokens] i64, out and dy
 * [n_tokens, dim] contiguous. Program (i, j) handles BLOCK_T tokens and BLOCK_D features. An
 * index outside [0, num) reads NaN (never memory outside the table) and adds nothing.
 *
 * The backward scatters with relaxed atomic adds into dw, an f32 table (f64 for f64 data)
 * zeroed by the caller: no sort, one pass over dy. Tokens sharing an index add in an order the
 * GPU chooses, so f32 sums can differ in the last bits between runs (the interpreter adds in
 * program order).
 */

kernel embedding_fwd(any *out, const any *weight, const i64 *indices, i32 n_tokens, i32 dim,
                     i32 num, i32 w_stride, const i32 BLOCK_T, const i32 BLOCK_D)
{
    tile t = program_id(0) * BLOCK_T + arange(0, BLOCK_T);
    tile d = expand_dims(program_id(1) * BLOCK_D + arange(0, BLOCK_D), 0);
    tile tokens = t < n_tokens;
    tile idx = load(indices + t, tokens, 0);
    tile valid = expand_dims(tokens & (idx >= 0) & (idx < num), 1) & (d < dim);
    tile mask = expand_dims(tokens, 1) & (d < dim);
    tile v = load(weight + expand_dims(idx, 1) * w_stride + d, valid, NAN);
    store(out + expand_dims(t, 1) * dim + d, v, mask);
}

kernel embedding_bwd(any *dw, const any *dy, const i64 *indices, i32 n_tokens, i32 dim, i32 num,
                     const i32 BLOCK_T, const i32 BLOCK_D)
{
    tile t = program_id(0) * BLOCK_T + arange(0, BLOCK_T);
    tile d = expand_dims(program_id(1) * BLOCK_D + arange(0, BLOCK_D), 0);
    tile tokens = t < n_tokens;
    tile idx = load(indices + t, tokens, 0);
    tile valid = expand_dims(tokens & (idx >= 0) & (idx < num), 1) & (d < dim);
    tile g = load(dy + expand_dims(t, 1) * dim + d, valid, 0.0f);
    atomic_add(dw + expand_dims(idx, 1) * dim + d, g, valid, RELAXED);
}
