/* Test kernels for atomics. KIND: 0 add, 1 max, 2 min, 3 and, 4 or, 5 xor, 6 xchg. */

kernel histogram(i32 *bins, const i32 *values, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    atomic_add(bins + load(values + offs, mask, 0), 1, mask);
}

/* Every lane of every program adds into total[0]: maximal contention. */
kernel contended(any *total, const any *x, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    atomic_add(total + 0 * offs, load(x + offs, mask, 0), mask, RELAXED);
}

/* One scalar atomic per program: the block's sum into total; old[pid] gets the value before. */
kernel scalar_sum(any *total, any *old, const any *x, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile x_t = load(x + offs, offs < n, 0);
    store(old + program_id(0), atomic_add(total, sum(x_t)));
}

/* dst[offs % M] op= src[offs]; old values stored. */
kernel update(any *dst, const any *src, any *old, i32 n, i32 m, const i32 KIND, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile v = load(src + offs, mask, 0);
    tile p = dst + offs % m;
    tile o = KIND == 0 ? atomic_add(p, v, mask) : KIND == 1 ? atomic_max(p, v, mask)
           : KIND == 2 ? atomic_min(p, v, mask) : KIND == 3 ? atomic_and(p, v, mask)
           : KIND == 4 ? atomic_or(p, v, mask) : KIND == 5 ? atomic_xor(p, v, mask)
           : atomic_xchg(p, v, mask);
    store(old + offs, o, mask);
}

/* A spin lock from atomic_cas/atomic_xchg guarding a non-atomic read-modify-write. */
kernel locked_increment(i32 *lock, i32 *counter, const i32 BLOCK)
{
    while (atomic_cas(lock, 0, 1, ACQUIRE) != 0) {
    }
    store(counter, load(counter) + 1);
    atomic_xchg(lock, 0, true, RELEASE);
}
