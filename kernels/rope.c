/* Rotary position embedding (RoPE) of the queries and keys of attention, forward and backward,
 * both in one launch.
 *
 * q [B, Hq, N, D] and k [B, Hk, N, D] (f16, bf16, f32 or f64; batch, head and token strides in
 * elements, the head dimension contiguous); q_out and k_out contiguous [B, H, N, D]. cos and
 * sin [rows, D] contiguous, in the layout of Hugging Face's rotary embeddings: the row of
 * token (b, n) is positions[b * N + n] when POS != 0 (position ids, i64 [B * N]), else
 * b * cs_batch + n (cs_batch 0 for one table shared by the batch, N for one per sequence).
 *
 * Each head's D elements are D / 2 pairs (x1, x2) at offsets (p1, p2):
 *   INTERLEAVED = 0 (Llama, GPT-NeoX: rotate_half):   p1 = i,      p2 = i + D / 2
 *   INTERLEAVED = 1 (GPT-J, the original RoFormer):  p1 = 2 i,    p2 = 2 i + 1
 * and with c1 = cos[row, p1], c2 = cos[row, p2], s1 = sin[row, p1], s2 = sin[row, p2]:
 *   forward  (BACKWARD = 0):  o1 = x1 c1 - x2 s1,   o2 = x2 c2 + x1 s2
 *   backward (BACKWARD = 1):  the transpose, d1 = g1 c1 + g2 s2,   d2 = g2 c2 - g1 s1
 * (Hugging Face's q * cos + rotate_half(q) * sin, for any table, not only one whose halves
 * repeat). Computed in acc_t (f32; f64 for f64 data), rounded once at the store.
 *
 * A program is one token (b, n): all Hq query heads and all Hk key heads of it, a [HEADS, HALF]
 * tile each (HEADS >= max(Hq, Hk), HALF >= D / 2, powers of two), the token's cos and sin
 * loaded once.
 */

kernel rope(any *q_out, any *k_out, const any *q, const any *k, const any *cos, const any *sin,
            const i64 *positions, i32 n_tokens, i32 q_heads, i32 k_heads, i32 half,
            i64 q_sb, i64 q_sh, i64 q_sn, i64 k_sb, i64 k_sh, i64 k_sn, i32 cs_batch,
            const i32 POS, const i32 INTERLEAVED, const i32 BACKWARD, const i32 HEADS,
            const i32 HALF)
{
    i32 token = program_id(0);
    i32 b = token / n_tokens;
    i32 n = token - b * n_tokens;
    i64 row = (i64)b * cs_batch + n;
    if (POS != 0) {
        row = load(positions + token);
    }
    tile i = expand_dims(arange(0, HALF), 0);
    tile hh = expand_dims(arange(0, HEADS), 1);
    tile p1 = i;
    tile p2 = i + half;
    if (INTERLEAVED != 0) {
        p1 = 2 * i;
        p2 = 2 * i + 1;
    }
    tile pair = i < half;
    tile c1 = (acc_t)load(cos + row * (2 * half) + p1, pair, 0.0f);
    tile c2 = (acc_t)load(cos + row * (2 * half) + p2, pair, 0.0f);
    tile s1 = (acc_t)load(sin + row * (2 * half) + p1, pair, 0.0f);
    tile s2 = (acc_t)load(sin + row * (2 * half) + p2, pair, 0.0f);
    tile a = s1; /* o1 = x1 c1 - x2 a */
    tile e = s2; /* o2 = x2 c2 + x1 e */
    if (BACKWARD != 0) {
        a = -s2;
        e = -s1;
    }

    tile qm = (hh < q_heads) & pair;
    tile qx = q + ((i64)b * q_sb + (i64)n * q_sn) + hh * q_sh;
    tile q1 = (acc_t)load(qx + p1, qm, 0.0f);
    tile q2 = (acc_t)load(qx + p2, qm, 0.0f);
    tile qo = q_out + (((i64)b * q_heads * n_tokens + n) * (2 * half)) + hh * (n_tokens * 2 * half);
    store(qo + p1, q1 * c1 - q2 * a, qm);
    store(qo + p2, q2 * c2 + q1 * e, qm);

    tile km = (hh < k_heads) & pair;
    tile kx = k + ((i64)b * k_sb + (i64)n * k_sn) + hh * k_sh;
    tile k1 = (acc_t)load(kx + p1, km, 0.0f);
    tile k2 = (acc_t)load(kx + p2, km, 0.0f);
    tile ko = k_out + (((i64)b * k_heads * n_tokens + n) * (2 * half)) + hh * (n_tokens * 2 * half);
    store(ko + p1, k1 * c1 - k2 * a, km);
    store(ko + p2, k2 * c2 + k1 * e, km);
}
