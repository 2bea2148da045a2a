/* sublet — the private-pool scenario driver beside pools_torch.cpp: runs the same scenario
 * file through sublet's engine on the sim backend under pytorch_version:2.6 and prints the
 * same line per step (tests/cli_oracle_pools.sh compares them).  Graph pool P is the id
 * (P, 0), a capture on stream S a redirection with the stream filter S; MemPool K is the K-th
 * sublet_pool_create (id (0, K)), use_mem_pool a redirection with the thread filter, followed by
 * end and release, its destruction sublet_pool_release + sublet_pool_empty_cache; "s" completes
 * every stream of the sim backend (pools_torch.cpp lists the lines).  Under expandable segments
 * each reservation is placed where the oracle's fake driver puts its n-th one
 * (tests/oracle/fake_driver.cpp: from 0x600000000000, each 1 GiB past the end of the previous
 * one, whose size is 9/8 of the capacity in whole pages: 2 MiB for the small pool, 20 MiB for
 * the large), so that the addresses compare too.  Each pool's figures are those of PyTorch's
 * snapshot (its segments, mapped runs under expandable segments), from sublet_segments_walk,
 * and must equal the pool's own statistics.
 *   pools_sublet SCENARIO [TRACE.pickle|TRACE.json]
 * With TRACE, the run is also written as PyTorch records it: a snapshot whose trace entries
 * carry the newest PyTorch's pool_id (every event of a private pool's memory) and whose
 * final segments carry segment_pool_id (tests/cli_replay_pools.sh replays it). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/pool.h"
#include "sublet/snapshot.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

#define MAX_IDS 100000
#define MAX_POOLS 64

/* Per pool, as pools_torch reads PyTorch's snapshot: reserved, allocated, active bytes,
 * segments. */
typedef struct pool_sum {
    uint64_t id[2];
    int64_t v[4];
} pool_sum;

typedef struct pool_sums {
    pool_sum p[2 * MAX_POOLS];
    size_t n;
} pool_sums;

static void sum_segment(void *user, const sublet_segment_view *seg)
{
    pool_sums *ps = user;
    if (seg->pool_id[0] == 0 && seg->pool_id[1] == 0)
        return;
    size_t i = 0;
    while (i < ps->n && (ps->p[i].id[0] != seg->pool_id[0] || ps->p[i].id[1] != seg->pool_id[1]))
        i++;
    if (i == ps->n) {
        if (ps->n == sizeof ps->p / sizeof ps->p[0])
            return;
        ps->p[ps->n++] = (pool_sum){{seg->pool_id[0], seg->pool_id[1]}, {0, 0, 0, 0}};
    }
    ps->p[i].v[0] += (int64_t)seg->total_size;
    ps->p[i].v[1] += (int64_t)seg->allocated_size;
    ps->p[i].v[2] += (int64_t)seg->active_size;
    ps->p[i].v[3] += 1;
}

static int sum_cmp(const void *x, const void *y)
{
    const pool_sum *a = x, *b = y;
    if (a->id[0] != b->id[0])
        return a->id[0] < b->id[0] ? -1 : 1;
    return a->id[1] < b->id[1] ? -1 : a->id[1] > b->id[1];
}

static const char *oom_figures(sublet_allocator *a, char *buf, size_t cap)
{
    char msg[4096];
    sublet_oom_message(a, msg, sizeof msg);
    const char *s = strstr(msg, "Of the allocated memory"), *e = strstr(msg, "unallocated.");
    if (!s || !e)
        return "";
    snprintf(buf, cap, "%.*s", (int)(e + 12 - s), s);
    return buf;
}

/* ---- the recording (TRACE) --------------------------------------------------------------- */

/* The engine's trace events of one step, given their pools after it (the trace callback runs
 * under the allocator's lock, where sublet_pool_of cannot be asked). */
#define MAX_STEP_EVENTS 4096
#define MAX_SEGS 65536
typedef struct rec {
    sublet_trace *t;
    sublet_trace_event step[MAX_STEP_EVENTS];
    size_t n;
    int overflow;
    struct { uint64_t addr, pool[2]; } seg[MAX_SEGS], blk[MAX_IDS]; /* live, with their pools */
    size_t nseg, nblk;
} rec;

static void on_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    rec *r = user;
    if (r->n == MAX_STEP_EVENTS) {
        r->overflow = 1;
        return;
    }
    r->step[r->n++] = (sublet_trace_event){.kind = (uint32_t)act, .addr = addr, .size = size,
                                           .stream = stream};
}

/* Find addr in a live list: its index, or -1. */
static long find(const uint64_t *addrs, size_t stride, size_t n, uint64_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (addrs[i * stride] == addr)
            return (long)i;
    return -1;
}

/* The step's events into the trace, with pools: an alloc's is the pool of its block (asked
 * after the step, while the block is live), the segment_alloc before it the same; a free's
 * is its block's, a segment_free's its segment's. */
static int rec_flush(rec *r, sublet_allocator *a)
{
    const size_t stride = sizeof r->seg[0] / sizeof(uint64_t);
    for (size_t i = 0; i < r->n; i++) {
        sublet_trace_event *e = &r->step[i];
        e->line = sublet_trace_count(r->t) + 1;
        long k;
        switch (e->kind) {
        case SUBLET_ACT_ALLOC: {
            sublet_pool_id id = {0, 0};
            if (sublet_pool_of(a, (const void *)(uintptr_t)e->addr, &id) != SUBLET_OK)
                return -1;
            e->pool_id[0] = id.first;
            e->pool_id[1] = id.second;
            for (size_t j = i; j-- > 0 && r->step[j].kind == SUBLET_ACT_SEGMENT_ALLOC;)
                if (r->step[j].addr <= e->addr && e->addr - r->step[j].addr < r->step[j].size) {
                    sublet_trace_event *g = &r->step[j];
                    g->pool_id[0] = id.first;
                    g->pool_id[1] = id.second;
                    /* and in the live list (appended with the default pools) */
                    k = find(&r->seg[0].addr, stride, r->nseg, g->addr);
                    if (k >= 0) {
                        r->seg[k].pool[0] = id.first;
                        r->seg[k].pool[1] = id.second;
                    }
                }
            if (r->nblk == MAX_IDS)
                return -1;
            r->blk[r->nblk].addr = e->addr;
            r->blk[r->nblk].pool[0] = id.first;
            r->blk[r->nblk++].pool[1] = id.second;
            break;
        }
        case SUBLET_ACT_FREE_REQUESTED:
        case SUBLET_ACT_FREE_COMPLETED:
            k = find(&r->blk[0].addr, stride, r->nblk, e->addr);
            if (k >= 0) {
                e->pool_id[0] = r->blk[k].pool[0];
                e->pool_id[1] = r->blk[k].pool[1];
                if (e->kind == SUBLET_ACT_FREE_COMPLETED)
                    r->blk[k] = r->blk[--r->nblk];
            }
            break;
        case SUBLET_ACT_SEGMENT_ALLOC:
            if (r->nseg == MAX_SEGS)
                return -1;
            r->seg[r->nseg].addr = e->addr;
            r->seg[r->nseg].pool[0] = r->seg[r->nseg].pool[1] = 0;
            r->nseg++;
            break;
        case SUBLET_ACT_SEGMENT_FREE:
            k = find(&r->seg[0].addr, stride, r->nseg, e->addr);
            if (k >= 0) {
                e->pool_id[0] = r->seg[k].pool[0];
                e->pool_id[1] = r->seg[k].pool[1];
                r->seg[k] = r->seg[--r->nseg];
            }
            break;
        default:
            break;
        }
    }
    /* the pools of the step's segment_allocs are known only at its alloc: append now */
    for (size_t i = 0; i < r->n; i++)
        if (sublet_trace_append(r->t, &r->step[i]) != SUBLET_OK)
            return -1;
    r->n = 0;
    return r->overflow ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: pools_sublet SCENARIO [TRACE.pickle|TRACE.json]\n");
        return 2;
    }
    static rec recording;
    rec *rc = argc == 3 ? &recording : NULL;
    if (rc && sublet_trace_create(&rc->t) != SUBLET_OK)
        return 1;
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    static void *live[MAX_IDS];
    sublet_backend *be = NULL;
    sublet_allocator *a = NULL;
    char line[512], op[16], conf[400] = "pytorch_version:2.6";
    long step = 0;
    uint64_t capacity = 0, next_va = UINT64_C(0x600000000000);
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%15s", op) != 1 || op[0] == '#')
            continue;
        if (!strcmp(op, "conf")) {
            char extra[300] = "";
            if (sscanf(line, "%*s %299s", extra) == 1)
                snprintf(conf, sizeof conf, "pytorch_version:2.6,%s", extra);
            continue;
        }
        unsigned long long x = 0, y = 0, z = 0;
        int n = sscanf(line, "%*s %llu %llu %llu", &x, &y, &z);
        if (!strcmp(op, "capacity")) {
            sublet_options o = {0};
            if (sublet_sim_create(x, &be) != SUBLET_OK)
                return 1;
            capacity = x;
            o.backend = be;
            o.conf = conf;
            char err[256];
            if (sublet_allocator_create(&o, &a, err, sizeof err) != SUBLET_OK) {
                fprintf(stderr, "pools_sublet: %s: %s\n", conf, err);
                return 1;
            }
            if (rc)
                sublet_trace_set(a, on_trace, rc);
            continue;
        }
        sublet_status st = SUBLET_OK;
        uint64_t ptr = 0;
        char oom[1024] = "";
        if (!strcmp(op, "a") && n == 3 && x < MAX_IDS) {
            void *p = NULL;
            int exp = strstr(conf, "expandable_segments:True") != NULL;
            sublet_sim_ops before, after;
            sublet_sim_ops_read(be, &before);
            if (exp)
                sublet_sim_next_hint(be, next_va);
            st = sublet_malloc(a, y, z, &p);
            if (st == SUBLET_ERR_OOM) {
                oom_figures(a, oom, sizeof oom);
                st = SUBLET_OK;
            }
            live[x] = p;
            ptr = (uint64_t)(uintptr_t)p;
            sublet_sim_ops_read(be, &after);
            if (exp && after.va_reserves != before.va_reserves) {
                uint64_t page = y <= (UINT64_C(1) << 20) ? UINT64_C(2) << 20 : UINT64_C(20) << 20;
                uint64_t want = capacity + capacity / 8, size = (want + page - 1) / page * page;
                next_va += (size + (UINT64_C(1) << 30)) & ~((UINT64_C(1) << 21) - 1);
                if (after.va_reserves != before.va_reserves + 1) {
                    fprintf(stderr, "pools_sublet: step %ld made %" PRIu64 " reservations\n", step,
                            after.va_reserves - before.va_reserves);
                    return 1;
                }
            }
        } else if (!strcmp(op, "f") && n == 1 && x < MAX_IDS) {
            st = sublet_free(a, live[x]);
            live[x] = NULL;
        } else if (!strcmp(op, "b") && n == 2) {
            st = sublet_pool_begin_allocate(a, (sublet_pool_id){x, 0}, SUBLET_POOL_FILTER_STREAM, y);
        } else if (!strcmp(op, "e") && n == 1) {
            st = sublet_pool_end_allocate(a, (sublet_pool_id){x, 0});
        } else if (!strcmp(op, "r") && n == 1) {
            st = sublet_pool_release(a, (sublet_pool_id){x, 0});
        } else if (!strcmp(op, "c")) {
            st = sublet_empty_cache(a);
        } else if (!strcmp(op, "m") && n == 1) {
            sublet_pool_id id;
            st = sublet_pool_create(a, NULL, &id);
            if (st == SUBLET_OK && (id.first != 0 || id.second != x)) {
                fprintf(stderr, "pools_sublet: MemPool %llu has id (%" PRIu64 ", %" PRIu64 ")\n", x,
                        id.first, id.second);
                return 1;
            }
        } else if (!strcmp(op, "u") && n == 1) {
            st = sublet_pool_begin_allocate(a, (sublet_pool_id){0, x}, SUBLET_POOL_FILTER_THREAD, 0);
        } else if (!strcmp(op, "x") && n == 1) {
            st = sublet_pool_end_allocate(a, (sublet_pool_id){0, x});
            if (st == SUBLET_OK)
                st = sublet_pool_release(a, (sublet_pool_id){0, x});
        } else if (!strcmp(op, "d") && n == 1) {
            st = sublet_pool_release(a, (sublet_pool_id){0, x});
            if (st == SUBLET_OK)
                st = sublet_pool_empty_cache(a, (sublet_pool_id){0, x});
        } else if (!strcmp(op, "R") && n == 2 && x < MAX_IDS) {
            st = sublet_record_stream(a, live[x], y);
        } else if (!strcmp(op, "s")) {
            sublet_sim_complete_all(be);
        } else {
            fprintf(stderr, "pools_sublet: bad line: %s", line);
            return 2;
        }
        char msg[512];
        if (st != SUBLET_OK || sublet_check(a, msg, sizeof msg) != SUBLET_OK) {
            fprintf(stderr, "pools_sublet: step %ld (%.*s): %s\n", step, (int)strcspn(line, "\n"),
                    line, st != SUBLET_OK ? sublet_status_name(st) : msg);
            return 1;
        }
        if (rc && rec_flush(rc, a) != 0) {
            fprintf(stderr, "pools_sublet: step %ld: recording the trace failed\n", step);
            return 1;
        }
        sublet_stats s;
        sublet_stats_read(a, &s);
        printf("{\"i\": %ld, \"op\": \"%s\", \"ptr\": %" PRIu64 ", \"reserved\": %" PRId64
               ", \"allocated\": %" PRId64 ", \"segments\": %" PRId64 ", \"small_segments\": %" PRId64
               ", \"device_allocs\": %" PRId64 ", \"device_frees\": %" PRId64 ", \"retries\": %" PRId64
               ", \"ooms\": %" PRId64 ", \"syncs\": %" PRId64 ", \"active\": %" PRId64
               ", \"pools\": {",
               step, op, ptr, s.reserved_bytes[0].current, s.allocated_bytes[0].current,
               s.segment[0].current, s.segment[1].current, s.num_device_alloc, s.num_device_free,
               s.num_alloc_retries, s.num_ooms, s.num_sync_all_streams, s.active_bytes[0].current);
        pool_sums sums = {.n = 0};
        sublet_segments_walk(a, sum_segment, &sums);
        qsort(sums.p, sums.n, sizeof sums.p[0], sum_cmp); /* PyTorch's map order of ids */
        for (size_t k = 0; k < sums.n; k++) {
            const pool_sum *q = &sums.p[k];
            sublet_stats ps;
            if (sublet_pool_stats_read(a, (sublet_pool_id){q->id[0], q->id[1]}, &ps) != SUBLET_OK ||
                ps.reserved_bytes[0].current != q->v[0] || ps.allocated_bytes[0].current != q->v[1] ||
                ps.active_bytes[0].current != q->v[2]) {
                fprintf(stderr, "pools_sublet: step %ld: pool (%" PRIu64 ",%" PRIu64
                        ")'s statistics differ from its segments\n", step, q->id[0], q->id[1]);
                return 1;
            }
            printf("%s\"%" PRIu64 "_%" PRIu64 "\": [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                   k ? ", " : "", q->id[0], q->id[1], q->v[0], q->v[1], q->v[2], q->v[3]);
        }
        printf("}%s%s%s}\n", oom[0] ? ", \"oom\": \"" : "", oom, oom[0] ? "\"" : "");
        step++;
    }
    fclose(f);
    if (rc) {
        char err[512];
        sublet_snapshot *snap = NULL;
        sublet_status st = sublet_snapshot_from_trace(rc->t, "pytorch_version:2.6", &snap, err,
                                                      sizeof err);
        if (st == SUBLET_OK)
            st = sublet_snapshot_write(snap, argv[2], SUBLET_SNAPSHOT_AUTO, err, sizeof err);
        sublet_snapshot_free(snap);
        sublet_trace_free(rc->t);
        if (st != SUBLET_OK) {
            fprintf(stderr, "pools_sublet: %s: %s\n", argv[2], err);
            return 1;
        }
    }
    sublet_allocator_destroy(a);
    sublet_backend_destroy(be);
    return 0;
}
