/* sublet — synthetic traces of any length for the streaming benchmarks
 * (bench/bench_stream.sh).
 *
 *   bench_stream_gen EVENTS OUT_PREFIX [SEED] [random|steps]
 *
 * Drives a live allocator (sim backend, 80 GiB) with a steady workload and
 * writes what it did twice: OUT_PREFIX.events.csv (the engine's trace
 * events as rows, time_us = the step) and OUT_PREFIX.slog (sublet's event
 * log, sublet_log_open, written synchronously so that nothing is dropped).
 * Both replay to the same result.  The workload: between 1,000 and 2,000
 * live blocks, 70 % small (512 B .. 1 MiB) and 30 % large (1 .. 64 MiB),
 * log-uniform sizes; one free in five follows a record_stream on a second
 * stream, completed every 64 steps (a deferred free_completed row); an
 * empty_cache every 200,000 steps (runs of segment_free rows).  Stops once
 * EVENTS rows were written.
 *
 * The workload `steps`: a training loop, whose sizes repeat as a model's
 * tensor shapes do.  A 24-layer transformer-like model (hidden 2048, 2-byte
 * elements, 4 weight tensors a layer, kept live with their fp32 optimizer
 * state: ~300 live blocks) runs steps of batch 8 and a sequence length drawn
 * from {128, 256, 384, 512} each step.  Forward: each layer allocates an
 * activation kept for the backward pass and two temporaries freed at once.
 * Backward, in reverse: a gradient of the activation, a gradient of each
 * weight (bucketed for an all-reduce: a record_stream on a second stream,
 * completed at the end of the step, before the optimizer), then the
 * activation is freed.  Optimizer: one temporary a weight.  An empty_cache
 * every 2,000 steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/backend.h"
#include "sublet/log.h"
#include "sublet/sublet.h"

#define MAX_LIVE 2000
#define SIDE_STREAM 7

typedef struct gen {
    FILE *csv;
    uint64_t rows, step;
} gen;

static void on_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    gen *g = user;
    fprintf(g->csv, "%llu,%s,%llu,%llu,%llu,%llu\n", (unsigned long long)g->rows,
            sublet_action_name(act), (unsigned long long)addr, (unsigned long long)size,
            (unsigned long long)stream, (unsigned long long)(1700000000000000ull + g->step));
    g->rows++;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double unit(void) { return (double)(next_rand() >> 11) / 9007199254740992.0; }

static uint64_t log_uniform(double lo, double hi)
{
    return (uint64_t)exp(log(lo) + unit() * (log(hi) - log(lo)));
}

static void run_random(sublet_allocator *a, sublet_backend *sim, gen *g, uint64_t want)
{
    void *live[MAX_LIVE];
    size_t nlive = 0, target = 1500;
    while (g->rows < want) {
        g->step++;
        if (g->step % 4096 == 0)
            target = 1000 + next_rand() % (MAX_LIVE - 1000);
        if (nlive < target && (nlive == 0 || unit() < 0.55)) {
            uint64_t size = unit() < 0.7 ? log_uniform(512, 1 << 20)
                                         : log_uniform(1 << 20, 64 << 20);
            void *p = NULL;
            if (sublet_malloc(a, size, 0, &p) == SUBLET_OK && p)
                live[nlive++] = p;
        } else if (nlive) {
            size_t k = next_rand() % nlive;
            void *p = live[k];
            live[k] = live[--nlive];
            if (unit() < 0.2)
                sublet_record_stream(a, p, SIDE_STREAM);
            sublet_free(a, p);
        }
        if (g->step % 64 == 0)
            sublet_sim_stream_complete(sim, SIDE_STREAM);
        if (g->step % 200000 == 0)
            sublet_empty_cache(a);
    }
}

#define LAYERS 24
#define HIDDEN 2048ull

static void *must_malloc(sublet_allocator *a, uint64_t size)
{
    void *p = NULL;
    if (sublet_malloc(a, size, 0, &p) != SUBLET_OK || !p) {
        fprintf(stderr, "bench_stream_gen: alloc of %llu bytes failed\n", (unsigned long long)size);
        exit(1);
    }
    return p;
}

static void run_steps(sublet_allocator *a, sublet_backend *sim, gen *g, uint64_t want)
{
    /* weights of a layer: qkv (3h x h), out (h x h), mlp up (4h x h), down (h x 4h) */
    static const uint64_t wmul[4] = {3, 1, 4, 4};
    for (int l = 0; l < LAYERS; l++) /* live to the end */
        for (int k = 0; k < 4; k++) {
            uint64_t n = wmul[k] * HIDDEN * HIDDEN;
            (void)must_malloc(a, 2 * n);
            (void)must_malloc(a, 4 * n); /* fp32 Adam moments */
            (void)must_malloc(a, 4 * n);
        }
    void *act[LAYERS];
    while (g->rows < want) {
        g->step++;
        uint64_t seq = 128 * (1 + next_rand() % 4), tok = 8 * seq;
        for (int l = 0; l < LAYERS && g->rows < want; l++) {
            act[l] = must_malloc(a, 2 * tok * HIDDEN * 2); /* saved input and attention out */
            void *t1 = must_malloc(a, 2 * tok * 4 * HIDDEN); /* mlp hidden */
            void *t2 = must_malloc(a, 4 * 8 * 16 * seq * seq / 16); /* attention scores, fp32 */
            sublet_free(a, t2);
            sublet_free(a, t1);
        }
        for (int l = LAYERS - 1; l >= 0 && g->rows < want; l--) {
            void *ga = must_malloc(a, 2 * tok * HIDDEN);
            for (int k = 0; k < 4; k++) {
                void *gw = must_malloc(a, 2 * wmul[k] * HIDDEN * HIDDEN);
                sublet_record_stream(a, gw, SIDE_STREAM); /* its all-reduce */
                sublet_free(a, gw);
            }
            sublet_free(a, act[l]);
            sublet_free(a, ga);
            act[l] = NULL;
        }
        for (int l = 0; l < LAYERS; l++) /* a step cut short frees what it kept */
            if (act[l]) {
                sublet_free(a, act[l]);
                act[l] = NULL;
            }
        sublet_sim_stream_complete(sim, SIDE_STREAM);
        for (int l = 0; l < LAYERS && g->rows < want; l++)
            for (int k = 0; k < 4; k++)
                sublet_free(a, must_malloc(a, 4 * wmul[k] * HIDDEN * HIDDEN));
        if (g->step % 2000 == 0)
            sublet_empty_cache(a);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3 || (argc > 4 && strcmp(argv[4], "random") && strcmp(argv[4], "steps"))) {
        fprintf(stderr, "usage: bench_stream_gen EVENTS OUT_PREFIX [SEED] [random|steps]\n");
        return 2;
    }
    int steps = argc > 4 && strcmp(argv[4], "steps") == 0;
    uint64_t want = strtoull(argv[1], NULL, 10);
    if (argc > 3)
        rng ^= strtoull(argv[3], NULL, 10) * 0x9e3779b97f4a7c15ull;
    char path[4096];
    snprintf(path, sizeof path, "%s.events.csv", argv[2]);
    gen g = {fopen(path, "w"), 0, 0};
    if (!g.csv) {
        perror(path);
        return 1;
    }
    static char iobuf[1 << 20];
    setvbuf(g.csv, iobuf, _IOFBF, sizeof iobuf);
    fputs("seq,action,addr,size,stream,time_us\n", g.csv);
    sublet_backend *sim = NULL;
    sublet_allocator *a = NULL;
    char err[512];
    if (sublet_sim_create((uint64_t)80 << 30, &sim) != SUBLET_OK)
        return 1;
    sublet_options ao = {.backend = sim, .device = 0, .conf = ""};
    if (sublet_allocator_create(&ao, &a, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    snprintf(path, sizeof path, "%s.slog", argv[2]);
    sublet_log_options lo = {.flags = SUBLET_LOG_SYNC, .buffer_bytes = 1 << 20};
    sublet_log *log = NULL;
    if (sublet_log_open(a, path, &lo, &log, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    sublet_trace_set(a, on_trace, &g);
    if (steps)
        run_steps(a, sim, &g, want);
    else
        run_random(a, sim, &g, want);
    sublet_trace_set(a, NULL, NULL);
    sublet_status st = sublet_log_close(log);
    fclose(g.csv);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(sim);
    if (st != SUBLET_OK) {
        fprintf(stderr, "log: %s\n", sublet_status_text(st));
        return 1;
    }
    printf("rows=%llu steps=%llu\n", (unsigned long long)g.rows, (unsigned long long)g.step);
    return 0;
}
