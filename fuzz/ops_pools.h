/* fuzz_ops' private-pool part (included once, by fuzz/fuzz_ops.c, after its
 * state, model checks and plain operations; every function is static): the
 * pools' own allocator, the per-pool checks, and the pool operations.  Kept
 * apart so that each file stays one concern of a readable size. */
#ifndef SUBLET_FUZZ_OPS_POOLS_H
#define SUBLET_FUZZ_OPS_POOLS_H

/* ---- the pools' own allocator --------------------------------------------------- */

static sublet_status custom_alloc(void *user, uint64_t size, uint64_t *addr)
{
    fuzz_state *fs = user;
    if (fs->ncustom == MAX_CUSTOM || size > CUSTOM_CAP - fs->custom_bytes || size == 0 ||
        size % 512 != 0)
        return SUBLET_ERR_DEVICE_OOM;
    void *m = aligned_alloc(4096, (size + 4095) & ~(uint64_t)4095);
    if (!m)
        return SUBLET_ERR_DEVICE_OOM;
    fs->custom[fs->ncustom++] = (custom_seg){m, size};
    fs->custom_bytes += size;
    *addr = (uint64_t)(uintptr_t)m;
    return SUBLET_OK;
}

static void custom_free(void *user, uint64_t addr, uint64_t size)
{
    fuzz_state *fs = user;
    for (size_t i = 0; i < fs->ncustom; i++)
        if ((uint64_t)(uintptr_t)fs->custom[i].mem == addr) {
            if (fs->custom[i].size != size)
                fuzz_fail("pool allocator: free of 0x%llx with %llu B, allocated %llu B",
                          (unsigned long long)addr, (unsigned long long)size,
                          (unsigned long long)fs->custom[i].size);
            free(fs->custom[i].mem);
            fs->custom_bytes -= size;
            fs->custom[i] = fs->custom[--fs->ncustom];
            return;
        }
    fuzz_fail("pool allocator: free of 0x%llx (%llu B), never allocated",
              (unsigned long long)addr, (unsigned long long)size);
}

/* Each known pool's statistics against the model's blocks in it. */
static void check_pools(fuzz_state *fs, const sublet_stats *all, const char *after)
{
    int64_t reserved = 0, allocated = 0;
    for (size_t k = 0; k < fs->npools; k++) {
        sublet_pool_id id = fs->pools[k].id;
        int64_t nb = 0, bytes = 0;
        for (size_t i = 0; i < fs->nlive; i++)
            if (id_eq(fs->live[i].pool, id)) {
                nb++;
                bytes += (int64_t)fs->live[i].bsize;
            }
        sublet_pool_info in;
        sublet_stats ps;
        if (sublet_pool_info_read(fs->a, id, &in) != SUBLET_OK)
            fuzz_fail("after %s: pool_info_read failed", after);
        sublet_status st = sublet_pool_stats_read(fs->a, id, &ps);
        if (!in.exists) {
            if (st != SUBLET_ERR_INVALID_ARGUMENT || nb != 0)
                fuzz_fail("after %s: pool (%llu,%llu) unknown (stats: %s) with %lld live blocks",
                          after, (unsigned long long)id.first, (unsigned long long)id.second,
                          sublet_status_name(st), (long long)nb);
            continue;
        }
        if (st != SUBLET_OK)
            fuzz_fail("after %s: pool_stats_read: %s", after, sublet_status_name(st));
        if (ps.allocation[SUBLET_POOL_ALL].current != nb ||
            ps.allocated_bytes[SUBLET_POOL_ALL].current != bytes)
            fuzz_fail("after %s: pool (%llu,%llu) has %lld blocks / %lld B, model %lld / %lld",
                      after, (unsigned long long)id.first, (unsigned long long)id.second,
                      (long long)ps.allocation[0].current,
                      (long long)ps.allocated_bytes[0].current, (long long)nb, (long long)bytes);
        if (in.use_count < 0 || (in.use_count == 0) != (in.freeable != 0))
            fuzz_fail("after %s: pool (%llu,%llu) use count %d freeable %d", after,
                      (unsigned long long)id.first, (unsigned long long)id.second, in.use_count,
                      in.freeable);
        int model_alloc = 0;
        for (size_t r = 0; r < fs->nredirects; r++)
            model_alloc |= id_eq(fs->redirects[r].id, id);
        if (model_alloc != (in.allocating != 0))
            fuzz_fail("after %s: pool (%llu,%llu) allocating %d, model %d", after,
                      (unsigned long long)id.first, (unsigned long long)id.second,
                      in.allocating, model_alloc);
        if ((int64_t)in.free_bytes >
            ps.reserved_bytes[SUBLET_POOL_ALL].current - ps.allocated_bytes[SUBLET_POOL_ALL].current)
            fuzz_fail("after %s: pool (%llu,%llu) caches %llu B of %lld reserved, %lld allocated",
                      after, (unsigned long long)id.first, (unsigned long long)id.second,
                      (unsigned long long)in.free_bytes,
                      (long long)ps.reserved_bytes[0].current,
                      (long long)ps.allocated_bytes[0].current);
        reserved += ps.reserved_bytes[SUBLET_POOL_ALL].current;
        allocated += ps.allocated_bytes[SUBLET_POOL_ALL].current;
    }
    if (reserved > all->reserved_bytes[SUBLET_POOL_ALL].current ||
        allocated > all->allocated_bytes[SUBLET_POOL_ALL].current)
        fuzz_fail("after %s: the pools reserve %lld B / allocate %lld B, the allocator %lld / %lld",
                  after, (long long)reserved, (long long)allocated,
                  (long long)all->reserved_bytes[0].current,
                  (long long)all->allocated_bytes[0].current);
}

/* ---- private pools ---------------------------------------------------------------------- */

static sublet_pool_info pool_info(fuzz_state *fs, sublet_pool_id id)
{
    sublet_pool_info in;
    sublet_status st = sublet_pool_info_read(fs->a, id, &in);
    if (st != SUBLET_OK)
        fuzz_fail("pool_info_read: %s", sublet_status_name(st));
    return in;
}

static void expect_status(sublet_status st, sublet_status want, const char *what,
                          sublet_pool_id id)
{
    if (st != want)
        fuzz_fail("%s(%llu,%llu): %s, expected %s", what, (unsigned long long)id.first,
                  (unsigned long long)id.second, sublet_status_name(st),
                  sublet_status_name(want));
}

static void expect_uses(fuzz_state *fs, sublet_pool_id id, int uses, const char *what)
{
    sublet_pool_info in = pool_info(fs, id);
    if (!in.exists || in.use_count != uses)
        fuzz_fail("after %s(%llu,%llu): exists %d use count %d, expected %d", what,
                  (unsigned long long)id.first, (unsigned long long)id.second, in.exists,
                  in.use_count, uses);
}

static pool_slot *pick_pool(fuzz_state *fs, reader *r)
{
    uint8_t k = rd8(r);
    return fs->npools ? &fs->pools[k % fs->npools] : NULL;
}

static void op_pool_handle(fuzz_state *fs, reader *r)
{
    int space = rd8(r) & 1;
    if (fs->npools == MAX_POOLS)
        return;
    sublet_pool_id id;
    sublet_status st = sublet_pool_handle(fs->a, space, &id);
    expect_status(st, SUBLET_OK, "pool_handle", (sublet_pool_id){0, 0});
    if (space == SUBLET_POOL_ID_GRAPH ? (id.first == 0 || id.second != 0)
                                      : (id.first != 0 || id.second == 0))
        fuzz_fail("pool_handle(%d) made (%llu,%llu)", space, (unsigned long long)id.first,
                  (unsigned long long)id.second);
    for (size_t k = 0; k < fs->npools; k++)
        if (id_eq(fs->pools[k].id, id))
            fuzz_fail("pool_handle made (%llu,%llu) twice", (unsigned long long)id.first,
                      (unsigned long long)id.second);
    if (pool_info(fs, id).exists)
        fuzz_fail("pool_handle's new id already names a pool");
    fs->pools[fs->npools++] = (pool_slot){id, 0};
}

static void op_pool_create(fuzz_state *fs, reader *r)
{
    uint8_t k = rd8(r);
    if (fs->npools == MAX_POOLS)
        return;
    sublet_pool_options o = {.use_on_oom = k & 1, .no_split = (k >> 1) & 1};
    if (k & 4) {
        o.alloc = custom_alloc;
        o.free = custom_free;
        o.user = fs;
    }
    sublet_stats before;
    sublet_stats_read(fs->a, &before);
    sublet_pool_id id = {0, 0};
    sublet_status st = sublet_pool_create(fs->a, &o, &id);
    expect_status(st, SUBLET_OK, "pool_create", id);
    if (id.first != 0 || id.second == 0)
        fuzz_fail("pool_create made (%llu,%llu)", (unsigned long long)id.first,
                  (unsigned long long)id.second);
    expect_uses(fs, id, 1, "pool_create");
    expect_stats_unchanged(fs, &before, "pool_create");
    fs->pools[fs->npools++] = (pool_slot){id, o.use_on_oom};
}

static void op_pool_incref(fuzz_state *fs, reader *r)
{
    pool_slot *ps = pick_pool(fs, r);
    if (!ps)
        return;
    sublet_pool_info in = pool_info(fs, ps->id);
    sublet_status st = sublet_pool_incref(fs->a, ps->id);
    if (in.exists && in.use_count <= 0) {
        expect_status(st, SUBLET_ERR_INVALID_ARGUMENT, "pool_incref of a freeable pool", ps->id);
    } else {
        expect_status(st, SUBLET_OK, "pool_incref", ps->id);
        if (!in.exists)
            ps->use_on_oom = 0; /* a new pool under the old id, without options */
        expect_uses(fs, ps->id, in.exists ? in.use_count + 1 : 1, "pool_incref");
    }
}

typedef struct begin_job {
    sublet_allocator *a;
    sublet_pool_id id;
    sublet_status st;
} begin_job;

static void *begin_thread(void *arg)
{
    begin_job *j = arg;
    j->st = sublet_pool_begin_allocate(j->a, j->id, SUBLET_POOL_FILTER_THREAD, 0);
    return NULL;
}

static void op_pool_begin(fuzz_state *fs, reader *r)
{
    pool_slot *ps = pick_pool(fs, r);
    uint8_t k = rd8(r);
    if (!ps || fs->nredirects == MAX_REDIRECTS)
        return;
    /* k % 4: 0-2 a stream filter on streams[k % 4], 3 the thread filter; bit 2 with
     * the thread filter: begun by a helper thread */
    int filter = k % 4 == 3 ? SUBLET_POOL_FILTER_THREAD : SUBLET_POOL_FILTER_STREAM;
    int helper = filter == SUBLET_POOL_FILTER_THREAD && (k & 4);
    sublet_stream stream = filter == SUBLET_POOL_FILTER_STREAM ? streams[k % 4] : 0;
    sublet_pool_info in = pool_info(fs, ps->id);
    sublet_stats before;
    sublet_stats_read(fs->a, &before);
    sublet_status st;
    if (helper) {
        begin_job j = {fs->a, ps->id, SUBLET_ERR_NO_MEMORY};
        pthread_t t;
        if (pthread_create(&t, NULL, begin_thread, &j) != 0)
            return;
        pthread_join(t, NULL);
        st = j.st;
    } else {
        st = sublet_pool_begin_allocate(fs->a, ps->id, filter, stream);
    }
    expect_stats_unchanged(fs, &before, "pool_begin_allocate");
    if (in.exists && in.use_count <= 0) {
        expect_status(st, SUBLET_ERR_INVALID_ARGUMENT, "pool_begin_allocate of a freeable pool",
                      ps->id);
        return;
    }
    if (!in.exists)
        ps->use_on_oom = 0;
    expect_uses(fs, ps->id, in.exists ? in.use_count + 1 : 1, "pool_begin_allocate");
    if (in.exists && in.allocating) {
        expect_status(st, SUBLET_ERR_BUSY, "pool_begin_allocate of a pool being allocated to",
                      ps->id);
        return;
    }
    expect_status(st, SUBLET_OK, "pool_begin_allocate", ps->id);
    fs->redirects[fs->nredirects++] =
        (redirect_model){.id = ps->id, .filter = filter, .stream = stream, .mine = !helper};
}

static void op_pool_end(fuzz_state *fs, reader *r)
{
    pool_slot *ps = pick_pool(fs, r);
    if (!ps)
        return;
    sublet_pool_info in = pool_info(fs, ps->id);
    sublet_status st = sublet_pool_end_allocate(fs->a, ps->id);
    size_t k = 0;
    while (k < fs->nredirects && !id_eq(fs->redirects[k].id, ps->id))
        k++;
    if (k == fs->nredirects) {
        expect_status(st, SUBLET_ERR_INVALID_ARGUMENT, "pool_end_allocate (not allocating)",
                      ps->id);
        return;
    }
    expect_status(st, SUBLET_OK, "pool_end_allocate", ps->id);
    memmove(fs->redirects + k, fs->redirects + k + 1,
            (fs->nredirects - k - 1) * sizeof *fs->redirects);
    fs->nredirects--;
    expect_uses(fs, ps->id, in.use_count, "pool_end_allocate");
}

static void op_pool_release(fuzz_state *fs, reader *r)
{
    pool_slot *ps = pick_pool(fs, r);
    if (!ps)
        return;
    sublet_pool_info in = pool_info(fs, ps->id);
    sublet_status st = sublet_pool_release(fs->a, ps->id);
    if (!in.exists || in.use_count <= 0 || (in.use_count == 1 && in.allocating)) {
        expect_status(st, SUBLET_ERR_INVALID_ARGUMENT, "pool_release", ps->id);
        return;
    }
    expect_status(st, SUBLET_OK, "pool_release", ps->id);
    expect_uses(fs, ps->id, in.use_count - 1, "pool_release");
}

/* Whole, wholly inactive (not expandable) segments of a pool. */
typedef struct idle_probe {
    sublet_pool_id id;
    int idle;
} idle_probe;

static void idle_probe_fn(void *user, const sublet_segment_view *seg)
{
    idle_probe *p = user;
    if (seg->pool_id[0] == p->id.first && seg->pool_id[1] == p->id.second &&
        !seg->is_expandable && seg->active_size == 0)
        p->idle++;
}

static void op_pool_empty_cache(fuzz_state *fs, reader *r)
{
    pool_slot *ps = pick_pool(fs, r);
    if (!ps)
        return;
    sublet_pool_info in = pool_info(fs, ps->id);
    sublet_stats before;
    sublet_stats_read(fs->a, &before);
    sublet_status st = sublet_pool_empty_cache(fs->a, ps->id);
    expect_status(st, SUBLET_OK, "pool_empty_cache", ps->id);
    sublet_pool_info now = pool_info(fs, ps->id);
    sublet_stats after;
    sublet_stats_read(fs->a, &after);
    if (in.exists && !in.freeable) {
        /* a live pool keeps its cache */
        if (!now.exists || now.device_segments != in.device_segments ||
            after.reserved_bytes[0].current != before.reserved_bytes[0].current)
            fuzz_fail("pool_empty_cache of a live pool released memory");
    }
    if (in.exists && in.freeable && now.exists && fs->nredirects == 0) {
        idle_probe ip = {ps->id, 0};
        sublet_segments_walk(fs->a, idle_probe_fn, &ip);
        if (ip.idle)
            fuzz_fail("pool_empty_cache of a freeable pool kept %d wholly free segments",
                      ip.idle);
    }
}

/* Calls that name no pool or the default pools: refused, nothing changes. */
static void op_pool_bogus(fuzz_state *fs, reader *r)
{
    uint8_t k = rd8(r);
    sublet_pool_id id = (k & 8) ? (sublet_pool_id){0, 0} : (sublet_pool_id){UINT64_C(1) << 40, 7};
    sublet_stats before, ps;
    sublet_stats_read(fs->a, &before);
    sublet_status st, want = SUBLET_ERR_INVALID_ARGUMENT;
    switch (k % 6) {
    case 0:
        st = sublet_pool_begin_allocate(fs->a, (sublet_pool_id){0, 0},
                                        (k & 16) ? SUBLET_POOL_FILTER_THREAD : 2, 0);
        break;
    case 1:
        st = sublet_pool_end_allocate(fs->a, id);
        break;
    case 2:
        st = sublet_pool_release(fs->a, id);
        break;
    case 3:
        st = id.first == 0 ? sublet_pool_empty_cache(fs->a, id) : (want = SUBLET_OK,
                             sublet_pool_empty_cache(fs->a, id));
        break;
    case 4:
        st = sublet_pool_stats_read(fs->a, id, &ps);
        break;
    default:
        st = sublet_pool_incref(fs->a, (sublet_pool_id){0, 0});
        break;
    }
    expect_status(st, want, "pool call on a bogus id", id);
    expect_stats_unchanged(fs, &before, "pool call on a bogus id");
}

#endif
