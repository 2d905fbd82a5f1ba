/* The pooling family: max and average pooling over windows of a contiguous [P, H, W] tensor
 * (P planes, N * C; a 1-d pool is a 2-d one of height 1), regular windows (kernel k, stride s,
 * padding p, dilation d: torch's max_pool / avg_pool) or adaptive ones (ADAPTIVE: output o of
 * n_out covers [floor(o n / n_out), ceil((o + 1) n / n_out)): torch's adaptive pools), forward
 * and backward, any float dtype, computed in acc_t.
 *
 *   MAX 1: y = the window's maximum (NaN wins, as in torch), idx = its position h * W + w in
 *          the plane (the first in the window where values tie; i64)
 *   MAX 0: y = the window's sum / its divisor: divisor_override when positive, else the
 *          window's size counting padding (include_pad, ceil mode's overhang excluded) or not
 *
 * The backward gathers, for each input element, the outputs whose window holds it (at most T
 * along each dimension, candidates by pl_first): dx = sum of dy where idx names the element
 * (MAX), or of dy / divisor (average); deterministic, no atomics.
 * teeny_tx/library/pool_families.py is the table that makes the ops from these kernels.
 */

/* the first index of output o's window along a dimension of n (regular: may be negative) */
tile pl_start(tile o, i32 n, i32 n_out, i32 s, i32 p, const i32 ADAPTIVE)
{
    tile start = o * s - p;
    if (ADAPTIVE) {
        start = (o * n) / n_out;
    }
    return start;
}

/* one past the last index of output o's window (regular: before clipping to n) */
tile pl_end(tile o, i32 n, i32 n_out, i32 k, i32 s, i32 p, i32 d, const i32 ADAPTIVE)
{
    tile end = o * s - p + (k - 1) * d + 1;
    if (ADAPTIVE) {
        end = ((o + 1) * n + n_out - 1) / n_out;
    }
    return end;
}

/* the first index >= 0 that a window starting at start reaches in steps of d */
tile pl_first(tile start, i32 d)
{
    return where(start < 0, start + ((d - 1 - start) / d) * d, start);
}

/* the average's divisor of output (oh, ow) */
tile pl_divisor(tile oh, tile ow, i32 H, i32 W, i32 OH, i32 OW, i32 KH, i32 KW, i32 SH, i32 SW,
                i32 PH, i32 PW, i32 include_pad, i32 divisor, const i32 ADAPTIVE)
{
    tile hs = pl_start(oh, H, OH, SH, PH, ADAPTIVE);
    tile ws = pl_start(ow, W, OW, SW, PW, ADAPTIVE);
    tile he = pl_end(oh, H, OH, KH, SH, PH, 1, ADAPTIVE);
    tile we = pl_end(ow, W, OW, KW, SW, PW, 1, ADAPTIVE);
    tile padded = (minimum(he, H + PH) - hs) * (minimum(we, W + PW) - ws);
    tile inside = (minimum(he, H) - maximum(hs, 0)) * (minimum(we, W) - maximum(ws, 0));
    tile count = where(include_pad != 0, padded, inside);
    if (ADAPTIVE) {
        count = inside;
    }
    return where(divisor > 0, divisor, count);
}

kernel pool_fwd(any *y, i64 *idx, const any *x, i32 n, i32 H, i32 W, i32 OH, i32 OW, i32 KH,
                i32 KW, i32 SH, i32 SW, i32 PH, i32 PW, i32 DH, i32 DW, i32 include_pad,
                i32 divisor, const i32 MAX, const i32 ADAPTIVE, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile ow = offs % OW;
    tile oh = (offs / OW) % OH;
    tile plane = offs / OW / OH;
    tile hs = pl_start(oh, H, OH, SH, PH, ADAPTIVE);
    tile ws = pl_start(ow, W, OW, SW, PW, ADAPTIVE);
    tile he = pl_end(oh, H, OH, KH, SH, PH, DH, ADAPTIVE);
    tile we = pl_end(ow, W, OW, KW, SW, PW, DW, ADAPTIVE);
    tile base = x + plane * H * W;
    acc_t best[BLOCK] = -INF;
    acc_t total[BLOCK] = 0;
    i64 at[BLOCK] = 0;
    at += pl_first(hs, DH) * W + pl_first(ws, DW);
    for (i32 a = 0; a < KH; a++) {
        tile h = hs + a * DH;
        tile row_ok = mask & (h >= 0) & (h < H) & (h < he);
        for (i32 b = 0; b < KW; b++) {
            tile w = ws + b * DW;
            tile ok = row_ok & (w >= 0) & (w < W) & (w < we);
            tile v = (acc_t)load(base + h * W + w, ok, 0.0f);
            if (MAX) {
                tile take = ok & ((v > best) | (v != v));
                best = where(take, v, best);
                at = where(take, h * W + w, at);
            } else {
                total += v;
            }
        }
    }
    if (MAX) {
        store(y + offs, best, mask);
        store(idx + offs, at, mask);
    } else {
        tile count = pl_divisor(oh, ow, H, W, OH, OW, KH, KW, SH, SW, PH, PW, include_pad,
                                divisor, ADAPTIVE);
        store(y + offs, total / count, mask);
    }
}

/* the t-th output along a dimension whose window may hold input index i (-1 if none): the
 * latest regular window (of the n_out) starting at or before i, then earlier ones; adaptive
 * ones from the first that may hold i on */
tile pl_candidate(tile i, i32 t, i32 n, i32 n_out, i32 k, i32 s, i32 p, i32 d,
                  const i32 ADAPTIVE)
{
    tile o = minimum((i + p) / s, n_out - 1) - t;
    if (ADAPTIVE) {
        o = (i * n_out) / n + t;
    }
    tile holds = (pl_start(o, n, n_out, s, p, ADAPTIVE) <= i)
                 & (i < pl_end(o, n, n_out, k, s, p, d, ADAPTIVE));
    return where((o >= 0) & (o < n_out) & holds, o, -1);
}

kernel pool_bwd(any *dx, const any *dy, const i64 *idx, i32 n, i32 H, i32 W, i32 OH, i32 OW,
                i32 KH, i32 KW, i32 SH, i32 SW, i32 PH, i32 PW, i32 DH, i32 DW, i32 TH, i32 TW,
                i32 include_pad, i32 divisor, const i32 MAX, const i32 ADAPTIVE,
                const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile iw = offs % W;
    tile ih = (offs / W) % H;
    tile plane = offs / W / H;
    tile here = ih * W + iw;
    acc_t acc[BLOCK] = 0;
    for (i32 a = 0; a < TH; a++) {
        tile oh = pl_candidate(ih, a, H, OH, KH, SH, PH, DH, ADAPTIVE);
        for (i32 b = 0; b < TW; b++) {
            tile ow = pl_candidate(iw, b, W, OW, KW, SW, PW, DW, ADAPTIVE);
            tile ok = mask & (oh >= 0) & (ow >= 0);
            tile o = (plane * OH + oh) * OW + ow;
            tile g = (acc_t)load(dy + o, ok, 0.0f);
            if (MAX) {
                acc += where(ok & (load(idx + o, ok, -1) == here), g, 0.0f);
            } else {
                tile count = pl_divisor(oh, ow, H, W, OH, OW, KH, KW, SH, SW, PH, PW,
                                        include_pad, divisor, ADAPTIVE);
                acc += where(ok, g / count, 0.0f);
            }
        }
    }
    store(dx + offs, acc, mask);
}
