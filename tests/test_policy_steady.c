/* Steady state under the virtual-memory policies: on a workload that repeats
 * the same training iteration, the device's map operations in iterations
 * after the second are zero (or within a small bound near the minimum
 * capacity).  Two workloads:
 *
 *   attention  the recorded attention micro-benchmark
 *              (tests/data/cs336_attention_microbench.events.csv) as one
 *              iteration: its allocs and frees in order, then whatever it
 *              left live is freed, so every iteration starts from the cache;
 *   training   a synthetic transformer training step: parameters allocated
 *              once; per iteration a forward pass (activations kept for
 *              backward, temporaries freed at once, small layer-norm stats
 *              and biases' grads mixed in), a backward pass in reverse
 *              (activation grads, parameter grads, the saved activations
 *              freed), an Adam step (its state allocated lazily in the
 *              first step only, as torch.optim does; foreach temporaries),
 *              and zero_grad(set_to_none=True) freeing the grads;
 *   holes      weights of 1.5 MiB, every other one dropped after loading, so
 *              that the free memory lies in holes inside pages that hold
 *              live bytes; per iteration activations larger than any hole:
 *              at policy:stitch's minimum they are stitched from the holes'
 *              pages (alias maps) in the first iteration and reuse those
 *              mappings from then on.
 *
 * Each runs for N iterations under policy:stitch and expandable_segments:True
 * on an 80 GiB device and on the smallest device on which all N iterations
 * run (found here by bisection at 2 MiB resolution), and counts the sim
 * backend's maps and unmaps per iteration (sublet_sim_ops_read).  The runs
 * whose counts are asserted call sublet_check() after every operation (the
 * bisection's probes do not).  Figures: docs/policies.md, "Steady state". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sublet/trace.h"
#include "support/harness.h"

#define ITERS 10
#define RES (2 * MiB)

/* ---- workloads -------------------------------------------------------------------- */

enum { OP_ALLOC = 0, OP_FREE = 1, OP_ALLOC_FIRST = 2 /* first iteration only */ };

typedef struct op {
    int kind;
    uint32_t id;
    uint64_t size;
} op;

typedef struct workload {
    const char *name;
    op *pro;  /* once, before the first iteration */
    size_t npro, pro_cap;
    op *it;   /* one iteration */
    size_t nit, it_cap;
    uint32_t nids;
    uint64_t peak_live; /* peak of live requested bytes over ITERS iterations */
} workload;

static void push(op **v, size_t *n, size_t *cap, op o)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        *v = realloc(*v, *cap * sizeof **v);
        assert_non_null(*v);
    }
    (*v)[(*n)++] = o;
}

static uint32_t w_alloc(workload *w, int prologue, int kind, uint64_t size)
{
    uint32_t id = w->nids++;
    op o = {kind, id, size};
    if (prologue)
        push(&w->pro, &w->npro, &w->pro_cap, o);
    else
        push(&w->it, &w->nit, &w->it_cap, o);
    return id;
}

static void w_free(workload *w, uint32_t id)
{
    op o = {OP_FREE, id, 0};
    push(&w->it, &w->nit, &w->it_cap, o);
}

static void w_free_prologue(workload *w, uint32_t id)
{
    op o = {OP_FREE, id, 0};
    push(&w->pro, &w->npro, &w->pro_cap, o);
}

static void w_fini(workload *w)
{
    free(w->pro);
    free(w->it);
}

/* Peak of live requested bytes over `iters` iterations (the floor of any
 * allocator). */
static uint64_t w_peak_live(const workload *w, int iters)
{
    uint64_t *live = calloc(w->nids, sizeof *live);
    assert_non_null(live);
    uint64_t cur = 0, peak = 0;
    for (size_t i = 0; i < w->npro; i++) {
        const op *o = &w->pro[i];
        if (o->kind == OP_FREE) {
            cur -= live[o->id];
            live[o->id] = 0;
        } else {
            live[o->id] = o->size;
            cur += o->size;
        }
        if (cur > peak)
            peak = cur;
    }
    for (int k = 0; k < iters; k++) {
        for (size_t i = 0; i < w->nit; i++) {
            const op *o = &w->it[i];
            if (o->kind == OP_FREE) {
                cur -= live[o->id];
                live[o->id] = 0;
            } else if (o->kind == OP_ALLOC || k == 0) {
                live[o->id] = o->size;
                cur += o->size;
            }
            if (cur > peak)
                peak = cur;
        }
    }
    free(live);
    return peak;
}

/* The attention micro-benchmark as one iteration. */
static void build_attention(workload *w)
{
    memset(w, 0, sizeof *w);
    w->name = "attention";
    const char *dir = getenv("SUBLET_TESTDATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/cs336_attention_microbench.events.csv", dir ? dir : "tests/data");
    sublet_trace *t = NULL;
    char err[256];
    sublet_status st = sublet_trace_load_csv(path, &t, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("%s", err);
    size_t n = sublet_trace_count(t);
    /* trace address -> id of the live alloc there */
    uint64_t *addr = calloc(n, sizeof *addr);
    uint32_t *ids = calloc(n, sizeof *ids);
    int *alive = calloc(n, sizeof *alive);
    size_t nlive = 0;
    assert_true(addr && ids && alive);
    for (size_t i = 0; i < n; i++) {
        const sublet_trace_event *e = sublet_trace_at(t, i);
        assert_int_equal(e->stream, 0);
        if (e->kind == SUBLET_ACT_ALLOC && e->size) {
            addr[nlive] = e->addr;
            ids[nlive] = w_alloc(w, 0, OP_ALLOC, e->size);
            alive[nlive++] = 1;
        } else if (e->kind == SUBLET_ACT_FREE_REQUESTED && e->size) {
            size_t j = nlive;
            while (j-- > 0)
                if (alive[j] && addr[j] == e->addr)
                    break;
            assert_true(j < nlive);
            alive[j] = 0;
            w_free(w, ids[j]);
        }
    }
    for (size_t j = nlive; j-- > 0;)
        if (alive[j])
            w_free(w, ids[j]);
    free(addr);
    free(ids);
    free(alive);
    sublet_trace_free(t);
    w->peak_live = w_peak_live(w, ITERS);
}

/* A synthetic transformer training step (fp32): d = 1024, 4 layers, 16
 * heads, 2048 tokens of 512, vocabulary 32000. */
static void build_training(workload *w)
{
    memset(w, 0, sizeof *w);
    w->name = "training";
    enum { L = 4, NPAR = 12 };
    const uint64_t d = 1024, tok = 2048, heads = 16, seq = 512, vocab = 32000, f = 4;
    const uint64_t act = tok * d * f;                        /* 8 MiB */
    const uint64_t scores = (tok / seq) * heads * seq * seq * f; /* 64 MiB */
    const uint64_t psize[NPAR] = {3 * d * d * f, 3 * d * f, d * d * f, d * f,     /* attn */
                                  4 * d * d * f, 4 * d * f, 4 * d * d * f, d * f, /* mlp */
                                  d * f,         d * f,     d * f,         d * f}; /* ln */
    /* parameters: embedding (tied output projection), then each layer's */
    w_alloc(w, 1, OP_ALLOC, vocab * d * f);
    for (int l = 0; l < L; l++)
        for (int p = 0; p < NPAR; p++)
            w_alloc(w, 1, OP_ALLOC, psize[p]);
    /* forward */
    uint32_t saved[L][11];
    uint32_t x = w_alloc(w, 0, OP_ALLOC, act); /* embedding output */
    for (int l = 0; l < L; l++) {
        uint32_t *s = saved[l];
        s[10] = x;                                    /* the layer's input */
        s[0] = w_alloc(w, 0, OP_ALLOC, act);          /* ln1 out */
        s[1] = w_alloc(w, 0, OP_ALLOC, tok * f * 2);  /* ln1 mean/rstd (small) */
        s[2] = w_alloc(w, 0, OP_ALLOC, 3 * act);      /* qkv */
        uint32_t sc = w_alloc(w, 0, OP_ALLOC, scores);
        s[3] = w_alloc(w, 0, OP_ALLOC, scores);       /* probs */
        w_free(w, sc);
        s[4] = w_alloc(w, 0, OP_ALLOC, act);          /* attention out */
        uint32_t proj = w_alloc(w, 0, OP_ALLOC, act);
        s[5] = w_alloc(w, 0, OP_ALLOC, act);          /* residual */
        w_free(w, proj);
        s[6] = w_alloc(w, 0, OP_ALLOC, act);          /* ln2 out */
        s[7] = w_alloc(w, 0, OP_ALLOC, tok * f * 2);  /* ln2 stats */
        s[8] = w_alloc(w, 0, OP_ALLOC, 4 * act);      /* fc1 out */
        s[9] = w_alloc(w, 0, OP_ALLOC, 4 * act);      /* gelu out */
        uint32_t h2 = w_alloc(w, 0, OP_ALLOC, act);
        uint32_t nx = w_alloc(w, 0, OP_ALLOC, act);   /* residual: next x */
        w_free(w, h2);
        x = nx;
    }
    uint32_t logits = w_alloc(w, 0, OP_ALLOC, tok * vocab * f); /* 250 MiB */
    uint32_t loss = w_alloc(w, 0, OP_ALLOC, 4);
    /* backward */
    uint32_t glog = w_alloc(w, 0, OP_ALLOC, tok * vocab * f);
    w_free(w, logits);
    uint32_t gemb = w_alloc(w, 0, OP_ALLOC, vocab * d * f);
    uint32_t gx = w_alloc(w, 0, OP_ALLOC, act);
    w_free(w, glog);
    w_free(w, x);
    uint32_t grads[L][NPAR];
    for (int l = L - 1; l >= 0; l--) {
        uint32_t *s = saved[l];
        /* mlp */
        grads[l][6] = w_alloc(w, 0, OP_ALLOC, psize[6]);
        grads[l][7] = w_alloc(w, 0, OP_ALLOC, psize[7]);
        uint32_t gh = w_alloc(w, 0, OP_ALLOC, 4 * act);
        w_free(w, s[9]);
        uint32_t gh1 = w_alloc(w, 0, OP_ALLOC, 4 * act);
        w_free(w, gh);
        w_free(w, s[8]);
        grads[l][4] = w_alloc(w, 0, OP_ALLOC, psize[4]);
        grads[l][5] = w_alloc(w, 0, OP_ALLOC, psize[5]);
        uint32_t g2 = w_alloc(w, 0, OP_ALLOC, act);
        w_free(w, gh1);
        grads[l][10] = w_alloc(w, 0, OP_ALLOC, psize[10]);
        grads[l][11] = w_alloc(w, 0, OP_ALLOC, psize[11]);
        uint32_t g3 = w_alloc(w, 0, OP_ALLOC, act);
        w_free(w, g2);
        w_free(w, s[6]);
        w_free(w, s[7]);
        w_free(w, s[5]);
        /* attention */
        grads[l][2] = w_alloc(w, 0, OP_ALLOC, psize[2]);
        grads[l][3] = w_alloc(w, 0, OP_ALLOC, psize[3]);
        uint32_t ga = w_alloc(w, 0, OP_ALLOC, act);
        w_free(w, s[4]);
        uint32_t gp = w_alloc(w, 0, OP_ALLOC, scores);
        uint32_t gs = w_alloc(w, 0, OP_ALLOC, scores);
        w_free(w, gp);
        w_free(w, s[3]);
        uint32_t gqkv = w_alloc(w, 0, OP_ALLOC, 3 * act);
        w_free(w, gs);
        w_free(w, ga);
        w_free(w, s[2]);
        grads[l][0] = w_alloc(w, 0, OP_ALLOC, psize[0]);
        grads[l][1] = w_alloc(w, 0, OP_ALLOC, psize[1]);
        uint32_t g4 = w_alloc(w, 0, OP_ALLOC, act);
        w_free(w, gqkv);
        grads[l][8] = w_alloc(w, 0, OP_ALLOC, psize[8]);
        grads[l][9] = w_alloc(w, 0, OP_ALLOC, psize[9]);
        uint32_t g5 = w_alloc(w, 0, OP_ALLOC, act);
        w_free(w, g4);
        w_free(w, s[0]);
        w_free(w, s[1]);
        w_free(w, g3);
        w_free(w, gx);
        w_free(w, s[10]);
        gx = g5;
    }
    w_free(w, gx);
    w_free(w, loss);
    /* Adam: state allocated in the first step only; foreach temporaries */
    w_alloc(w, 0, OP_ALLOC_FIRST, vocab * d * f);
    w_alloc(w, 0, OP_ALLOC_FIRST, vocab * d * f);
    for (int l = 0; l < L; l++)
        for (int p = 0; p < NPAR; p++) {
            w_alloc(w, 0, OP_ALLOC_FIRST, psize[p]);
            w_alloc(w, 0, OP_ALLOC_FIRST, psize[p]);
        }
    uint32_t t1 = w_alloc(w, 0, OP_ALLOC, vocab * d * f);
    w_free(w, t1);
    for (int l = 0; l < L; l++)
        for (int p = 0; p < NPAR; p++) {
            uint32_t t = w_alloc(w, 0, OP_ALLOC, psize[p]);
            uint32_t t2 = w_alloc(w, 0, OP_ALLOC, psize[p]);
            w_free(w, t);
            w_free(w, t2);
        }
    /* zero_grad(set_to_none=True) */
    w_free(w, gemb);
    for (int l = 0; l < L; l++)
        for (int p = 0; p < NPAR; p++)
            w_free(w, grads[l][p]);
    w->peak_live = w_peak_live(w, ITERS);
}

/* Weights whose every other tensor is dropped after loading: 24 of 1.5 MiB,
 * so the 12 holes straddle pages that hold live bytes and no page is
 * wholly free; then per iteration activations larger than any hole. */
static void build_holes(workload *w)
{
    memset(w, 0, sizeof *w);
    w->name = "holes";
    uint32_t ids[24];
    for (int i = 0; i < 24; i++)
        ids[i] = w_alloc(w, 1, OP_ALLOC, 1536 * KiB);
    for (int i = 1; i < 24; i += 2)
        w_free_prologue(w, ids[i]);
    uint32_t a = w_alloc(w, 0, OP_ALLOC, 3 * MiB);
    uint32_t b = w_alloc(w, 0, OP_ALLOC, 5 * MiB / 2);
    uint32_t t = w_alloc(w, 0, OP_ALLOC, 512 * KiB);
    w_free(w, t);
    uint32_t c = w_alloc(w, 0, OP_ALLOC, 2 * MiB);
    w_free(w, b);
    w_free(w, a);
    w_free(w, c);
    w->peak_live = w_peak_live(w, ITERS);
}

/* ---- running a workload ----------------------------------------------------------- */

typedef struct run_result {
    sublet_status st;            /* SUBLET_OK, or SUBLET_ERR_OOM at the first OOM */
    int oom_iteration;           /* 1-based, 0 = none (-1: in the prologue) */
    uint64_t maps[ITERS + 1];    /* [0]: prologue, [k]: iteration k (alias maps included) */
    uint64_t aliases[ITERS + 1]; /* of the maps: policy:stitch's alias maps */
    uint64_t unmaps[ITERS + 1];
    uint64_t reserves[ITERS + 1];
    uint64_t segment_allocs[ITERS + 1];
    uint64_t allocs_per_iter;
} run_result;

static void ops_delta(const sublet_sim_ops *b, const sublet_sim_ops *e, run_result *r, int k)
{
    r->maps[k] = e->va_maps - b->va_maps;
    r->aliases[k] = e->va_aliases - b->va_aliases;
    r->unmaps[k] = e->va_unmaps - b->va_unmaps;
    r->reserves[k] = e->va_reserves - b->va_reserves;
    r->segment_allocs[k] = e->segment_allocs - b->segment_allocs;
}

static sublet_status do_op(sublet_allocator *a, const op *o, void **ptrs, int check)
{
    sublet_status st;
    if (o->kind == OP_FREE) {
        if (check)
            h_free(a, ptrs[o->id]);
        else
            assert_int_equal(sublet_free(a, ptrs[o->id]), SUBLET_OK);
        ptrs[o->id] = NULL;
        return SUBLET_OK;
    }
    st = check ? h_try_malloc(a, o->size, 0, &ptrs[o->id])
               : sublet_malloc(a, o->size, 0, &ptrs[o->id]);
    return st;
}

static void run(const workload *w, const char *conf, uint64_t capacity, int iters, int check,
                run_result *r)
{
    memset(r, 0, sizeof *r);
    h_env e;
    h_env_init(&e, H_SIM, capacity, conf);
    void **ptrs = calloc(w->nids, sizeof *ptrs);
    assert_non_null(ptrs);
    sublet_sim_ops b, en;
    sublet_sim_ops_read(e.inner, &b);
    for (size_t i = 0; i < w->npro && r->st == SUBLET_OK; i++)
        if ((r->st = do_op(e.a, &w->pro[i], ptrs, check)) != SUBLET_OK)
            r->oom_iteration = -1;
    sublet_sim_ops_read(e.inner, &en);
    ops_delta(&b, &en, r, 0);
    for (int k = 1; k <= iters && r->st == SUBLET_OK; k++) {
        b = en;
        for (size_t i = 0; i < w->nit; i++) {
            const op *o = &w->it[i];
            if (o->kind == OP_ALLOC_FIRST && k > 1)
                continue;
            if (k == 1 && o->kind != OP_FREE)
                r->allocs_per_iter += o->kind == OP_ALLOC;
            if ((r->st = do_op(e.a, o, ptrs, check)) != SUBLET_OK) {
                r->oom_iteration = k;
                break;
            }
        }
        sublet_sim_ops_read(e.inner, &en);
        ops_delta(&b, &en, r, k);
    }
    if (r->st != SUBLET_OK)
        assert_int_equal(r->st, SUBLET_ERR_OOM);
    for (uint32_t i = 0; i < w->nids; i++)
        if (ptrs[i])
            assert_int_equal(sublet_free(e.a, ptrs[i]), SUBLET_OK);
    free(ptrs);
    h_env_fini(&e);
}

/* Smallest device (a multiple of 2 MiB) on which `iters` iterations run. */
static uint64_t min_capacity(const workload *w, const char *conf, int iters)
{
    run_result r;
    uint64_t lo = w->peak_live / RES; /* lo * RES < peak live: fails (or equals) */
    if (lo)
        lo--;
    uint64_t hi = lo + 1;
    for (;;) {
        run(w, conf, hi * RES, iters, 0, &r);
        if (r.st == SUBLET_OK)
            break;
        lo = hi;
        hi = hi + hi / 16 + 1;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        run(w, conf, mid * RES, iters, 0, &r);
        if (r.st == SUBLET_OK)
            hi = mid;
        else
            lo = mid;
    }
    return hi * RES;
}

static void report(const workload *w, const char *conf, uint64_t cap, const run_result *r)
{
    print_message("%-9s %-25s %8.1f MiB  maps/iter:", w->name, conf, (double)cap / (double)MiB);
    for (int k = 0; k <= ITERS; k++)
        print_message(" %llu", (unsigned long long)r->maps[k]);
    print_message("  unmaps/iter:");
    for (int k = 0; k <= ITERS; k++)
        print_message(" %llu", (unsigned long long)r->unmaps[k]);
    uint64_t aliases = 0;
    for (int k = 0; k <= ITERS; k++)
        aliases += r->aliases[k];
    if (aliases) {
        print_message("  of the maps, aliases:");
        for (int k = 0; k <= ITERS; k++)
            print_message(" %llu", (unsigned long long)r->aliases[k]);
    }
    print_message("\n");
}

/* Maps (and unmaps, reserves) in iterations 3..N are at most `bound` each. */
static void assert_steady(const run_result *r, uint64_t bound)
{
    assert_int_equal(r->st, SUBLET_OK);
    for (int k = 3; k <= ITERS; k++) {
        if (r->maps[k] > bound || r->unmaps[k] > bound || r->reserves[k] > 0 ||
            r->segment_allocs[k] > 0)
            fail_msg("iteration %d: %llu maps, %llu unmaps, %llu reserves (bound %llu)", k,
                     (unsigned long long)r->maps[k], (unsigned long long)r->unmaps[k],
                     (unsigned long long)r->reserves[k], (unsigned long long)bound);
    }
}

static const char *const CONFS[] = {"policy:stitch", "expandable_segments:True"};

static void steady_at_80g(workload *w)
{
    for (size_t c = 0; c < 2; c++) {
        run_result r;
        run(w, CONFS[c], 80 * GiB, ITERS, 1, &r);
        report(w, CONFS[c], 80 * GiB, &r);
        assert_steady(&r, 0);
    }
}

/* Near the minimum the OOM path runs: pages a phase of the iteration needs
 * in one run are taken from free blocks elsewhere (unmapped) and mapped
 * where the request is.  When two phases need the same pages in different
 * runs, some pages move every iteration: `bound` maps and unmaps per
 * iteration are allowed for that at the policy's own minimum.  On
 * expandable_segments:True's minimum (larger) stitch must be at zero. */
static void steady_at_min(workload *w, uint64_t bound)
{
    uint64_t caps[2];
    for (size_t c = 0; c < 2; c++) {
        caps[c] = min_capacity(w, CONFS[c], ITERS);
        run_result r;
        run(w, CONFS[c], caps[c], ITERS, 1, &r);
        report(w, CONFS[c], caps[c], &r);
        print_message("%-9s %-25s min capacity %.1f MiB, peak live %.1f MiB (+%.2f %%)\n",
                      w->name, CONFS[c], (double)caps[c] / (double)MiB,
                      (double)w->peak_live / (double)MiB,
                      100.0 * ((double)caps[c] / (double)w->peak_live - 1.0));
        assert_steady(&r, bound);
    }
    /* policy:stitch never needs more than expandable segments here */
    assert_true(caps[0] <= caps[1]);
    run_result r;
    run(w, CONFS[0], caps[1], ITERS, 1, &r);
    report(w, CONFS[0], caps[1], &r);
    assert_steady(&r, 0);
}

static void test_attention_80g(void **state)
{
    (void)state;
    workload w;
    build_attention(&w);
    steady_at_80g(&w);
    w_fini(&w);
}

static void test_attention_min(void **state)
{
    (void)state;
    workload w;
    build_attention(&w);
    steady_at_min(&w, 0); /* measured: 0 from the third iteration on */
    w_fini(&w);
}

static void test_training_80g(void **state)
{
    (void)state;
    workload w;
    build_training(&w);
    steady_at_80g(&w);
    w_fini(&w);
}

static void test_training_min(void **state)
{
    (void)state;
    workload w;
    build_training(&w);
    /* measured at stitch's minimum (+0.73 %): one 8 MiB map and one unmap
     * per iteration (the 250 MiB logits' run moves by 4 pages) */
    steady_at_min(&w, 2);
    w_fini(&w);
}

/* Stitched mappings are kept like any other: at policy:stitch's minimum the
 * activations are stitched from the holes' pages in the first iteration,
 * and no later iteration maps anything.  (expandable_segments:True, whose
 * 20 MiB pages cannot use the holes at all, needs a much larger device and
 * at its minimum maps and unmaps every iteration: reported, not asserted.) */
static void test_holes_min(void **state)
{
    (void)state;
    workload w;
    build_holes(&w);
    uint64_t caps[2];
    run_result r;
    for (size_t c = 0; c < 2; c++) {
        caps[c] = min_capacity(&w, CONFS[c], ITERS);
        run(&w, CONFS[c], caps[c], ITERS, 1, &r);
        report(&w, CONFS[c], caps[c], &r);
        print_message("%-9s %-25s min capacity %.1f MiB, peak live %.1f MiB (+%.2f %%)\n",
                      w.name, CONFS[c], (double)caps[c] / (double)MiB,
                      (double)w.peak_live / (double)MiB,
                      100.0 * ((double)caps[c] / (double)w.peak_live - 1.0));
        if (c == 0) {
            assert_steady(&r, 0);
            uint64_t aliases = 0;
            for (int k = 0; k <= ITERS; k++)
                aliases += r.aliases[k];
            assert_true(aliases > 0);
            for (int k = 2; k <= ITERS; k++)
                assert_int_equal(r.maps[k], 0);
        }
    }
    assert_true(caps[0] <= caps[1]);
    run(&w, CONFS[0], caps[1], ITERS, 1, &r);
    report(&w, CONFS[0], caps[1], &r);
    assert_steady(&r, 0);
    w_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_80g),
        cmocka_unit_test(test_attention_min),
        cmocka_unit_test(test_training_80g),
        cmocka_unit_test(test_training_min),
        cmocka_unit_test(test_holes_min),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
