/* sublet — the private-pool scenario driver beside pools_torch.cpp: runs the same scenario
 * file through sublet's engine on the sim backend under pytorch_version:2.6 and prints the
 * same line per step (tests/cli_oracle_pools.sh compares them).  Graph pool P is the id
 * (P, 0), a capture on stream S a redirection with the stream filter S.  MemPools (pools_gen.py
 * ... mempool, sublet only): `M` sublet_pool_create, `U K` / `X K` use_mem_pool's enter (thread
 * filter) and exit (end + release), `D K` the MemPool's destructor (release + pool_empty_cache).
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
    char line[256], op[16];
    long step = 0;
    sublet_pool_id mp[MAX_POOLS] = {{0, 0}};
    size_t nmp = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%15s", op) != 1 || op[0] == '#')
            continue;
        unsigned long long x = 0, y = 0, z = 0;
        int n = sscanf(line, "%*s %llu %llu %llu", &x, &y, &z);
        if (!strcmp(op, "capacity")) {
            sublet_options o = {0};
            if (sublet_sim_create(x, &be) != SUBLET_OK)
                return 1;
            o.backend = be;
            o.conf = "pytorch_version:2.6";
            if (sublet_allocator_create(&o, &a, NULL, 0) != SUBLET_OK)
                return 1;
            if (rc)
                sublet_trace_set(a, on_trace, rc);
            continue;
        }
        sublet_status st = SUBLET_OK;
        uint64_t ptr = 0;
        char oom[1024] = "";
        if (!strcmp(op, "a") && n == 3 && x < MAX_IDS) {
            void *p = NULL;
            st = sublet_malloc(a, y, z, &p);
            if (st == SUBLET_ERR_OOM) {
                oom_figures(a, oom, sizeof oom);
                st = SUBLET_OK;
            }
            live[x] = p;
            ptr = (uint64_t)(uintptr_t)p;
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
        } else if (!strcmp(op, "M") && nmp + 1 < MAX_POOLS) {
            st = sublet_pool_create(a, NULL, &mp[++nmp]);
        } else if (!strcmp(op, "U") && n == 1 && x >= 1 && x <= nmp) {
            st = sublet_pool_begin_allocate(a, mp[x], SUBLET_POOL_FILTER_THREAD, 0);
        } else if (!strcmp(op, "X") && n == 1 && x >= 1 && x <= nmp) {
            st = sublet_pool_end_allocate(a, mp[x]);
            if (st == SUBLET_OK)
                st = sublet_pool_release(a, mp[x]);
        } else if (!strcmp(op, "D") && n == 1 && x >= 1 && x <= nmp) {
            st = sublet_pool_release(a, mp[x]);
            if (st == SUBLET_OK)
                st = sublet_pool_empty_cache(a, mp[x]);
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
               ", \"ooms\": %" PRId64 ", \"syncs\": %" PRId64 ", \"pools\": {",
               step, op, ptr, s.reserved_bytes[0].current, s.allocated_bytes[0].current,
               s.segment[0].current, s.segment[1].current, s.num_device_alloc, s.num_device_free,
               s.num_alloc_retries, s.num_ooms, s.num_sync_all_streams);
        int first = 1;
        for (uint64_t p = 1; p < MAX_POOLS; p++) {
            sublet_stats ps;
            if (sublet_pool_stats_read(a, (sublet_pool_id){p, 0}, &ps) != SUBLET_OK ||
                ps.segment[0].current == 0)
                continue;
            printf("%s\"%" PRIu64 "\": [%" PRId64 ", %" PRId64 ", %" PRId64 "]", first ? "" : ", ", p,
                   ps.reserved_bytes[0].current, ps.allocated_bytes[0].current,
                   ps.segment[0].current);
            first = 0;
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
