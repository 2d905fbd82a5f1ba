/* Attention: FlashAttention-2, forward and backward (Dao, 2023; the schedule of Triton's
 * fused-attention tutorial), for q [B, N_q, H_q, D], k and v [B, N_kv, H_kv, D], any strides.
 *
 *   O = softmax(scale * Q K^T + causal mask) V        LSE = log(rowsum(exp(scale * Q K^T)))
 *
 * Each array is addressed through four strides (batch, head, row, column), so a [B, N, H, D]
 * tensor, its [B, H, N, D] transpose or a slice of a fused QKV projection are read in place; a
 * column stride of 1 (the usual case) is specialised as the constant 1, so rows are read 16
 * bytes at a time. lse and delta are f32 [B, H_q, N_q], contiguous. Grouped-query attention:
 * query head h reads key/value head h / group (group = H_q / H_kv). BAND = 1 keeps only the keys
 * of a band, i + lo <= j <= i + hi (causal top left: hi = 0; bottom right: hi = N_kv - N_q;
 * a sliding window bounds both sides; the wrapper's band() makes lo and hi), skipping the key
 * blocks outside it; a row that sees no key gives o = 0 and lse = +inf (the overlapped forward
 * keeps CAUSAL, the top-left triangle). SOFTCAP = 1 takes cap * tanh(scale * s / cap) for the
 * scores (cap_in = scale / cap, cap_out = cap * log2(e)), the backward multiplying dS by
 * 1 - tanh^2. f16 or bf16 data (BF16 = 1 for bf16: the dtype P and dS are rounded to before
 * their products); f32 accumulation; D, the head-dim tile, 32, 64, 128 or 256; DH the head
 * dim, any from 32 to 256: where DH < D the loads and stores are masked on the column axis too
 * (head_cols, head_mask). ALIBI = 1 subtracts slope_h * |i + alibi_off - j| from the scores
 * (slopes f32, [B, H_q] with batch stride ssb, 0 for [H_q]; FlashAttention's alibi_off =
 * N_kv - N_q).
 *
 * Softmax in base 2: the wrapper passes qk_scale = scale * log2(e), so exp(scale * s - m) is
 * exp2(qk_scale * s - m') with one multiply folded into the scores. The exponentials are
 * fast_exp2 (one MUFU.EX2 each, probabilities below 2^-126 flushed to zero, which no sum of
 * them can tell from zero), not exp2, whose subnormal fix-up costs three more instructions per
 * score.
 *
 * A key block that the band's edges or the ragged end of the sequence cuts gets its mask;
 * the others (all but one or two per row of blocks) skip it; blocks wholly outside the band
 * are never visited (the loop bounds come from program_id). WARP_SPECIALIZE: lower/warp_spec.py */

/* A padded head dim (DH < D): the columns of a [rows, D] tile, c * stride for c < D, and the
 * mask of those within the head dim, c < DH: the tile reads zeros past DH and writes nothing
 * there. Each load and store spells its columns out with these rather than sharing the column
 * index rd, which a store of an accumulator would pull into the accumulator's layout (its
 * slice does not tile a block of another number of rows). A head dim that is a multiple of 8
 * promises (multiple_of) that each row's offset from the array's own pointer is a multiple of
 * 8 elements: the wrapper passes only arrays whose strides are multiples of 8 elements and
 * whose addresses are 16-byte aligned (else a copy), so those loads stay 16-byte copies and
 * pipeline where strides of 40 or 72 elements alone (not multiples of 16) would not. DH == D
 * takes the first operand of each `DH == D ? ... : ...`: the kernels as they were. */
tile head_cols(i32 stride, const i32 D)
{
    return expand_dims(arange(0, D), 0) * stride;
}

tile head_mask(const i32 D, const i32 DH)
{
    return expand_dims(arange(0, D), 0) < DH;
}

#pragma autotune key(n_q, n_kv)
#pragma autotune config(BM=128, BN=64, num_warps=8, num_stages=2)
#pragma autotune config(BM=128, BN=128, num_warps=8, num_stages=2)
#pragma autotune config(BM=64, BN=64, num_warps=4, num_stages=2)
#pragma autotune config(BM=128, BN=64, num_warps=8, num_stages=3)
#pragma autotune config(BM=128, BN=128, num_warps=8, num_stages=3)
kernel attention_fwd(any *o, f32 *lse, const any *q, const any *k, const any *v,
                     i32 n_q, i32 n_kv, i32 h_q, i32 group, i32 lo, i32 hi,
                     i32 sqb, i32 sqh, i32 sqn, i32 sqd, i32 skb, i32 skh, i32 skn, i32 skd,
                     i32 svb, i32 svh, i32 svn, i32 svd, i32 sob, i32 soh, i32 son, i32 sod,
                     f32 qk_scale, f32 cap_in, f32 cap_out, const f32 *slopes, i32 ssb,
                     i32 alibi_off, const i32 BAND, const i32 SOFTCAP, const i32 ALIBI,
                     const i32 BF16, const i32 D, const i32 DH, const i32 BM, const i32 BN,
                     const i32 WARP_SPECIALIZE)
{
    i32 pid_m = program_id(0);
    i32 bh = program_id(1);
    i32 b = bh / h_q;
    i32 h = bh % h_q;
    i32 hk = h / group;
    tile rm = pid_m * BM + arange(0, BM);
    tile rn = arange(0, BN);
    tile rd = expand_dims(arange(0, D), 0);
    tile q_t = load(DH == D ? q + b * sqb + h * sqh + expand_dims(rm, 1) * sqn + rd * sqd
                            : q + multiple_of(b * sqb + h * sqh + expand_dims(rm, 1) * sqn
                                              + head_cols(sqd, D), DH % 8 ? 1 : 8),
                    DH == D ? expand_dims(rm, 1) < n_q
                            : (expand_dims(rm, 1) < n_q) & head_mask(D, DH), 0);
    tile kh = k + b * skb + hk * skh;
    tile vh = v + b * svb + hk * svh;
    /* ALIBI: the scores less slope_h * |i + alibi_off - j| (base 2: the slope times log2(e)) */
    f32 slope2 = ALIBI ? load(slopes + b * ssb + h) * 1.4426950408889634f : 0.0f;
    /* BAND: a row may see no key in a block, or in any: its maximum starts at -1e30, not
     * -inf, so that its p and alpha are exp2(-inf - m) = 0, not exp2(-inf + inf) = NaN */
    f32 m_i[BM] = BAND ? -1.0e30f : -INF;
    f32 l_i[BM] = 0;
    f32 acc[BM][D] = 0;
    /* keys [first, last): those the block's rows see; a block that starts before u_lo or
     * ends past u_hi needs the mask (the band's edges or the ragged end) */
    i32 m0 = pid_m * BM;
    i32 first = BAND ? maximum(m0 + lo, 0) / BN * BN : 0;
    i32 last = BAND ? minimum(m0 + BM + hi, n_kv) : n_kv;
    i32 u_lo = m0 + BM - 1 + lo;
    i32 u_hi = BAND ? minimum(m0 + hi + 1, n_kv) : n_kv;
    for (i32 start = first; start < last; start += BN) {
        tile k_t = load(DH == D ? kh + (expand_dims(rn, 1) + start) * skn + rd * skd
                                : k + multiple_of(b * skb + hk * skh
                                                  + (expand_dims(rn, 1) + start) * skn
                                                  + head_cols(skd, D), DH % 8 ? 1 : 8),
                        DH == D ? expand_dims(rn, 1) + start < n_kv
                                : (expand_dims(rn, 1) + start < n_kv) & head_mask(D, DH), 0);
        tile v_t = load(DH == D ? vh + (expand_dims(rn, 1) + start) * svn + rd * svd
                                : v + multiple_of(b * svb + hk * svh
                                                  + (expand_dims(rn, 1) + start) * svn
                                                  + head_cols(svd, D), DH % 8 ? 1 : 8),
                        DH == D ? expand_dims(rn, 1) + start < n_kv
                                : (expand_dims(rn, 1) + start < n_kv) & head_mask(D, DH), 0);
        /* [BM, BN], base 2; SOFTCAP: cap * tanh(scale * s / cap), times log2(e) */
        tile s = SOFTCAP ? tanh(dot(q_t, trans(k_t)) * cap_in) * cap_out
                         : dot(q_t, trans(k_t)) * qk_scale;
        if (ALIBI) {
            s = s - slope2 * (f32)abs(expand_dims(rm, 1) + alibi_off - expand_dims(start + rn, 0));
        }
        if (BAND ? (start < u_lo) | (start + BN > u_hi) : start + BN > u_hi) {
            tile kn = expand_dims(start + rn, 0);
            tile ok = BAND ? (kn < n_kv) & (kn <= expand_dims(rm, 1) + hi)
                                 & (kn >= expand_dims(rm, 1) + lo)
                           : kn < n_kv;
            s = where(ok, s, -INF);
        }
        tile m_new = maximum(m_i, max(s, 1));
        tile p = fast_exp2(s - expand_dims(m_new, 1));
        tile alpha = fast_exp2(m_i - m_new);
        l_i = l_i * alpha + sum(p, 1);
        acc = acc * expand_dims(alpha, 1);
        if (BF16) {
            acc = dot((bf16)p, v_t, acc);
        } else {
            acc = dot((f16)p, v_t, acc);
        }
        m_i = m_new;
    }
    /* a row that sees no key (BAND): o = 0 (a row that sees one has l_i >= 1: its maximum's
     * exp2(0)), and lse = +inf, so the backward's P is 0 */
    store(DH == D ? o + b * sob + h * soh + expand_dims(rm, 1) * son + rd * sod
                  : o + multiple_of(b * sob + h * soh + expand_dims(rm, 1) * son
                                    + head_cols(sod, D), DH % 8 ? 1 : 8),
          BAND ? acc / maximum(expand_dims(l_i, 1), 1.0f) : acc / expand_dims(l_i, 1),
          DH == D ? expand_dims(rm, 1) < n_q : (expand_dims(rm, 1) < n_q) & head_mask(D, DH));
    store(lse + bh * n_q + rm,
          BAND ? where(l_i == 0.0f, INF, (m_i + log2(l_i)) * 0.6931471805599453f)
               : (m_i + log2(l_i)) * 0.6931471805599453f,
          rm < n_q);
}

/* The same forward with the softmax of one key block overlapping the tensor cores (the
 * intra-warpgroup overlap of FlashAttention-3): the loop's iteration issues the scores of key
 * block j + 1 and the product of block j's probabilities with its values one after the other,
 * then computes block j + 1's softmax while the second product runs. On sm_90a the compiler
 * issues a dot that is a statement's whole value without waiting for it and waits just before
 * its result's first use (lower/dot_plan.py): `s = s * qk_scale` waits for the scores only,
 * `acc = acc * alpha` for the product. Key block 0's scores come before the loop and the last
 * block's product after it, so K is read one block ahead of V. WARP_SPECIALIZE: as above. */
#pragma autotune key(n_q, n_kv)
#pragma autotune config(BM=128, BN=64, num_warps=8, num_stages=2)
#pragma autotune config(BM=128, BN=64, num_warps=8, num_stages=3)
#pragma autotune config(BM=128, BN=128, num_warps=8, num_stages=2)
kernel attention_fwd_overlap(any *o, f32 *lse, const any *q, const any *k, const any *v,
                             i32 n_q, i32 n_kv, i32 h_q, i32 group,
                             i32 sqb, i32 sqh, i32 sqn, i32 sqd, i32 skb, i32 skh, i32 skn,
                             i32 skd, i32 svb, i32 svh, i32 svn, i32 svd,
                             i32 sob, i32 soh, i32 son, i32 sod,
                             f32 qk_scale, const i32 CAUSAL, const i32 BF16, const i32 D,
                             const i32 BM, const i32 BN, const i32 WARP_SPECIALIZE)
{
    i32 pid_m = program_id(0);
    i32 bh = program_id(1);
    i32 b = bh / h_q;
    i32 h = bh % h_q;
    i32 hk = h / group;
    tile rm = pid_m * BM + arange(0, BM);
    tile rn = arange(0, BN);
    tile rd = expand_dims(arange(0, D), 0);
    tile q_t = load(q + b * sqb + h * sqh + expand_dims(rm, 1) * sqn + rd * sqd,
                    expand_dims(rm, 1) < n_q, 0);
    tile kh = k + b * skb + hk * skh;
    tile vh = v + b * svb + hk * svh;
    f32 acc[BM][D] = 0;
    i32 hi = CAUSAL ? minimum((pid_m + 1) * BM, n_kv) : n_kv;
    i32 masked = CAUSAL ? minimum(pid_m * BM + 1, n_kv) : n_kv;
    /* key block 0: its scores and their softmax */
    tile k_0 = load(kh + expand_dims(rn, 1) * skn + rd * skd, expand_dims(rn, 1) < n_kv, 0);
    tile s_0 = dot(q_t, trans(k_0)) * qk_scale;
    if (BN > masked) {
        tile kn = expand_dims(rn, 0);
        tile ok = CAUSAL ? (kn < n_kv) & (kn <= expand_dims(rm, 1)) : kn < n_kv;
        s_0 = where(ok, s_0, -INF);
    }
    tile m_i = max(s_0, 1);
    tile p_0 = fast_exp2(s_0 - expand_dims(m_i, 1));
    tile l_i = sum(p_0, 1);
    tile p = BF16 ? (bf16)p_0 : (f16)p_0;           /* the 16-bit P the loop carries */
    /* iteration `start`: values of key block `start`, keys of the block after it */
    for (i32 start = 0; start + BN < hi; start += BN) {
        tile k_t = load(kh + (expand_dims(rn, 1) + start + BN) * skn + rd * skd,
                        expand_dims(rn, 1) + start + BN < n_kv, 0);
        tile v_t = load(vh + (expand_dims(rn, 1) + start) * svn + rd * svd,
                        expand_dims(rn, 1) + start < n_kv, 0);
        tile s = dot(q_t, trans(k_t));                                /* issued, runs on */
        acc = dot(p, v_t, acc);                                       /* queued behind it */
        s = s * qk_scale;                                             /* waits for s only */
        if (start + 2 * BN > masked) {
            tile kn = expand_dims(start + BN + rn, 0);
            tile ok = CAUSAL ? (kn < n_kv) & (kn <= expand_dims(rm, 1)) : kn < n_kv;
            s = where(ok, s, -INF);
        }
        tile m_new = maximum(m_i, max(s, 1));
        tile p_j = fast_exp2(s - expand_dims(m_new, 1));
        tile alpha = fast_exp2(m_i - m_new);
        l_i = l_i * alpha + sum(p_j, 1);
        acc = acc * expand_dims(alpha, 1);                            /* waits for acc */
        p = BF16 ? (bf16)p_j : (f16)p_j;        /* A's registers: written once it is read */
        m_i = m_new;
    }
    /* the last key block's product */
    i32 last = (hi - 1) / BN * BN;
    tile v_l = load(vh + (expand_dims(rn, 1) + last) * svn + rd * svd,
                    expand_dims(rn, 1) + last < n_kv, 0);
    acc = dot(p, v_l, acc);
    store(o + b * sob + h * soh + expand_dims(rm, 1) * son + rd * sod,
          acc / expand_dims(l_i, 1), expand_dims(rm, 1) < n_q);
    store(lse + bh * n_q + rm, (m_i + log2(l_i)) * 0.6931471805599453f, rm < n_q);
}

/* delta = rowsum(dO * O), f32 [B, H_q, N_q]: the backward's correction term. */
kernel attention_bwd_preprocess(f32 *delta, const any *o, const any *d_o, i32 n_q, i32 h_q,
                                i32 sob, i32 soh, i32 son, i32 sod,
                                i32 sdb, i32 sdh, i32 sdn, i32 sdd, const i32 D, const i32 DH,
                                const i32 BM)
{
    i32 bh = program_id(1);
    i32 b = bh / h_q;
    i32 h = bh % h_q;
    tile rm = program_id(0) * BM + arange(0, BM);
    tile rd = expand_dims(arange(0, D), 0);
    tile row = expand_dims(rm, 1) < n_q;
    tile o_t = (f32)load(DH == D ? o + b * sob + h * soh + expand_dims(rm, 1) * son + rd * sod
                                 : o + multiple_of(b * sob + h * soh + expand_dims(rm, 1) * son
                                                   + head_cols(sod, D), DH % 8 ? 1 : 8),
                         DH == D ? row : row & head_mask(D, DH), 0);
    tile do_t = (f32)load(DH == D ? d_o + b * sdb + h * sdh + expand_dims(rm, 1) * sdn + rd * sdd
                                  : d_o + multiple_of(b * sdb + h * sdh + expand_dims(rm, 1) * sdn
                                                      + head_cols(sdd, D), DH % 8 ? 1 : 8),
                          DH == D ? row : row & head_mask(D, DH), 0);
    store(delta + bh * n_q + rm, sum(o_t * do_t, 1), rm < n_q);
}

/* dK and dV of one block of BN keys of one key/value head: every query head of its group, every
 * query block at or below the diagonal. P^T and dS^T are computed transposed ([BN, BM]), so
 * both products accumulate into [BN, D] tiles:
 *   dV += P^T dO     dP^T = V dO^T     dS^T = P^T * (dP^T - delta)     dK += dS^T Q
 * and dK is scaled by the softmax scale at the end. */
#pragma autotune key(n_q, n_kv)
#pragma autotune config(BM=64, BN=128, num_warps=8, num_stages=2)
#pragma autotune config(BM=64, BN=64, num_warps=8, num_stages=2)
#pragma autotune config(BM=64, BN=64, num_warps=4, num_stages=2)
kernel attention_bwd_dkdv(any *dk, any *dv, const any *q, const any *k, const any *v,
                          const any *d_o, const f32 *lse, const f32 *delta, f32 *dq_acc,
                          i32 n_q, i32 n_kv, i32 h_q, i32 h_kv, i32 group,
                          i32 sqb, i32 sqh, i32 sqn, i32 sqd, i32 skb, i32 skh, i32 skn, i32 skd,
                          i32 svb, i32 svh, i32 svn, i32 svd, i32 sdb, i32 sdh, i32 sdn, i32 sdd,
                          i32 sdkb, i32 sdkh, i32 sdkn, i32 sdkd,
                          i32 sdvb, i32 sdvh, i32 sdvn, i32 sdvd,
                          f32 qk_scale, f32 scale, f32 cap_in, f32 cap_out, i32 lo, i32 hi,
                          const f32 *slopes, i32 ssb, i32 alibi_off,
                          const i32 BAND, const i32 SOFTCAP, const i32 ALIBI, const i32 BF16,
                          const i32 ATOMIC_DQ, const i32 D, const i32 DH, const i32 BM,
                          const i32 BN)
{
    i32 pid_n = program_id(0);
    i32 bh = program_id(1);
    i32 b = bh / h_kv;
    i32 hk = bh % h_kv;
    tile rn = pid_n * BN + arange(0, BN);
    tile rm = arange(0, BM);
    tile rd = expand_dims(arange(0, D), 0);
    tile kv_row = expand_dims(rn, 1) < n_kv;
    f32 dk_acc[BN][D] = 0;
    f32 dv_acc[BN][D] = 0;
    /* the queries that see the block's keys, [q_first, q_last) (j - hi <= i <= j - lo); a
     * query block that starts before u_lo or ends past u_hi needs the band's mask */
    i32 n0 = pid_n * BN;
    i32 q_first = BAND ? maximum(n0 - hi, 0) / BM * BM : 0;
    i32 q_last = BAND ? minimum(n0 + BN - lo, n_q) : n_q;
    i32 u_lo = n0 + BN - 1 - hi;
    i32 u_hi = n0 - lo + 1;
    for (i32 g = 0; g < group; g++) {
        /* read per query head (they are staged in shared memory for the loop below, so their
         * registers are free again until the next head) */
        tile k_t = load(DH == D ? k + b * skb + hk * skh + expand_dims(rn, 1) * skn + rd * skd
                                : k + multiple_of(b * skb + hk * skh + expand_dims(rn, 1) * skn
                                                  + head_cols(skd, D), DH % 8 ? 1 : 8),
                        DH == D ? kv_row : kv_row & head_mask(D, DH), 0);
        tile v_t = load(DH == D ? v + b * svb + hk * svh + expand_dims(rn, 1) * svn + rd * svd
                                : v + multiple_of(b * svb + hk * svh + expand_dims(rn, 1) * svn
                                                  + head_cols(svd, D), DH % 8 ? 1 : 8),
                        DH == D ? kv_row : kv_row & head_mask(D, DH), 0);
        i32 h = hk * group + g;
        tile qh = q + b * sqb + h * sqh;
        f32 slope2 = ALIBI ? load(slopes + b * ssb + h) * 1.4426950408889634f : 0.0f;
        tile doh = d_o + b * sdb + h * sdh;
        tile lseh = lse + (b * h_q + h) * n_q;
        tile deltah = delta + (b * h_q + h) * n_q;
        tile dqh = dq_acc + (b * h_q + h) * n_q * D;
        for (i32 start = q_first; start < q_last; start += BM) {
            tile q_t = load(DH == D ? qh + (expand_dims(rm, 1) + start) * sqn + rd * sqd
                                    : q + multiple_of(b * sqb + h * sqh
                                                      + (expand_dims(rm, 1) + start) * sqn
                                                      + head_cols(sqd, D), DH % 8 ? 1 : 8),
                            DH == D ? expand_dims(rm, 1) + start < n_q
                                    : (expand_dims(rm, 1) + start < n_q) & head_mask(D, DH), 0);
            tile do_t = load(DH == D ? doh + (expand_dims(rm, 1) + start) * sdn + rd * sdd
                                     : d_o + multiple_of(b * sdb + h * sdh
                                                         + (expand_dims(rm, 1) + start) * sdn
                                                         + head_cols(sdd, D), DH % 8 ? 1 : 8),
                             DH == D ? expand_dims(rm, 1) + start < n_q
                                     : (expand_dims(rm, 1) + start < n_q) & head_mask(D, DH), 0);
            /* the rows' statistics as [1, BM] rows, read in the accumulator's layout */
            tile lse2 = load(lseh + start + expand_dims(rm, 0), start + expand_dims(rm, 0) < n_q,
                             0) * 1.4426950408889634f;
            tile dl = load(deltah + start + expand_dims(rm, 0), start + expand_dims(rm, 0) < n_q,
                           0);
            /* [BN, BM]; SOFTCAP: t = tanh(scale * s / cap), the scores cap * t */
            tile t_t = SOFTCAP ? tanh(dot(k_t, trans(q_t)) * cap_in) : 0.0f;
            /* ALIBI: the forward's bias in the exponent, [BN, BM] (key j by query i) */
            tile ab = ALIBI ? slope2 * (f32)abs(start + expand_dims(rm, 0) + alibi_off
                                                - expand_dims(rn, 1))
                            : 0.0f;
            tile p_t = ALIBI ? (SOFTCAP ? fast_exp2(t_t * cap_out - ab - lse2)
                                        : fast_exp2(dot(k_t, trans(q_t)) * qk_scale - ab - lse2))
                             : (SOFTCAP ? fast_exp2(t_t * cap_out - lse2)
                                        : fast_exp2(dot(k_t, trans(q_t)) * qk_scale - lse2));
            /* only the band's mask: query rows past n_q add nothing (their dO and delta were
             * read as 0, so their P^T dO and dS^T are 0) */
            if (BAND ? (start < u_lo) | (start + BM > u_hi) : 0) {
                tile qm = start + expand_dims(rm, 0);                  /* [1, BM] */
                tile kj = expand_dims(rn, 1);                          /* [BN, 1] */
                p_t = where((kj <= qm + hi) & (kj >= qm + lo), p_t, 0.0f);
            }
            tile dp_t = dot(v_t, trans(do_t));                         /* [BN, BM] */
            /* SOFTCAP: the chain rule through tanh, d(cap t)/ds = scale (1 - t^2) */
            tile ds_t = SOFTCAP ? p_t * (dp_t - dl) * (1.0f - t_t * t_t) : p_t * (dp_t - dl);
            if (BF16) {
                dv_acc = dot((bf16)p_t, do_t, dv_acc);
                dk_acc = dot((bf16)ds_t, q_t, dk_acc);
            } else {
                dv_acc = dot((f16)p_t, do_t, dv_acc);
                dk_acc = dot((f16)ds_t, q_t, dk_acc);
            }
            if (ATOMIC_DQ) {
                /* this key block's share of dQ = dS K for these query rows, added into the f32
                 * rows of dq_acc ([B, H_q, N_q, D], unscaled) from the accumulator's registers */
                tile dq_part = BF16 ? dot(trans((bf16)ds_t), k_t) : dot(trans((f16)ds_t), k_t);
                atomic_add(dqh + (expand_dims(rm, 1) + start) * D + rd, dq_part,
                           expand_dims(rm, 1) + start < n_q, RELAXED);
            }
        }
    }
    store(DH == D ? dk + b * sdkb + hk * sdkh + expand_dims(rn, 1) * sdkn + rd * sdkd
                  : dk + multiple_of(b * sdkb + hk * sdkh + expand_dims(rn, 1) * sdkn
                                     + head_cols(sdkd, D), DH % 8 ? 1 : 8),
          dk_acc * scale,
          DH == D ? kv_row : kv_row & head_mask(D, DH));
    store(DH == D ? dv + b * sdvb + hk * sdvh + expand_dims(rn, 1) * sdvn + rd * sdvd
                  : dv + multiple_of(b * sdvb + hk * sdvh + expand_dims(rn, 1) * sdvn
                                     + head_cols(sdvd, D), DH % 8 ? 1 : 8),
          dv_acc,
          DH == D ? kv_row : kv_row & head_mask(D, DH));
}

/* dQ of one block of BM queries, looping over the key blocks at or below the diagonal:
 *   dP = dO V^T     dS = P * (dP - delta)     dQ += dS K     (times scale at the end) */
#pragma autotune key(n_q, n_kv)
#pragma autotune config(BM=128, BN=64, num_warps=8, num_stages=2)
#pragma autotune config(BM=64, BN=64, num_warps=4, num_stages=2)
#pragma autotune config(BM=128, BN=32, num_warps=8, num_stages=2)
#pragma autotune config(BM=128, BN=128, num_warps=8, num_stages=2)
kernel attention_bwd_dq(any *dq, const any *q, const any *k, const any *v, const any *d_o,
                        const f32 *lse, const f32 *delta, i32 n_q, i32 n_kv, i32 h_q, i32 group,
                        i32 sqb, i32 sqh, i32 sqn, i32 sqd, i32 skb, i32 skh, i32 skn, i32 skd,
                        i32 svb, i32 svh, i32 svn, i32 svd, i32 sdb, i32 sdh, i32 sdn, i32 sdd,
                        i32 sdqb, i32 sdqh, i32 sdqn, i32 sdqd,
                        f32 qk_scale, f32 scale, f32 cap_in, f32 cap_out, i32 lo, i32 hi,
                        const f32 *slopes, i32 ssb, i32 alibi_off,
                        const i32 BAND, const i32 SOFTCAP, const i32 ALIBI, const i32 BF16,
                        const i32 D, const i32 DH, const i32 BM, const i32 BN,
                        const i32 WARP_SPECIALIZE)
{
    i32 pid_m = program_id(0);
    i32 bh = program_id(1);
    i32 b = bh / h_q;
    i32 h = bh % h_q;
    i32 hk = h / group;
    tile rm = pid_m * BM + arange(0, BM);
    tile rn = arange(0, BN);
    tile rd = expand_dims(arange(0, D), 0);
    tile q_row = expand_dims(rm, 1) < n_q;
    tile q_t = load(DH == D ? q + b * sqb + h * sqh + expand_dims(rm, 1) * sqn + rd * sqd
                            : q + multiple_of(b * sqb + h * sqh + expand_dims(rm, 1) * sqn
                                              + head_cols(sqd, D), DH % 8 ? 1 : 8),
                    DH == D ? q_row : q_row & head_mask(D, DH), 0);
    tile do_t = load(DH == D ? d_o + b * sdb + h * sdh + expand_dims(rm, 1) * sdn + rd * sdd
                             : d_o + multiple_of(b * sdb + h * sdh + expand_dims(rm, 1) * sdn
                                                 + head_cols(sdd, D), DH % 8 ? 1 : 8),
                     DH == D ? q_row : q_row & head_mask(D, DH), 0);
    tile lse2 = expand_dims(load(lse + bh * n_q + rm, rm < n_q, 0) * 1.4426950408889634f, 1);
    tile dl = expand_dims(load(delta + bh * n_q + rm, rm < n_q, 0), 1);
    tile kh = k + b * skb + hk * skh;
    tile vh = v + b * svb + hk * svh;
    f32 slope2 = ALIBI ? load(slopes + b * ssb + h) * 1.4426950408889634f : 0.0f;
    f32 dq_acc[BM][D] = 0;
    /* the forward's key range and masked blocks */
    i32 m0 = pid_m * BM;
    i32 first = BAND ? maximum(m0 + lo, 0) / BN * BN : 0;
    i32 last = BAND ? minimum(m0 + BM + hi, n_kv) : n_kv;
    i32 u_lo = m0 + BM - 1 + lo;
    i32 u_hi = BAND ? minimum(m0 + hi + 1, n_kv) : n_kv;
    for (i32 start = first; start < last; start += BN) {
        tile k_t = load(DH == D ? kh + (expand_dims(rn, 1) + start) * skn + rd * skd
                                : k + multiple_of(b * skb + hk * skh
                                                  + (expand_dims(rn, 1) + start) * skn
                                                  + head_cols(skd, D), DH % 8 ? 1 : 8),
                        DH == D ? expand_dims(rn, 1) + start < n_kv
                                : (expand_dims(rn, 1) + start < n_kv) & head_mask(D, DH), 0);
        tile v_t = load(DH == D ? vh + (expand_dims(rn, 1) + start) * svn + rd * svd
                                : v + multiple_of(b * svb + hk * svh
                                                  + (expand_dims(rn, 1) + start) * svn
                                                  + head_cols(svd, D), DH % 8 ? 1 : 8),
                        DH == D ? expand_dims(rn, 1) + start < n_kv
                                : (expand_dims(rn, 1) + start < n_kv) & head_mask(D, DH), 0);
        tile t = SOFTCAP ? tanh(dot(q_t, trans(k_t)) * cap_in) : 0.0f;
        tile ab = ALIBI ? slope2 * (f32)abs(expand_dims(rm, 1) + alibi_off
                                            - expand_dims(start + rn, 0))
                        : 0.0f;
        tile p = ALIBI ? (SOFTCAP ? fast_exp2(t * cap_out - ab - lse2)
                                  : fast_exp2(dot(q_t, trans(k_t)) * qk_scale - ab - lse2))
                       : (SOFTCAP ? fast_exp2(t * cap_out - lse2)
                                  : fast_exp2(dot(q_t, trans(k_t)) * qk_scale - lse2));
        if (BAND ? (start < u_lo) | (start + BN > u_hi) : start + BN > u_hi) {
            tile kn = expand_dims(start + rn, 0);
            tile ok = BAND ? (kn < n_kv) & (kn <= expand_dims(rm, 1) + hi)
                                 & (kn >= expand_dims(rm, 1) + lo)
                           : kn < n_kv;
            p = where(ok, p, 0.0f);
        }
        tile ds = SOFTCAP ? p * (dot(do_t, trans(v_t)) - dl) * (1.0f - t * t)
                          : p * (dot(do_t, trans(v_t)) - dl);
        if (BF16) {
            dq_acc = dot((bf16)ds, k_t, dq_acc);
        } else {
            dq_acc = dot((f16)ds, k_t, dq_acc);
        }
    }
    store(DH == D ? dq + b * sdqb + h * sdqh + expand_dims(rm, 1) * sdqn + rd * sdqd
                  : dq + multiple_of(b * sdqb + h * sdqh + expand_dims(rm, 1) * sdqn
                                     + head_cols(sdqd, D), DH % 8 ? 1 : 8),
          dq_acc * scale,
          DH == D ? q_row : q_row & head_mask(D, DH));
}

/* dq = scale * dq_acc: the rows the dK/dV kernel accumulated with ATOMIC_DQ, cast to the
 * inputs' dtype and written with dq's own strides. */
kernel attention_bwd_dq_cast(any *dq, const f32 *dq_acc, i32 n_q, i32 h_q,
                             i32 sdqb, i32 sdqh, i32 sdqn, i32 sdqd, f32 scale,
                             const i32 D, const i32 DH, const i32 BM)
{
    i32 bh = program_id(1);
    i32 b = bh / h_q;
    i32 h = bh % h_q;
    tile rm = expand_dims(program_id(0) * BM + arange(0, BM), 1);
    tile rd = expand_dims(arange(0, D), 0);
    tile acc = load(dq_acc + (bh * n_q + rm) * D + rd, rm < n_q, 0);
    store(DH == D ? dq + b * sdqb + h * sdqh + rm * sdqn + rd * sdqd
                  : dq + multiple_of(b * sdqb + h * sdqh + rm * sdqn
                                     + head_cols(sdqd, D), DH % 8 ? 1 : 8),
          acc * scale,
          DH == D ? rm < n_q : (rm < n_q) & head_mask(D, DH));
}

/* Packed sequences (FlashAttention's varlen): q [total_q, H_q, D], k and v [total_kv, H_kv, D],
 * sequence b the rows cu_q[b] .. cu_q[b + 1] - 1 of q and cu_k[b] .. cu_k[b + 1] - 1 of k and v
 * (cu_q, cu_k: i32 [B + 1] on the device). Each array is addressed through three strides (head,
 * row, column); lse and delta are f32 [H_q, total_q]. The grid covers the query blocks (key
 * blocks for dK/dV) of the longest sequence for every sequence and head; a program reads its
 * sequence's start and length and returns at once past its end, so no sequence is padded.
 * BAND: each sequence's own band, lo = diag - left, hi = diag + right, diag = n_kv - n_q with
 * bottom_right (FlashAttention's alignment) else 0, left and right UNBOUNDED where a side is
 * unbounded; ALIBI subtracts slope_h * |i + diag - j|. A row that sees no key (an empty band,
 * or a sequence without keys) gives o = 0 and lse = +inf. Otherwise the kernels above, line for
 * line: SOFTCAP, BF16, D and DH as there. */
#pragma autotune key(total_q)
#pragma autotune config(BM=128, BN=64, num_warps=8, num_stages=2)
#pragma autotune config(BM=128, BN=128, num_warps=8, num_stages=2)
#pragma autotune config(BM=64, BN=64, num_warps=4, num_stages=2)
#pragma autotune config(BM=128, BN=64, num_warps=8, num_stages=3)
kernel attention_varlen_fwd(any *o, f32 *lse, const any *q, const any *k, const any *v,
                            const i32 *cu_q, const i32 *cu_k, i32 h_q, i32 group, i32 total_q,
                            i32 left, i32 right, i32 bottom_right,
                            i32 sqh, i32 sqn, i32 sqd, i32 skh, i32 skn, i32 skd,
                            i32 svh, i32 svn, i32 svd, i32 soh, i32 son, i32 sod,
                            f32 qk_scale, f32 cap_in, f32 cap_out, const f32 *slopes, i32 ssb,
                            const i32 BAND, const i32 SOFTCAP, const i32 ALIBI,
                            const i32 BF16, const i32 D, const i32 DH, const i32 BM, const i32 BN)
{
    i32 pid_m = program_id(0);
    i32 bh = program_id(1);
    i32 b = bh / h_q;
    i32 h = bh % h_q;
    i32 hk = h / group;
    i32 q0 = load(cu_q + b);
    i32 n_q = load(cu_q + b + 1) - q0;
    i32 m0 = pid_m * BM;
    if (m0 >= n_q) {
        return;
    }
    i32 k0 = load(cu_k + b);
    i32 n_kv = load(cu_k + b + 1) - k0;
    i32 diag = bottom_right ? n_kv - n_q : 0;
    i32 lo = diag - left;
    i32 hi = diag + right;
    tile rm = m0 + arange(0, BM);
    tile rn = arange(0, BN);
    tile rd = expand_dims(arange(0, D), 0);
    tile q_t = load(DH == D ? q + h * sqh + (q0 + expand_dims(rm, 1)) * sqn + rd * sqd
                            : q + multiple_of(h * sqh + (q0 + expand_dims(rm, 1)) * sqn
                                              + head_cols(sqd, D), DH % 8 ? 1 : 8),
                    DH == D ? expand_dims(rm, 1) < n_q
                            : (expand_dims(rm, 1) < n_q) & head_mask(D, DH), 0);
    tile kh = k + hk * skh + k0 * skn;
    tile vh = v + hk * svh + k0 * svn;
    f32 slope2 = ALIBI ? load(slopes + b * ssb + h) * 1.4426950408889634f : 0.0f;
    /* -1e30, not -inf, for rows that see no key (attention_fwd's BAND) */
    f32 m_i[BM] = -1.0e30f;
    f32 l_i[BM] = 0;
    f32 acc[BM][D] = 0;
    i32 first = BAND ? maximum(m0 + lo, 0) / BN * BN : 0;
    i32 last = BAND ? minimum(m0 + BM + hi, n_kv) : n_kv;
    i32 u_lo = m0 + BM - 1 + lo;
    i32 u_hi = BAND ? minimum(m0 + hi + 1, n_kv) : n_kv;
    for (i32 start = first; start < last; start += BN) {
        tile k_t = load(DH == D ? kh + (expand_dims(rn, 1) + start) * skn + rd * skd
                                : k + multiple_of(hk * skh + (k0 + start + expand_dims(rn, 1)) * skn
                                                  + head_cols(skd, D), DH % 8 ? 1 : 8),
                        DH == D ? expand_dims(rn, 1) + start < n_kv
                                : (expand_dims(rn, 1) + start < n_kv) & head_mask(D, DH), 0);
        tile v_t = load(DH == D ? vh + (expand_dims(rn, 1) + start) * svn + rd * svd
                                : v + multiple_of(hk * svh + (k0 + start + expand_dims(rn, 1)) * svn
                                                  + head_cols(svd, D), DH % 8 ? 1 : 8),
                        DH == D ? expand_dims(rn, 1) + start < n_kv
                                : (expand_dims(rn, 1) + start < n_kv) & head_mask(D, DH), 0);
        tile s = SOFTCAP ? tanh(dot(q_t, trans(k_t)) * cap_in) * cap_out
                         : dot(q_t, trans(k_t)) * qk_scale;
        if (ALIBI) {
            s = s - slope2 * (f32)abs(expand_dims(rm, 1) + diag - expand_dims(start + rn, 0));
        }
        if (BAND ? (start < u_lo) | (start + BN > u_hi) : start + BN > u_hi) {
            tile kn = expand_dims(start + rn, 0);
            tile ok = BAND ? (kn < n_kv) & (kn <= expand_dims(rm, 1) + hi)
                                 & (kn >= expand_dims(rm, 1) + lo)
                           : kn < n_kv;
            s = where(ok, s, -INF);
        }
        tile m_new = maximum(m_i, max(s, 1));
        tile p = fast_exp2(s - expand_dims(m_new, 1));
        tile alpha = fast_exp2(m_i - m_new);
        l_i = l_i * alpha + sum(p, 1);
        acc = acc * expand_dims(alpha, 1);
        if (BF16) {
            acc = dot((bf16)p, v_t, acc);
        } else {
            acc = dot((f16)p, v_t, acc);
        }
        m_i = m_new;
    }
    store(DH == D ? o + h * soh + (q0 + expand_dims(rm, 1)) * son + rd * sod
                  : o + multiple_of(h * soh + (q0 + expand_dims(rm, 1)) * son
                                    + head_cols(sod, D), DH % 8 ? 1 : 8),
          acc / maximum(expand_dims(l_i, 1), 1.0f),
          DH == D ? expand_dims(rm, 1) < n_q : (expand_dims(rm, 1) < n_q) & head_mask(D, DH));
    store(lse + h * total_q + q0 + rm,
          where(l_i == 0.0f, INF, (m_i + log2(l_i)) * 0.6931471805599453f), rm < n_q);
}

/* dK and dV of packed sequences: attention_bwd_dkdv's, for the key block pid_n of sequence b
 * (the queries of its own sequence only). */
#pragma autotune key(total_q)
#pragma autotune config(BM=64, BN=128, num_warps=8, num_stages=2)
#pragma autotune config(BM=64, BN=64, num_warps=8, num_stages=2)
#pragma autotune config(BM=64, BN=64, num_warps=4, num_stages=2)
kernel attention_varlen_bwd_dkdv(any *dk, any *dv, const any *q, const any *k, const any *v,
                                 const any *d_o, const f32 *lse, const f32 *delta,
                                 const i32 *cu_q, const i32 *cu_k, i32 h_q, i32 h_kv, i32 group,
                                 i32 total_q, i32 left, i32 right, i32 bottom_right,
                                 i32 sqh, i32 sqn, i32 sqd, i32 skh, i32 skn, i32 skd,
                                 i32 svh, i32 svn, i32 svd, i32 sdh, i32 sdn, i32 sdd,
                                 i32 sdkh, i32 sdkn, i32 sdkd, i32 sdvh, i32 sdvn, i32 sdvd,
                                 f32 qk_scale, f32 scale, f32 cap_in, f32 cap_out,
                                 const f32 *slopes, i32 ssb, const i32 BAND, const i32 SOFTCAP,
                                 const i32 ALIBI, const i32 BF16, const i32 D, const i32 DH,
                                 const i32 BM, const i32 BN)
{
    i32 pid_n = program_id(0);
    i32 bh = program_id(1);
    i32 b = bh / h_kv;
    i32 hk = bh % h_kv;
    i32 k0 = load(cu_k + b);
    i32 n_kv = load(cu_k + b + 1) - k0;
    i32 n0 = pid_n * BN;
    if (n0 >= n_kv) {
        return;
    }
    i32 q0 = load(cu_q + b);
    i32 n_q = load(cu_q + b + 1) - q0;
    i32 diag = bottom_right ? n_kv - n_q : 0;
    i32 lo = diag - left;
    i32 hi = diag + right;
    tile rn = n0 + arange(0, BN);
    tile rm = arange(0, BM);
    tile rd = expand_dims(arange(0, D), 0);
    tile kv_row = expand_dims(rn, 1) < n_kv;
    f32 dk_acc[BN][D] = 0;
    f32 dv_acc[BN][D] = 0;
    i32 q_first = BAND ? maximum(n0 - hi, 0) / BM * BM : 0;
    i32 q_last = BAND ? minimum(n0 + BN - lo, n_q) : n_q;
    i32 u_lo = n0 + BN - 1 - hi;
    i32 u_hi = n0 - lo + 1;
    for (i32 g = 0; g < group; g++) {
        tile k_t = load(DH == D ? k + hk * skh + (k0 + expand_dims(rn, 1)) * skn + rd * skd
                                : k + multiple_of(hk * skh + (k0 + expand_dims(rn, 1)) * skn
                                                  + head_cols(skd, D), DH % 8 ? 1 : 8),
                        DH == D ? kv_row : kv_row & head_mask(D, DH), 0);
        tile v_t = load(DH == D ? v + hk * svh + (k0 + expand_dims(rn, 1)) * svn + rd * svd
                                : v + multiple_of(hk * svh + (k0 + expand_dims(rn, 1)) * svn
                                                  + head_cols(svd, D), DH % 8 ? 1 : 8),
                        DH == D ? kv_row : kv_row & head_mask(D, DH), 0);
        i32 h = hk * group + g;
        tile qh = q + h * sqh + q0 * sqn;
        f32 slope2 = ALIBI ? load(slopes + b * ssb + h) * 1.4426950408889634f : 0.0f;
        tile doh = d_o + h * sdh + q0 * sdn;
        tile lseh = lse + h * total_q + q0;
        tile deltah = delta + h * total_q + q0;
        for (i32 start = q_first; start < q_last; start += BM) {
            tile q_t = load(DH == D ? qh + (expand_dims(rm, 1) + start) * sqn + rd * sqd
                                    : q + multiple_of(h * sqh
                                                      + (q0 + start + expand_dims(rm, 1)) * sqn
                                                      + head_cols(sqd, D), DH % 8 ? 1 : 8),
                            DH == D ? expand_dims(rm, 1) + start < n_q
                                    : (expand_dims(rm, 1) + start < n_q) & head_mask(D, DH), 0);
            tile do_t = load(DH == D ? doh + (expand_dims(rm, 1) + start) * sdn + rd * sdd
                                     : d_o + multiple_of(h * sdh
                                                         + (q0 + start + expand_dims(rm, 1)) * sdn
                                                         + head_cols(sdd, D), DH % 8 ? 1 : 8),
                             DH == D ? expand_dims(rm, 1) + start < n_q
                                     : (expand_dims(rm, 1) + start < n_q) & head_mask(D, DH), 0);
            tile lse2 = load(lseh + start + expand_dims(rm, 0), start + expand_dims(rm, 0) < n_q,
                             0) * 1.4426950408889634f;
            tile dl = load(deltah + start + expand_dims(rm, 0), start + expand_dims(rm, 0) < n_q,
                           0);
            tile t_t = SOFTCAP ? tanh(dot(k_t, trans(q_t)) * cap_in) : 0.0f;
            tile ab = ALIBI ? slope2 * (f32)abs(start + expand_dims(rm, 0) + diag
                                                - expand_dims(rn, 1))
                            : 0.0f;
            tile p_t = ALIBI ? (SOFTCAP ? fast_exp2(t_t * cap_out - ab - lse2)
                                        : fast_exp2(dot(k_t, trans(q_t)) * qk_scale - ab - lse2))
                             : (SOFTCAP ? fast_exp2(t_t * cap_out - lse2)
                                        : fast_exp2(dot(k_t, trans(q_t)) * qk_scale - lse2));
            /* query rows past n_q read zeros: their dO and delta are 0, so they add nothing */
            if (BAND ? (start < u_lo) | (start + BM > u_hi) : 0) {
                tile qm = start + expand_dims(rm, 0);
                tile kj = expand_dims(rn, 1);
                p_t = where((kj <= qm + hi) & (kj >= qm + lo), p_t, 0.0f);
            }
            tile dp_t = dot(v_t, trans(do_t));
            tile ds_t = SOFTCAP ? p_t * (dp_t - dl) * (1.0f - t_t * t_t) : p_t * (dp_t - dl);
            if (BF16) {
                dv_acc = dot((bf16)p_t, do_t, dv_acc);
                dk_acc = dot((bf16)ds_t, q_t, dk_acc);
            } else {
                dv_acc = dot((f16)p_t, do_t, dv_acc);
                dk_acc = dot((f16)ds_t, q_t, dk_acc);
            }
        }
    }
    store(DH == D ? dk + hk * sdkh + (k0 + expand_dims(rn, 1)) * sdkn + rd * sdkd
                  : dk + multiple_of(hk * sdkh + (k0 + expand_dims(rn, 1)) * sdkn
                                     + head_cols(sdkd, D), DH % 8 ? 1 : 8),
          dk_acc * scale, DH == D ? kv_row : kv_row & head_mask(D, DH));
    store(DH == D ? dv + hk * sdvh + (k0 + expand_dims(rn, 1)) * sdvn + rd * sdvd
                  : dv + multiple_of(hk * sdvh + (k0 + expand_dims(rn, 1)) * sdvn
                                     + head_cols(sdvd, D), DH % 8 ? 1 : 8),
          dv_acc, DH == D ? kv_row : kv_row & head_mask(D, DH));
}

/* dQ of packed sequences: attention_bwd_dq's, for the query block pid_m of sequence b. */
#pragma autotune key(total_q)
#pragma autotune config(BM=128, BN=64, num_warps=8, num_stages=2)
#pragma autotune config(BM=64, BN=64, num_warps=4, num_stages=2)
#pragma autotune config(BM=128, BN=128, num_warps=8, num_stages=2)
kernel attention_varlen_bwd_dq(any *dq, const any *q, const any *k, const any *v, const any *d_o,
                               const f32 *lse, const f32 *delta, const i32 *cu_q,
                               const i32 *cu_k, i32 h_q, i32 group, i32 total_q, i32 left,
                               i32 right, i32 bottom_right,
                               i32 sqh, i32 sqn, i32 sqd, i32 skh, i32 skn, i32 skd,
                               i32 svh, i32 svn, i32 svd, i32 sdh, i32 sdn, i32 sdd,
                               i32 sdqh, i32 sdqn, i32 sdqd,
                               f32 qk_scale, f32 scale, f32 cap_in, f32 cap_out,
                               const f32 *slopes, i32 ssb, const i32 BAND, const i32 SOFTCAP,
                               const i32 ALIBI, const i32 BF16, const i32 D, const i32 DH,
                               const i32 BM, const i32 BN)
{
    i32 pid_m = program_id(0);
    i32 bh = program_id(1);
    i32 b = bh / h_q;
    i32 h = bh % h_q;
    i32 hk = h / group;
    i32 q0 = load(cu_q + b);
    i32 n_q = load(cu_q + b + 1) - q0;
    i32 m0 = pid_m * BM;
    if (m0 >= n_q) {
        return;
    }
    i32 k0 = load(cu_k + b);
    i32 n_kv = load(cu_k + b + 1) - k0;
    i32 diag = bottom_right ? n_kv - n_q : 0;
    i32 lo = diag - left;
    i32 hi = diag + right;
    tile rm = m0 + arange(0, BM);
    tile rn = arange(0, BN);
    tile rd = expand_dims(arange(0, D), 0);
    tile q_row = expand_dims(rm, 1) < n_q;
    tile q_t = load(DH == D ? q + h * sqh + (q0 + expand_dims(rm, 1)) * sqn + rd * sqd
                            : q + multiple_of(h * sqh + (q0 + expand_dims(rm, 1)) * sqn
                                              + head_cols(sqd, D), DH % 8 ? 1 : 8),
                    DH == D ? q_row : q_row & head_mask(D, DH), 0);
    tile do_t = load(DH == D ? d_o + h * sdh + (q0 + expand_dims(rm, 1)) * sdn + rd * sdd
                             : d_o + multiple_of(h * sdh + (q0 + expand_dims(rm, 1)) * sdn
                                                 + head_cols(sdd, D), DH % 8 ? 1 : 8),
                     DH == D ? q_row : q_row & head_mask(D, DH), 0);
    tile lse2 = expand_dims(load(lse + h * total_q + q0 + rm, rm < n_q, 0)
                            * 1.4426950408889634f, 1);
    tile dl = expand_dims(load(delta + h * total_q + q0 + rm, rm < n_q, 0), 1);
    tile kh = k + hk * skh + k0 * skn;
    tile vh = v + hk * svh + k0 * svn;
    f32 slope2 = ALIBI ? load(slopes + b * ssb + h) * 1.4426950408889634f : 0.0f;
    f32 dq_acc[BM][D] = 0;
    i32 first = BAND ? maximum(m0 + lo, 0) / BN * BN : 0;
    i32 last = BAND ? minimum(m0 + BM + hi, n_kv) : n_kv;
    i32 u_lo = m0 + BM - 1 + lo;
    i32 u_hi = BAND ? minimum(m0 + hi + 1, n_kv) : n_kv;
    for (i32 start = first; start < last; start += BN) {
        tile k_t = load(DH == D ? kh + (expand_dims(rn, 1) + start) * skn + rd * skd
                                : k + multiple_of(hk * skh + (k0 + start + expand_dims(rn, 1)) * skn
                                                  + head_cols(skd, D), DH % 8 ? 1 : 8),
                        DH == D ? expand_dims(rn, 1) + start < n_kv
                                : (expand_dims(rn, 1) + start < n_kv) & head_mask(D, DH), 0);
        tile v_t = load(DH == D ? vh + (expand_dims(rn, 1) + start) * svn + rd * svd
                                : v + multiple_of(hk * svh + (k0 + start + expand_dims(rn, 1)) * svn
                                                  + head_cols(svd, D), DH % 8 ? 1 : 8),
                        DH == D ? expand_dims(rn, 1) + start < n_kv
                                : (expand_dims(rn, 1) + start < n_kv) & head_mask(D, DH), 0);
        tile t = SOFTCAP ? tanh(dot(q_t, trans(k_t)) * cap_in) : 0.0f;
        tile ab = ALIBI ? slope2 * (f32)abs(expand_dims(rm, 1) + diag - expand_dims(start + rn, 0))
                        : 0.0f;
        tile p = ALIBI ? (SOFTCAP ? fast_exp2(t * cap_out - ab - lse2)
                                  : fast_exp2(dot(q_t, trans(k_t)) * qk_scale - ab - lse2))
                       : (SOFTCAP ? fast_exp2(t * cap_out - lse2)
                                  : fast_exp2(dot(q_t, trans(k_t)) * qk_scale - lse2));
        if (BAND ? (start < u_lo) | (start + BN > u_hi) : start + BN > u_hi) {
            tile kn = expand_dims(start + rn, 0);
            tile ok = BAND ? (kn < n_kv) & (kn <= expand_dims(rm, 1) + hi)
                                 & (kn >= expand_dims(rm, 1) + lo)
                           : kn < n_kv;
            p = where(ok, p, 0.0f);
        }
        tile ds = SOFTCAP ? p * (dot(do_t, trans(v_t)) - dl) * (1.0f - t * t)
                          : p * (dot(do_t, trans(v_t)) - dl);
        if (BF16) {
            dq_acc = dot((bf16)ds, k_t, dq_acc);
        } else {
            dq_acc = dot((f16)ds, k_t, dq_acc);
        }
    }
    store(DH == D ? dq + h * sdqh + (q0 + expand_dims(rm, 1)) * sdqn + rd * sdqd
                  : dq + multiple_of(h * sdqh + (q0 + expand_dims(rm, 1)) * sdqn
                                     + head_cols(sdqd, D), DH % 8 ? 1 : 8),
          dq_acc * scale, DH == D ? q_row : q_row & head_mask(D, DH));
}
