/* sublet — the private-pool scenario driver beside pools_torch.cpp: runs the same scenario
 * file through sublet's engine on the sim backend under pytorch_version:2.6 and prints the
 * same line per step (tests/cli_oracle_pools.sh compares them).  Graph pool P is the id
 * (P, 0), a capture on stream S a redirection with the stream filter S.
 *   pools_sublet SCENARIO */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/pool.h"
#include "sublet/sublet.h"

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
    char line[256], op[16];
    long step = 0;
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
    sublet_allocator_destroy(a);
    sublet_backend_destroy(be);
    return 0;
}
