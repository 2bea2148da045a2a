/* sublet — the tuner's cost model (what device calls cost), its search space
 * (the settings sublet_tune enumerates, simplest first), and its options and
 * results (sublet/tune.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/errmsg.h"
#include "tune/tune_internal.h"

/* ---- the cost model ------------------------------------------------------------ */

void sublet_tune_cost_model_default(sublet_tune_cost_model *m)
{
    if (!m)
        return;
    m->malloc_us = 35.0;
    m->malloc_us_per_gib = 64.0;
    m->free_us = 35.0;
    m->retry_us = 1000.0;
    m->reserve_us = 10.0;
    m->release_us = 10.0;
    m->map_us = 35.0;
    m->unmap_us = 35.0;
}

static const struct {
    const char *name;
    size_t off;
} cost_keys[] = {
    {"malloc_us", offsetof(sublet_tune_cost_model, malloc_us)},
    {"malloc_us_per_gib", offsetof(sublet_tune_cost_model, malloc_us_per_gib)},
    {"free_us", offsetof(sublet_tune_cost_model, free_us)},
    {"retry_us", offsetof(sublet_tune_cost_model, retry_us)},
    {"reserve_us", offsetof(sublet_tune_cost_model, reserve_us)},
    {"release_us", offsetof(sublet_tune_cost_model, release_us)},
    {"map_us", offsetof(sublet_tune_cost_model, map_us)},
    {"unmap_us", offsetof(sublet_tune_cost_model, unmap_us)},
};

sublet_status sublet_tune_cost_model_parse(sublet_tune_cost_model *m, const char *text, char *err,
                                           size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!m || !text)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_tune_cost_model work = *m;
    const char *p = text;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',' || *p == ';'))
            p++;
        if (*p == '#') {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        if (!*p)
            break;
        const char *k = p;
        while (*p && *p != '=' && *p != ',' && *p != '#' && !isspace((unsigned char)*p))
            p++;
        size_t klen = (size_t)(p - k);
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != '=')
            return sl_fail(err, err_cap, SUBLET_ERR_PARSE, "cost model: expected key=value at '%.*s'",
                           (int)klen, k);
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t i;
        for (i = 0; i < sizeof cost_keys / sizeof cost_keys[0]; i++)
            if (strlen(cost_keys[i].name) == klen && memcmp(cost_keys[i].name, k, klen) == 0)
                break;
        if (i == sizeof cost_keys / sizeof cost_keys[0])
            return sl_fail(err, err_cap, SUBLET_ERR_PARSE,
                           "cost model: unknown key '%.*s' (keys: malloc_us, malloc_us_per_gib, "
                           "free_us, retry_us, reserve_us, release_us, map_us, unmap_us)",
                           (int)klen, k);
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || v < 0)
            return sl_fail(err, err_cap, SUBLET_ERR_PARSE,
                           "cost model: '%.*s' needs a non-negative number", (int)klen, k);
        if (*end && !isspace((unsigned char)*end) && *end != ',' && *end != ';' && *end != '#')
            return sl_fail(err, err_cap, SUBLET_ERR_PARSE,
                           "cost model: '%.*s': trailing characters after the number", (int)klen, k);
        *(double *)((char *)&work + cost_keys[i].off) = v;
        p = end;
    }
    *m = work;
    return SUBLET_OK;
}

uint64_t sublet_tune_calls_total(const sublet_tune_calls *c)
{
    return c->segment_allocs + c->segment_frees + c->va_reserves + c->va_releases + c->va_maps +
           c->va_unmaps;
}

double sublet_tune_calls_cost(const sublet_tune_calls *c, const sublet_tune_cost_model *m)
{
    return m->malloc_us * (double)c->segment_allocs +
           m->malloc_us_per_gib * ((double)c->malloc_bytes / (double)GIB) +
           m->free_us * (double)c->segment_frees + m->retry_us * (double)c->retries +
           m->reserve_us * (double)c->va_reserves + m->release_us * (double)c->va_releases +
           m->map_us * (double)c->map_pages + m->unmap_us * (double)c->unmap_pages;
}

/* ---- the search space ------------------------------------------------------------ */

const char *const tn_base_conf[NBASE] = {"", "expandable_segments:True", "policy:stitch"};
/* least intrusive first: ties go to the earlier value */
const unsigned tn_ms_mb[N_MS] = {0, 1024, 512, 256, 128, 64, 32};
const unsigned tn_nsr_mb[N_NSR] = {0, 64, 256, 1024};
const char *const tn_ru_conf[N_RU] = {"",  "16", "8", "4", "2", "[256:1,512:2,1024:4,>:8]",
                                      "[64:8,128:2,256:2,512:2,1024:1,>:1]"};
const char *const tn_gc_conf[N_GC] = {"", "0.95", "0.8", "0.6"};
static int knobs_complexity(const knobs *k)
{
    return (k->base != BASE_NATIVE) + (k->ms != 0) + (k->nsr != 0) + (k->ru != 0) + (k->gc != 0);
}

void tn_knobs_conf(const knobs *k, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
#define ADD(...)                                                                      \
    do {                                                                              \
        if (n < cap)                                                                  \
            n += (size_t)snprintf(out + n, cap - n, "%s", n ? "," : "");             \
        if (n < cap)                                                                  \
            n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__);                    \
    } while (0)
    if (k->base != BASE_NATIVE)
        ADD("%s", tn_base_conf[k->base]);
    if (k->ms)
        ADD("max_split_size_mb:%u", tn_ms_mb[k->ms]);
    if (k->nsr)
        ADD("max_non_split_rounding_mb:%u", tn_nsr_mb[k->nsr]);
    if (k->ru)
        ADD("roundup_power2_divisions:%s", tn_ru_conf[k->ru]);
    if (k->gc)
        ADD("garbage_collection_threshold:%s,per_process_memory_fraction:" GC_FRACTION,
            tn_gc_conf[k->gc]);
#undef ADD
}

static int cmp_knobs(const void *a, const void *b)
{
    const knobs *x = a, *y = b;
    int cx = knobs_complexity(x), cy = knobs_complexity(y);
    if (cx != cy)
        return cx < cy ? -1 : 1;
    if (x->base != y->base)
        return x->base < y->base ? -1 : 1;
    if (x->ms != y->ms)
        return x->ms < y->ms ? -1 : 1;
    if (x->nsr != y->nsr)
        return x->nsr < y->nsr ? -1 : 1;
    if (x->ru != y->ru)
        return x->ru < y->ru ? -1 : 1;
    return (x->gc > y->gc) - (x->gc < y->gc);
}

/* All settings of the space in enumeration order; returns the count. */
size_t tn_space_knobs(unsigned flags, knobs *out)
{
    size_t n = 0;
    for (unsigned b = 0; b < NBASE; b++) {
        if (b == BASE_STITCH && (flags & SUBLET_TUNE_PYTORCH_ONLY))
            continue;
        for (unsigned ms = 0; ms < N_MS; ms++)
            for (unsigned nsr = 0; nsr < N_NSR; nsr++) {
                if (!ms && nsr)
                    continue;
                for (unsigned ru = 0; ru < N_RU; ru++)
                    for (unsigned gc = 0; gc < N_GC; gc++) {
                        if (gc && b != BASE_NATIVE)
                            continue;
                        if (out)
                            out[n] = (knobs){(unsigned char)b, (unsigned char)ms,
                                             (unsigned char)nsr, (unsigned char)ru,
                                             (unsigned char)gc};
                        n++;
                    }
            }
    }
    if (out)
        qsort(out, n, sizeof *out, cmp_knobs);
    return n;
}

size_t sublet_tune_space(unsigned flags, char (*confs)[SUBLET_TUNE_CONF_MAX], size_t cap)
{
    size_t n = tn_space_knobs(flags, NULL);
    if (!confs || !cap)
        return n;
    knobs *k = malloc(n * sizeof *k);
    if (!k)
        return n;
    tn_space_knobs(flags, k);
    for (size_t i = 0; i < n && i < cap; i++)
        tn_knobs_conf(&k[i], confs[i], SUBLET_TUNE_CONF_MAX);
    free(k);
    return n;
}

/* ---- options, results ------------------------------------------------------------- */

void sublet_tune_options_init(sublet_tune_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    sublet_tune_cost_model_default(&o->cost);
    o->threads = 0; /* every online core (tn_threads) */
    o->resolution = DEFAULT_RESOLUTION;
    o->band = DEFAULT_BAND;
    o->diagnose = 1;
    o->warmup = 1;
}

void sublet_tune_eval_free(sublet_tune_eval *e)
{
    if (!e)
        return;
    free(e->per_trace);
    e->per_trace = NULL;
}

void sublet_tune_result_free(sublet_tune_result *r)
{
    if (!r)
        return;
    sublet_tune_eval_free(&r->current);
    sublet_tune_eval_free(&r->pytorch);
    sublet_tune_eval_free(&r->sublet);
    free(r->pareto_pytorch);
    free(r->pareto_sublet);
    r->pareto_pytorch = r->pareto_sublet = NULL;
    r->npareto_pytorch = r->npareto_sublet = 0;
}

double tn_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
