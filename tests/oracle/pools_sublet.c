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
 *   pools_sublet SCENARIO */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/pool.h"
#include "sublet/sublet.h"

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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pools_sublet SCENARIO\n");
        return 2;
    }
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
    sublet_allocator_destroy(a);
    sublet_backend_destroy(be);
    return 0;
}
