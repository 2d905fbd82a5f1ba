/* The normalisation family: batch, group and instance norm over x viewed as [N, C, S]
 * (contiguous; S the product of the spatial sizes), forward and backward, any float dtype,
 * computed in acc_t with acc_t statistics (f32; f64 for f64 data).
 *
 * The three norms differ only in which rows r = n * C + c (S elements each) share a
 * statistic, a *segment* j (teeny_tx/library/norm_families.py, the table, computes the sizes):
 *
 *   batch norm     j = c               the rows (o, c), o < N        SG = C, CPG = 1, NN = N
 *   group norm     j = n * G + g       the rows (n, g * CPG + k)     SG = G, CPG = C / G, NN = 1
 *   instance norm  j = n * C + c       the row (n, c)                SG = C, CPG = 1, NN = 1
 *
 * so segment j holds the rows (j / SG + o) * C + (j % SG) * CPG + k, o < NN, k < CPG, and row
 * (n, c) belongs to segment n * SN + c / CPG (SN = 0 for batch norm, SG otherwise).
 *
 *   forward:   per row, its mean and m2 (the sum of squared deviations, Welford per lane,
 *              Chan's formula across lanes); per segment, those combined: mean, var = m2 / count,
 *              rstd = 1 / sqrt(var + eps); y = (x - mean) * rstd * w[c] + b[c]
 *   backward:  xhat = (x - mean) * rstd; per row, sum(dy) and sum(dy * xhat); per channel, their
 *              sums over n: db and dw; per segment, sg = sum(w dy), sgx = sum(w dy xhat);
 *              dx = rstd * (w dy - (sg + xhat * sgx) / count), or rstd * w dy for statistics
 *              that are constants (running statistics: eval mode)
 */

/* row e of segment j (e < NN * CPG): the row (j / SG + e / CPG) * C + (j % SG) * CPG + e % CPG */
tile nm_segment_row(tile j, tile e, i32 C, i32 SG, i32 CPG)
{
    return (j / SG + e / CPG) * C + (j % SG) * CPG + e % CPG;
}

/* the segment of the element at offs: row r = offs / S, (n, c) = (r / C, r % C) */
tile nm_segment_of(tile offs, i32 C, i32 S, i32 SN, i32 CPG)
{
    tile r = offs / S;
    return (r / C) * SN + (r % C) / CPG;
}

/* mean[r] and m2[r] of each of the rows r of S elements: ROWS rows per program, BLOCK columns at
 * a time, each lane a Welford recurrence, the lanes combined by Chan's formula */
kernel norm_row_stats(any *mean, any *m2, const any *x, i32 rows, i32 S, const i32 ROWS,
                      const i32 BLOCK)
{
    tile r = program_id(0) * ROWS + arange(0, ROWS);
    tile r2 = expand_dims(r, 1);
    tile cols = expand_dims(arange(0, BLOCK), 0);
    acc_t cnt[ROWS][BLOCK] = 0;
    acc_t mu[ROWS][BLOCK] = 0;
    acc_t sq[ROWS][BLOCK] = 0;
    for (i32 s = 0; s < S; s += BLOCK) {
        tile mask = (r2 < rows) & (s + cols < S);
        tile v = (acc_t)load(x + r2 * S + s + cols, mask, 0.0f);
        cnt += where(mask, 1.0f, 0.0f);
        tile d = where(mask, v - mu, 0.0f);
        mu += d / maximum(cnt, 1.0f);
        sq += d * where(mask, v - mu, 0.0f);
    }
    tile m = sum(cnt * mu, 1) / S;
    tile dev = mu - expand_dims(m, 1);
    store(mean + r, m, r < rows);
    store(m2 + r, sum(sq + cnt * dev * dev, 1), r < rows);
}

/* per segment j < segs: mean, var (biased) and rstd from the (mean, m2) of its NN * CPG rows of
 * S elements each; BLOCK_J segments per program, BLOCK_E of their rows at a time, two passes */
kernel norm_combine(any *mean, any *var, any *rstd, const any *row_mean, const any *row_m2,
                    i32 segs, i32 C, i32 S, i32 SG, i32 CPG, i32 NN, f64 eps,
                    const i32 BLOCK_E, const i32 BLOCK_J)
{
    tile j = program_id(0) * BLOCK_J + arange(0, BLOCK_J);
    tile j2 = expand_dims(j, 0);
    tile es = expand_dims(arange(0, BLOCK_E), 1);
    i32 per = NN * CPG;
    acc_t total[BLOCK_E][BLOCK_J] = 0;
    for (i32 e = 0; e < per; e += BLOCK_E) {
        tile mask = (e + es < per) & (j2 < segs);
        tile r = nm_segment_row(j2, e + es, C, SG, CPG);
        total += (acc_t)load(row_mean + r, mask, 0.0f);
    }
    tile m = sum(total, 0) / per;
    tile m_2 = expand_dims(m, 0);
    acc_t dev[BLOCK_E][BLOCK_J] = 0;
    for (i32 e = 0; e < per; e += BLOCK_E) {
        tile mask = (e + es < per) & (j2 < segs);
        tile r = nm_segment_row(j2, e + es, C, SG, CPG);
        tile d = (acc_t)load(row_mean + r, mask, 0.0f) - m_2;
        dev += where(mask, (acc_t)load(row_m2 + r, mask, 0.0f) + S * d * d, 0.0f);
    }
    tile v = sum(dev, 0) / ((acc_t)per * S);
    store(mean + j, m, j < segs);
    store(var + j, v, j < segs);
    store(rstd + j, 1.0f / sqrt(v + eps), j < segs);
}

/* running statistics of channel c < C: (1 - momentum) * old + momentum * the average over the
 * NR segments c + i * C of mean and of var * unbias (torch's unbiased running variance) */
kernel norm_running(any *new_mean, any *new_var, const any *old_mean, const any *old_var,
                    const any *mean, const any *var, i32 C, i32 NR, f64 momentum, f64 unbias,
                    const i32 BLOCK)
{
    tile c = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = c < C;
    acc_t m[BLOCK] = 0;
    acc_t v[BLOCK] = 0;
    for (i32 i = 0; i < NR; i++) {
        m += (acc_t)load(mean + i * C + c, mask, 0.0f);
        v += (acc_t)load(var + i * C + c, mask, 0.0f);
    }
    tile om = (acc_t)load(old_mean + c, mask, 0.0f);
    tile ov = (acc_t)load(old_var + c, mask, 0.0f);
    store(new_mean + c, momentum * (m / NR) + (1.0 - momentum) * om, mask);
    store(new_var + c, momentum * (v / NR * unbias) + (1.0 - momentum) * ov, mask);
}

/* eval mode: mean = running_mean, rstd = 1 / sqrt(running_var + eps), per channel */
kernel norm_eval_stats(any *mean, any *rstd, const any *running_mean, const any *running_var,
                       i32 C, f64 eps, const i32 BLOCK)
{
    tile c = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = c < C;
    store(mean + c, (acc_t)load(running_mean + c, mask, 0.0f), mask);
    store(rstd + c, 1.0f / sqrt((acc_t)load(running_var + c, mask, 1.0f) + eps), mask);
}

/* y = (x - mean[j]) * rstd[j] * w[c] + b[c] over the n elements */
kernel norm_apply(any *y, const any *x, const any *mean, const any *rstd, const any *w,
                  const any *b, i32 n, i32 C, i32 S, i32 SN, i32 CPG, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile c = (offs / S) % C;
    tile j = nm_segment_of(offs, C, S, SN, CPG);
    tile v = (acc_t)load(x + offs, mask, 0.0f);
    tile mu = (acc_t)load(mean + j, mask, 0.0f);
    tile rs = (acc_t)load(rstd + j, mask, 0.0f);
    tile wv = (acc_t)load(w + c, mask, 0.0f);
    tile bv = (acc_t)load(b + c, mask, 0.0f);
    store(y + offs, (v - mu) * rs * wv + bv, mask);
}

/* per row r: sdy[r] = sum(dy), sdyx[r] = sum(dy * xhat) over its S elements */
kernel norm_bwd_rows(any *sdy, any *sdyx, const any *dy, const any *x, const any *mean,
                     const any *rstd, i32 rows, i32 C, i32 S, i32 SN, i32 CPG, const i32 ROWS,
                     const i32 BLOCK)
{
    tile r = program_id(0) * ROWS + arange(0, ROWS);
    tile r2 = expand_dims(r, 1);
    tile j = expand_dims((r / C) * SN + (r % C) / CPG, 1);
    tile cols = expand_dims(arange(0, BLOCK), 0);
    tile mu = (acc_t)load(mean + j, r2 < rows, 0.0f);
    tile rs = (acc_t)load(rstd + j, r2 < rows, 0.0f);
    acc_t a[ROWS][BLOCK] = 0;
    acc_t ax[ROWS][BLOCK] = 0;
    for (i32 s = 0; s < S; s += BLOCK) {
        tile mask = (r2 < rows) & (s + cols < S);
        tile g = (acc_t)load(dy + r2 * S + s + cols, mask, 0.0f);
        tile v = (acc_t)load(x + r2 * S + s + cols, mask, 0.0f);
        a += g;
        ax += g * where(mask, (v - mu) * rs, 0.0f);
    }
    store(sdy + r, sum(a, 1), r < rows);
    store(sdyx + r, sum(ax, 1), r < rows);
}

/* per segment j < segs of the rows (SG, CPG, NN as above): out_a = sum of (w[c] *) a[r],
 * out_b = sum of (w[c] *) b[r], weighted when WEIGHTED */
kernel norm_bwd_sums(any *out_a, any *out_b, const any *a, const any *b, const any *w, i32 segs,
                     i32 C, i32 SG, i32 CPG, i32 NN, const i32 WEIGHTED, const i32 BLOCK_E,
                     const i32 BLOCK_J)
{
    tile j = program_id(0) * BLOCK_J + arange(0, BLOCK_J);
    tile j2 = expand_dims(j, 0);
    tile es = expand_dims(arange(0, BLOCK_E), 1);
    i32 per = NN * CPG;
    acc_t ta[BLOCK_E][BLOCK_J] = 0;
    acc_t tb[BLOCK_E][BLOCK_J] = 0;
    for (i32 e = 0; e < per; e += BLOCK_E) {
        tile mask = (e + es < per) & (j2 < segs);
        tile r = nm_segment_row(j2, e + es, C, SG, CPG);
        acc_t wv[BLOCK_E][BLOCK_J] = 1;
        if (WEIGHTED) {
            wv = (acc_t)load(w + r % C, mask, 0.0f);
        }
        ta += wv * (acc_t)load(a + r, mask, 0.0f);
        tb += wv * (acc_t)load(b + r, mask, 0.0f);
    }
    store(out_a + j, sum(ta, 0), j < segs);
    store(out_b + j, sum(tb, 0), j < segs);
}

/* dx = rstd * (w dy - (sg + xhat * sgx) * inv_count) (TRAIN), else rstd * w dy */
kernel norm_bwd_dx(any *dx, const any *dy, const any *x, const any *mean, const any *rstd,
                   const any *w, const any *sg, const any *sgx, i32 n, i32 C, i32 S, i32 SN,
                   i32 CPG, f64 inv_count, const i32 TRAIN, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile c = (offs / S) % C;
    tile j = nm_segment_of(offs, C, S, SN, CPG);
    tile rs = (acc_t)load(rstd + j, mask, 0.0f);
    tile g = (acc_t)load(dy + offs, mask, 0.0f) * (acc_t)load(w + c, mask, 0.0f);
    if (TRAIN) {
        tile xhat = ((acc_t)load(x + offs, mask, 0.0f) - (acc_t)load(mean + j, mask, 0.0f)) * rs;
        tile s = (acc_t)load(sg + j, mask, 0.0f) + xhat * (acc_t)load(sgx + j, mask, 0.0f);
        acc_t ic = inv_count;
        store(dx + offs, rs * (g - s * ic), mask);
    } else {
        store(dx + offs, rs * g, mask);
    }
}
