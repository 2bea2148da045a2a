/* sublet — shared helpers for the engine tests; see harness.h. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/harness.h"

#define H_FAIL(file, line, ...)          \
    do {                                 \
        print_error(__VA_ARGS__);        \
        _fail((file), (line));           \
    } while (0)

void h_env_init_at(h_env *e, int kind, uint64_t capacity, const char *conf, const char *file,
                   int line)
{
    memset(e, 0, sizeof *e);
    sublet_status st = kind == H_HOST ? sublet_host_create(capacity, &e->inner)
                                      : sublet_sim_create(capacity, &e->inner);
    if (st != SUBLET_OK)
        H_FAIL(file, line, "backend creation failed: %s\n", sublet_status_name(st));
    e->be = e->inner;
    if (kind == H_SIM_FAULT) {
        st = sublet_fault_create(e->inner, &e->fault);
        if (st != SUBLET_OK)
            H_FAIL(file, line, "fault wrapper creation failed: %s\n", sublet_status_name(st));
        e->be = e->fault;
    }
    sublet_options o = {.backend = e->be, .device = 0, .conf = conf ? conf : ""};
    char err[512];
    st = sublet_allocator_create(&o, &e->a, err, sizeof err);
    if (st != SUBLET_OK)
        H_FAIL(file, line, "allocator creation failed: %s: %s\n", sublet_status_name(st), err);
    h_check_at(e->a, file, line);
}

void h_env_fini(h_env *e)
{
    if (e->a) {
        CHECK(e->a);
        sublet_allocator_destroy(e->a);
    }
    if (e->fault)
        sublet_backend_destroy(e->fault);
    if (e->inner)
        sublet_backend_destroy(e->inner);
    memset(e, 0, sizeof *e);
}

void h_check_at(sublet_allocator *a, const char *file, int line)
{
    char msg[512];
    sublet_status st = sublet_check(a, msg, sizeof msg);
    if (st != SUBLET_OK)
        H_FAIL(file, line, "sublet_check: %s: %s\n", sublet_status_name(st), msg);
}

sublet_status h_try_malloc_at(sublet_allocator *a, uint64_t n, sublet_stream s, void **p,
                              const char *file, int line)
{
    sublet_status st = sublet_malloc(a, n, s, p);
    h_check_at(a, file, line);
    if (st != SUBLET_OK && *p != NULL)
        H_FAIL(file, line, "malloc failed (%s) but returned a pointer\n", sublet_status_name(st));
    return st;
}

void *h_malloc_at(sublet_allocator *a, uint64_t n, sublet_stream s, const char *file, int line)
{
    void *p = NULL;
    sublet_status st = h_try_malloc_at(a, n, s, &p, file, line);
    if (st != SUBLET_OK || !p)
        H_FAIL(file, line, "malloc(%llu, stream %llu) failed: %s\n", (unsigned long long)n,
               (unsigned long long)s, sublet_status_name(st));
    return p;
}

sublet_status h_try_free_at(sublet_allocator *a, void *p, const char *file, int line)
{
    sublet_status st = sublet_free(a, p);
    h_check_at(a, file, line);
    return st;
}

void h_free_at(sublet_allocator *a, void *p, const char *file, int line)
{
    sublet_status st = h_try_free_at(a, p, file, line);
    if (st != SUBLET_OK)
        H_FAIL(file, line, "free(%p) failed: %s\n", p, sublet_status_name(st));
}

sublet_status h_try_record_at(sublet_allocator *a, void *p, sublet_stream s, const char *file,
                              int line)
{
    sublet_status st = sublet_record_stream(a, p, s);
    h_check_at(a, file, line);
    return st;
}

void h_record_at(sublet_allocator *a, void *p, sublet_stream s, const char *file, int line)
{
    sublet_status st = h_try_record_at(a, p, s, file, line);
    if (st != SUBLET_OK)
        H_FAIL(file, line, "record_stream(%p, %llu) failed: %s\n", p, (unsigned long long)s,
               sublet_status_name(st));
}

void h_empty_cache_at(sublet_allocator *a, const char *file, int line)
{
    sublet_status st = sublet_empty_cache(a);
    h_check_at(a, file, line);
    if (st != SUBLET_OK)
        H_FAIL(file, line, "empty_cache failed: %s\n", sublet_status_name(st));
}

void h_process_events_at(sublet_allocator *a, const char *file, int line)
{
    sublet_status st = sublet_process_events(a);
    h_check_at(a, file, line);
    if (st != SUBLET_OK)
        H_FAIL(file, line, "process_events failed: %s\n", sublet_status_name(st));
}

int64_t h_stat_at(sublet_allocator *a, const char *key, const char *file, int line)
{
    sublet_stats s;
    sublet_stats_read(a, &s);
    int64_t v = 0;
    if (sublet_stats_lookup(&s, key, &v) != 0)
        H_FAIL(file, line, "unknown stat key '%s'\n", key);
    return v;
}

void h_block_at(sublet_allocator *a, const void *p, uint64_t *base, uint64_t *size,
                uint64_t *requested, const char *file, int line)
{
    sublet_status st = sublet_block_info(a, p, base, size, requested);
    if (st != SUBLET_OK)
        H_FAIL(file, line, "block_info(%p): %s\n", p, sublet_status_name(st));
}

uint64_t h_block_size_at(sublet_allocator *a, const void *p, const char *file, int line)
{
    uint64_t size = 0;
    h_block_at(a, p, NULL, &size, NULL, file, line);
    return size;
}

typedef struct seg_collect {
    h_seginfo *out;
    size_t cap, n;
} seg_collect;

static void seg_cb(void *user, const sublet_segment_view *sv)
{
    seg_collect *c = user;
    if (c->n < c->cap)
        c->out[c->n] = (h_seginfo){sv->addr, sv->total_size, sv->nblocks, sv->is_small,
                                   sv->stream};
    c->n++;
}

size_t h_segments(sublet_allocator *a, h_seginfo *out, size_t cap)
{
    seg_collect c = {out, cap, 0};
    sublet_segments_walk(a, seg_cb, &c);
    return c.n;
}

size_t h_nsegments(sublet_allocator *a) { return h_segments(a, NULL, 0); }

h_seginfo h_segment_of_at(sublet_allocator *a, uint64_t addr, const char *file, int line)
{
    h_seginfo segs[256];
    size_t n = h_segments(a, segs, 256);
    for (size_t i = 0; i < n && i < 256; i++)
        if (addr >= segs[i].addr && addr < segs[i].addr + segs[i].size)
            return segs[i];
    H_FAIL(file, line, "no segment holds 0x%llx\n", (unsigned long long)addr);
    return (h_seginfo){0};
}

void h_stats_equal_at(const sublet_stats *want, const sublet_stats *got, const char *file,
                      int line)
{
    static char wb[32768], gb[32768];
    size_t wn = sublet_stats_format_flat(want, wb, sizeof wb);
    size_t gn = sublet_stats_format_flat(got, gb, sizeof gb);
    if (wn >= sizeof wb || gn >= sizeof gb)
        H_FAIL(file, line, "flat stats do not fit the buffer\n");
    if (strcmp(wb, gb) == 0)
        return;
    const char *w = wb, *g = gb;
    for (;;) {
        const char *we = strchr(w, '\n'), *ge = strchr(g, '\n');
        size_t wl = we ? (size_t)(we - w) : strlen(w), gl = ge ? (size_t)(ge - g) : strlen(g);
        if (wl != gl || memcmp(w, g, wl) != 0)
            H_FAIL(file, line, "stats differ: want '%.*s', got '%.*s'\n", (int)wl, w, (int)gl,
                   g);
        if (!we || !ge)
            break;
        w = we + 1;
        g = ge + 1;
    }
    H_FAIL(file, line, "stats differ\n");
}

void h_stat_inc(sublet_stat *s, int64_t x)
{
    s->current += x;
    if (s->current > s->peak)
        s->peak = s->current;
    s->allocated += x;
}

void h_stat_dec(sublet_stat *s, int64_t x)
{
    s->current -= x;
    s->freed += x;
}

void h_arr_add(sublet_stat *arr, int kind, int64_t x)
{
    if (x > 0) {
        h_stat_inc(&arr[SUBLET_POOL_ALL], x);
        h_stat_inc(&arr[kind], x);
    } else if (x < 0) {
        h_stat_dec(&arr[SUBLET_POOL_ALL], -x);
        h_stat_dec(&arr[kind], -x);
    }
}

uint64_t h_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t h_rand_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
    return lo + h_rand(state) % (hi - lo);
}

/* ---- a synthetic trace ---------------------------------------------------------- */

static uint64_t h_lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

sublet_trace *h_synthetic_trace(uint64_t seed, int rows, int streams)
{
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    uint64_t rng = seed, next_addr = UINT64_C(0x100000000);
    enum { LIVE = 64 };
    struct {
        uint64_t addr, size, stream;
        int pending;
    } live[LIVE];
    size_t nlive = 0;
    static const uint64_t sizes[] = {512,     4000,     100000,   1048576,  1048577,
                                     3 * MiB, 7340032, 20 * MiB, 33554431, 100 * MiB};
    if (streams < 1)
        streams = 1;
    for (int i = 0; i < rows; i++) {
        uint64_t pick = h_lcg(&rng) % 100;
        sublet_trace_event e = {.kind = SUBLET_ACT_ALLOC};
        if (pick < 2) {
            e.kind = SUBLET_ACT_SEGMENT_FREE; /* drives one empty_cache() */
        } else if (pick < 50 && nlive < LIVE) {
            e.size = sizes[h_lcg(&rng) % 10] + h_lcg(&rng) % 4096;
            e.stream = 9 * (h_lcg(&rng) % (uint64_t)streams);
            e.addr = next_addr;
            next_addr += 512;
            live[nlive].addr = e.addr;
            live[nlive].size = e.size;
            live[nlive].stream = e.stream;
            live[nlive++].pending = 0;
        } else if (nlive) {
            size_t k = h_lcg(&rng) % nlive;
            e.addr = live[k].addr;
            e.size = live[k].size;
            e.stream = live[k].stream;
            if (live[k].pending) {
                e.kind = SUBLET_ACT_FREE_COMPLETED;
                live[k] = live[--nlive];
            } else {
                e.kind = SUBLET_ACT_FREE_REQUESTED;
                if (h_lcg(&rng) % 5 == 0) {
                    live[k].pending = 1; /* completed by a later row */
                } else {
                    assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
                    e.kind = SUBLET_ACT_FREE_COMPLETED;
                    live[k] = live[--nlive];
                }
            }
        } else {
            continue;
        }
        assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
    }
    return t;
}
