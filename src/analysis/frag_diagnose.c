/* sublet — the OOMs of a replayed trace: why each one happened, and which
 * settings would have avoided it.
 *
 * The trace is replayed once under the given settings to list its OOMs and
 * group the alike ones (the same kind, size, stream, pool and stack of the
 * request: a loop failing at the same place is one group); the first OOM of
 * the first few groups is replayed again, stopped right after the failed
 * alloc, to diagnose the state it left (sublet_oom_diagnose: fragmentation or
 * exhaustion, the pinning segments with their live blocks and stacks).  Then
 * the trace is replayed under each candidate setting on the same simulated
 * device, and every OOM is marked avoided or not.  Last, the device the trace
 * needs under the base settings and under each candidate (mincap.c's search,
 * the answer of `sublet mincap --conf CONF`), for the verdict. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/frag_internal.h"
#include "sublet/frag.h"
#include "sublet/trace_stream.h"

/* Every replay here starts the stream from its first row again. */
static sublet_status run_from_start(sublet_trace_stream *ts, const sublet_replay_options *o,
                                    sublet_replay_result *r, char *err, size_t cap)
{
    sublet_status st = sublet_trace_stream_rewind(ts, err, cap);
    if (st != SUBLET_OK) {
        memset(r, 0, sizeof *r);
        return st;
    }
    return sublet_replay_stream(ts, o, r, err, cap);
}

static const char *const default_candidates[] = {
    "max_split_size_mb:128",
    "max_split_size_mb:256",
    "max_split_size_mb:512",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "expandable_segments:True",
    "policy:stitch",
    "garbage_collection_threshold:0.6,per_process_memory_fraction:0.999",
    NULL,
};

const char *const *sublet_frag_default_candidates(void) { return default_candidates; }

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- the base replay: every OOM, and the groups of alike ones ------------------------- */

typedef struct base_ctx {
    sublet_frag_diagnosis *d;
    sublet_trace_stream *ts;
    size_t max_listed, cap, gcap;
    int nomem;
    /* the row being driven (before_event), for the OOM it may report */
    sublet_allocator *a;
    uint64_t index;
    uint32_t frames;
    uint64_t pool[2];
    /* every group, listed or not: its key and where it stands */
    sublet_frag_oom *keys; /* event, size, stream, kind, pool, frames of each group's first */
    size_t nkeys, kcap;
} base_ctx;

static void base_before(void *user, sublet_allocator *a, uint64_t index,
                        const sublet_trace_event *ev)
{
    base_ctx *c = user;
    c->a = a;
    c->index = index;
    c->frames = ev->frames;
    c->pool[0] = ev->pool_id[0];
    c->pool[1] = ev->pool_id[1];
}

static int grow(void **p, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int alike(const sublet_frag_oom *a, const sublet_frag_oom *b)
{
    return a->size == b->size && a->stream == b->stream && a->fragmentation == b->fragmentation &&
           a->pool_id[0] == b->pool_id[0] && a->pool_id[1] == b->pool_id[1] &&
           a->frames == b->frames;
}

/* The group of OOM `o` (a new one when none is alike), listed or not. */
static size_t group_of(base_ctx *c, const sublet_frag_oom *o)
{
    for (size_t g = 0; g < c->nkeys; g++)
        if (alike(&c->keys[g], o))
            return g;
    if (grow((void **)&c->keys, &c->kcap, c->nkeys, sizeof *c->keys) != 0)
        return SIZE_MAX;
    c->keys[c->nkeys] = *o;
    return c->nkeys++;
}

/* Stack `id` of the trace as text in *out (NULL: none, or no frame shown);
 * -1 when memory runs out. */
static int stack_of(sublet_trace_stream *ts, uint32_t id, char **out)
{
    const sublet_trace_frame *tf = NULL;
    size_t n = id ? sublet_trace_stream_stack(ts, id, &tf) : 0;
    *out = NULL;
    if (!n)
        return 0;
    sublet_frame *fr = malloc(n * sizeof *fr);
    if (!fr)
        return -1;
    for (size_t i = 0; i < n; i++)
        fr[i] = (sublet_frame){tf[i].filename, (int)tf[i].line, tf[i].name};
    char *text = sl_frag_stack_text(fr, n);
    free(fr);
    if (!text)
        return -1;
    if (!*text)
        free(text);
    else
        *out = text;
    return 0;
}

static void base_oom(void *user, uint64_t event, uint64_t line, uint64_t size, sublet_stream stream,
                     const char *message)
{
    base_ctx *c = user;
    sublet_frag_diagnosis *d = c->d;
    d->ooms++;
    sublet_frag_oom o;
    memset(&o, 0, sizeof o);
    o.event = event;
    o.line = line;
    o.size = size;
    o.stream = stream;
    o.fragmentation = strstr(message, "sublet: fragmentation") != NULL;
    if (c->a && c->index == event) {
        o.frames = c->frames;
        o.pool_id[0] = c->pool[0];
        o.pool_id[1] = c->pool[1];
        if (!o.pool_id[0] && !o.pool_id[1])
            sublet_frag_request_pool(c->a, size, stream, o.pool_id);
    }
    size_t g = group_of(c, &o);
    if (g == SIZE_MAX) {
        c->nomem = 1;
        return;
    }
    o.group = g < c->max_listed ? g : SIZE_MAX;
    if (g < c->max_listed && g == d->ngroups) { /* a new group listed */
        if (grow((void **)&d->groups, &c->gcap, d->ngroups, sizeof *d->groups) != 0) {
            c->nomem = 1;
            return;
        }
        sublet_frag_oom_group *gr = &d->groups[d->ngroups++];
        memset(gr, 0, sizeof *gr);
        gr->first = o;
        gr->first.message = dup_str(message);
        gr->number = d->ooms;
        if (!gr->first.message || stack_of(c->ts, o.frames, &gr->stack) != 0)
            c->nomem = 1;
    }
    if (g < c->max_listed) {
        sublet_frag_oom_group *gr = &d->groups[g];
        if ((gr->count & (gr->count - 1)) == 0) { /* 0, 1, 2, 4, ...: room for the next ones */
            uint64_t *n = realloc(gr->events, (gr->count ? 2 * gr->count : 1) * sizeof *n);
            if (!n) {
                c->nomem = 1;
                return;
            }
            gr->events = n;
        }
        gr->events[gr->count++] = event;
    }
    if (d->noom >= c->max_listed)
        return;
    if (grow((void **)&d->oom, &c->cap, d->noom, sizeof *d->oom) != 0) {
        c->nomem = 1;
        return;
    }
    o.message = dup_str(message);
    d->oom[d->noom++] = o;
    if (!o.message)
        c->nomem = 1;
}

/* ---- one OOM, diagnosed at the state it left ----------------------------------------- */

typedef struct one_ctx {
    const sublet_frag_oom *oom;
    char *text;
} one_ctx;

static void one_finish(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)st;
    one_ctx *c = user;
    if (!a || last != c->oom->event)
        return;
    size_t n = sublet_oom_diagnose(a, c->oom->size, c->oom->stream, NULL, 0);
    c->text = malloc(n + 1);
    if (c->text)
        sublet_oom_diagnose(a, c->oom->size, c->oom->stream, c->text, n + 1);
}

static void diagnose_one(sublet_trace_stream *t, const sublet_replay_options *o,
                         sublet_frag_oom *oom)
{
    sublet_replay_options ro = *o;
    ro.stop_after = oom->event;
    ro.record = SUBLET_RECORD_STATE;
    ro.record_context =
        sublet_trace_stream_stack_count(t) ? SUBLET_CONTEXT_STATE : SUBLET_CONTEXT_NONE;
    ro.record_max_entries = 0;
    one_ctx c = {oom, NULL};
    ro.on_finish = one_finish;
    ro.finish_user = &c;
    sublet_replay_result r;
    char err[256];
    (void)run_from_start(t, &ro, &r, err, sizeof err);
    sublet_replay_result_free(&r);
    oom->diagnosis = c.text;
    if (c.text)
        oom->fragmentation = strncmp(c.text, "sublet diagnosis: fragmentation", 31) == 0;
}

/* ---- candidates ----------------------------------------------------------------------- */

typedef struct cand_ctx {
    sublet_frag_candidate *c;
    size_t cap;
} cand_ctx;

static void cand_oom(void *user, uint64_t event, uint64_t line, uint64_t size, sublet_stream stream,
                     const char *message)
{
    (void)line;
    (void)size;
    (void)stream;
    (void)message;
    cand_ctx *x = user;
    sublet_frag_candidate *c = x->c;
    c->ooms++;
    if (c->noom_events == x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 16;
        uint64_t *n = realloc(c->oom_events, nc * sizeof *n);
        if (!n)
            return;
        c->oom_events = n;
        x->cap = nc;
    }
    c->oom_events[c->noom_events++] = event;
}

static void run_candidate(sublet_trace_stream *t, const sublet_replay_options *o, const char *base,
                          sublet_frag_candidate *c)
{
    c->first_oom_event = SUBLET_REPLAY_NONE;
    size_t nb = base ? strlen(base) : 0, ns = strlen(c->setting);
    if (nb + 1 + ns >= sizeof c->conf) {
        c->status = SUBLET_ERR_CONFIG;
        snprintf(c->error, sizeof c->error, "settings string too long");
        return;
    }
    size_t at = 0;
    if (nb) {
        memcpy(c->conf, base, nb);
        c->conf[nb] = ',';
        at = nb + 1;
    }
    memcpy(c->conf + at, c->setting, ns + 1);
    sublet_settings probe;
    sublet_settings_default(&probe);
    c->status = sublet_settings_parse(&probe, c->conf, c->error, sizeof c->error);
    if (c->status != SUBLET_OK)
        return;
    sublet_replay_options ro = *o;
    ro.conf = c->conf;
    ro.stop_after = SUBLET_REPLAY_ALL;
    ro.stop_on_oom = 0;
    ro.record = SUBLET_RECORD_OFF;
    ro.on_finish = NULL;
    cand_ctx x = {c, 0};
    ro.on_oom = cand_oom;
    ro.oom_user = &x;
    sublet_replay_result r;
    c->status = run_from_start(t, &ro, &r, c->error, sizeof c->error);
    c->peak_reserved_bytes = r.peak_reserved_bytes;
    c->first_oom_event = r.first_oom_event;
    sublet_replay_result_free(&r);
}

/* The smallest device that runs the trace under `conf` (0: the search failed). */
static uint64_t min_capacity(sublet_trace_stream *t, const sublet_replay_options *o,
                             const char *conf)
{
    sublet_replay_options mo = *o; /* the search calls no observer */
    mo.conf = conf;
    sublet_mincap_result m;
    char err[256];
    uint64_t bytes = 0;
    if (sublet_replay_min_capacity_stream(t, &mo, 0, &m, err, sizeof err) == SUBLET_OK)
        bytes = m.min_capacity_bytes;
    sublet_mincap_result_free(&m);
    return bytes;
}

/* The device needed under the base settings and under each candidate replayed;
 * the best candidate needs the least (the first listed of equals). */
static void min_capacities(sublet_trace_stream *t, const sublet_replay_options *o,
                           sublet_frag_diagnosis *d)
{
    d->min_capacity_bytes = min_capacity(t, o, d->conf);
    for (size_t i = 0; i < d->ncandidates; i++) {
        sublet_frag_candidate *c = &d->candidates[i];
        if (c->status != SUBLET_OK)
            continue;
        c->min_capacity_bytes = min_capacity(t, o, c->conf);
        if (c->min_capacity_bytes &&
            (d->best_capacity == SIZE_MAX ||
             c->min_capacity_bytes < d->candidates[d->best_capacity].min_capacity_bytes))
            d->best_capacity = i;
    }
}

int sublet_frag_candidate_avoids(const sublet_frag_candidate *c, uint64_t event)
{
    if (!c || c->status != SUBLET_OK)
        return 0;
    if (c->noom_events < c->ooms) /* the list is incomplete: only a clean run counts */
        return c->ooms == 0;
    for (size_t i = 0; i < c->noom_events; i++)
        if (c->oom_events[i] == event)
            return 0;
    return 1;
}

sublet_status sublet_frag_diagnose_trace(const sublet_trace *t, const sublet_replay_options *o,
                                         const sublet_frag_diagnose_options *dopt,
                                         sublet_frag_diagnosis *d, char *err, size_t err_cap)
{
    if (!t || !d)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_trace_stream *ts = NULL;
    if (sublet_trace_stream_from_trace(t, &ts) != SUBLET_OK) {
        memset(d, 0, sizeof *d);
        return SUBLET_ERR_NO_MEMORY;
    }
    sublet_status st = sublet_frag_diagnose_stream(ts, o, dopt, d, err, err_cap);
    sublet_trace_stream_close(ts);
    return st;
}

sublet_status sublet_frag_diagnose_stream(sublet_trace_stream *t, const sublet_replay_options *o,
                                          const sublet_frag_diagnose_options *dopt,
                                          sublet_frag_diagnosis *d, char *err, size_t err_cap)
{
    if (!t || !d)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(d, 0, sizeof *d);
    sublet_replay_options base;
    if (o)
        base = *o;
    else
        sublet_replay_options_init(&base);
    base.stop_after = SUBLET_REPLAY_ALL;
    base.stop_on_oom = 0;
    base.on_finish = NULL;
    base.on_oom = NULL;
    base.record = SUBLET_RECORD_OFF;
    base.capture_summary = 0;
    base.check = 0;
    size_t max_detailed = dopt && dopt->max_detailed ? dopt->max_detailed : 3;
    size_t max_listed = dopt && dopt->max_listed ? dopt->max_listed : 32;
    const char *const *cands = dopt && dopt->candidates ? dopt->candidates : default_candidates;
    snprintf(d->conf, sizeof d->conf, "%s", base.conf ? base.conf : "");
    d->device_memory =
        base.device_memory ? base.device_memory : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;

    d->best_capacity = SIZE_MAX;

    base_ctx bc;
    memset(&bc, 0, sizeof bc);
    bc.d = d;
    bc.ts = t;
    bc.max_listed = max_listed;
    sublet_replay_options ro = base;
    ro.on_oom = base_oom;
    ro.oom_user = &bc;
    ro.before_event = base_before;
    ro.observer_user = &bc;
    sublet_replay_result r;
    sublet_status st = run_from_start(t, &ro, &r, err, err_cap);
    d->peak_reserved_bytes = r.peak_reserved_bytes;
    d->groups_all = bc.nkeys;
    free(bc.keys);
    sublet_replay_result_free(&r);
    if (st == SUBLET_OK && bc.nomem)
        st = SUBLET_ERR_NO_MEMORY;
    if (st != SUBLET_OK)
        return st;
    if (!d->ooms)
        return SUBLET_OK;
    for (size_t i = 0; i < d->ngroups && i < max_detailed; i++) {
        sublet_frag_oom *first = &d->groups[i].first;
        diagnose_one(t, &base, first);
        for (size_t k = 0; k < d->noom; k++) { /* the same OOM in the list */
            sublet_frag_oom *same = &d->oom[k];
            if (same->event != first->event || !first->diagnosis)
                continue;
            if (!(same->diagnosis = dup_str(first->diagnosis)))
                return SUBLET_ERR_NO_MEMORY;
            same->fragmentation = first->fragmentation;
        }
    }

    size_t n = 0;
    while (cands[n])
        n++;
    d->candidates = calloc(n ? n : 1, sizeof *d->candidates);
    if (!d->candidates)
        return SUBLET_ERR_NO_MEMORY;
    d->ncandidates = n;
    for (size_t i = 0; i < n; i++) {
        d->candidates[i].setting = cands[i];
        run_candidate(t, &base, d->conf, &d->candidates[i]);
    }
    if (!(dopt && dopt->no_min_capacity))
        min_capacities(t, &base, d);
    return SUBLET_OK;
}

void sublet_frag_diagnosis_free(sublet_frag_diagnosis *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->noom; i++) {
        free(d->oom[i].message);
        free(d->oom[i].diagnosis);
    }
    free(d->oom);
    for (size_t i = 0; i < d->ngroups; i++) {
        free(d->groups[i].first.message);
        free(d->groups[i].first.diagnosis);
        free(d->groups[i].stack);
        free(d->groups[i].events);
    }
    free(d->groups);
    for (size_t i = 0; i < d->ncandidates; i++)
        free(d->candidates[i].oom_events);
    free(d->candidates);
    memset(d, 0, sizeof *d);
}

/* ---- text ---------------------------------------------------------------------------- */

/* The first max lines of text, each indented. */
static void indented_n(sl_text *b, const char *text, int indent, size_t max)
{
    const char *p = text;
    for (size_t n = 0; *p && n < max; n++) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        sl_text_printf(b, "%*s%.*s\n", indent, "", (int)len, p);
        p += len + (e ? 1 : 0);
    }
}

static void indented(sl_text *b, const char *text, int indent)
{
    indented_n(b, text, indent, SIZE_MAX);
}

/* "OOM k of N: event E (line L): alloc of S on stream T to the POOL (KIND)" */
static void oom_head(sl_text *b, const sublet_frag_oom *o, uint64_t number, uint64_t ooms)
{
    char t1[32], pn[48];
    int priv = o->pool_id[0] || o->pool_id[1];
    sl_text_printf(b,
                   "\nOOM %" PRIu64 " of %" PRIu64 ": event %" PRIu64 " (line %" PRIu64
                   "): alloc of %s on stream %" PRIu64 "%s%s (%s)\n",
                   number, ooms, o->event, o->line, sl_fb_size(o->size, t1), o->stream,
                   priv ? " to the " : "",
                   priv ? sublet_frag_pool_name(o->pool_id, pn, sizeof pn) : "",
                   o->fragmentation ? "fragmentation" : "exhaustion");
}

#define LIKE_EVENTS_SHOWN 12

static void group_text(sl_text *b, const sublet_frag_oom_group *g, uint64_t ooms)
{
    const sublet_frag_oom *o = &g->first;
    oom_head(b, o, g->number, ooms);
    if (g->stack) { /* its 4 innermost frames (the JSON has them all) */
        sl_text_puts(b, "  requested at:\n");
        indented_n(b, g->stack, 4, 4);
    }
    if (o->diagnosis) {
        indented(b, o->message, 2);
        indented(b, o->diagnosis, 2);
    }
    if (g->count < 2)
        return;
    sl_text_printf(b,
                   "  and %" PRIu64 " more like it (the same kind, size, stream, pool%s)"
                   " at event%s ",
                   g->count - 1, g->stack ? " and stack" : "", g->count == 2 ? "" : "s");
    for (uint64_t i = 1; i < g->count && i <= LIKE_EVENTS_SHOWN; i++)
        sl_text_printf(b, "%s%" PRIu64, i > 1 ? ", " : "", g->events[i]);
    if (g->count - 1 > LIKE_EVENTS_SHOWN)
        sl_text_printf(b, ", ... (the last %" PRIu64 ")", g->events[g->count - 1]);
    sl_text_puts(b, "\n");
}

/* The device needed: under the base settings, and under the best candidate. */
static void capacity_text(sl_text *b, const sublet_frag_diagnosis *d)
{
    char t1[32], t2[32], t3[32];
    if (!d->min_capacity_bytes)
        return;
    sl_text_printf(b,
                   "Device needed (as `sublet mincap` finds it): %s (%" PRIu64
                   " bytes) under the base settings, %s this %s device",
                   sl_fb_size(d->min_capacity_bytes, t1), d->min_capacity_bytes,
                   d->min_capacity_bytes > d->device_memory ? "more than" : "no more than",
                   sl_fb_size(d->device_memory, t2));
    const sublet_frag_candidate *c =
        d->best_capacity < d->ncandidates ? &d->candidates[d->best_capacity] : NULL;
    if (!c) {
        sl_text_puts(b, ".\n");
        return;
    }
    if (c->min_capacity_bytes >= d->min_capacity_bytes) {
        sl_text_printf(b, "; no setting tried needs less (the least: %s with %s).\n",
                       sl_fb_size(c->min_capacity_bytes, t1), c->setting);
        return;
    }
    uint64_t saved = d->min_capacity_bytes - c->min_capacity_bytes;
    sl_text_printf(b,
                   "; %s (%" PRIu64 " bytes) with %s, the best setting tried: %s (%.1f %%) "
                   "less.\n",
                   sl_fb_size(c->min_capacity_bytes, t1), c->min_capacity_bytes, c->setting,
                   sl_fb_size(saved, t3), 100.0 * (double)saved / (double)d->min_capacity_bytes);
}

size_t sublet_frag_diagnosis_format(const sublet_frag_diagnosis *d, char *buf, size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (!d)
        return 0;
    char t1[32], t2[32];
    sl_text_printf(&b,
                   "OOM diagnosis: %" PRIu64 " OOM%s replaying on a %s device (%" PRIu64
                   " bytes) under %s; peak reserved %s\n",
                   d->ooms, d->ooms == 1 ? "" : "s", sl_fb_size(d->device_memory, t1),
                   d->device_memory, d->conf[0] ? d->conf : "(PyTorch defaults)",
                   sl_fb_size(d->peak_reserved_bytes, t2));
    if (!d->ooms) {
        sl_text_puts(&b, "No OOM: nothing to diagnose (a smaller device, --device-memory, shows "
                     "where this trace would fail).\n");
        return b.len;
    }
    if (d->groups_all < d->ooms)
        sl_text_printf(&b,
                       "%" PRIu64 " kind%s of OOM (alike: the same kind, size, stream, pool and "
                       "stack), each shown once by its first OOM:\n",
                       d->groups_all, d->groups_all == 1 ? "" : "s");
    for (size_t i = 0; i < d->ngroups; i++)
        group_text(&b, &d->groups[i], d->ooms);
    if (d->ngroups < d->groups_all) {
        uint64_t listed = 0;
        for (size_t i = 0; i < d->ngroups; i++)
            listed += d->groups[i].count;
        uint64_t kinds = d->groups_all - d->ngroups, rest = d->ooms - listed;
        sl_text_printf(&b, "\n(%" PRIu64 " more kind%s of OOM, %" PRIu64 " OOM%s, not listed)\n",
                       kinds, kinds == 1 ? "" : "s", rest, rest == 1 ? "" : "s");
    }
    const uint64_t first = d->ngroups ? d->groups[0].first.event : SUBLET_REPLAY_NONE;
    char ev[40];
    snprintf(ev, sizeof ev, "event %" PRIu64, first);
    sl_text_printf(&b,
                   "\nSettings replayed on the same device (each added to the base settings; "
                   "the %s column: the first OOM avoided or not; device needed: as `sublet "
                   "mincap` finds it):\n",
                   ev);
    int wid = 24;
    for (size_t i = 0; i < d->ncandidates; i++)
        if ((int)strlen(d->candidates[i].setting) > wid)
            wid = (int)strlen(d->candidates[i].setting);
    sl_text_printf(&b, "  %-*s %6s  %-10s %13s  %s\n", wid, "setting", "OOMs", ev, "peak reserved",
                   "device needed");
    sl_text_printf(&b, "  %-*s %6" PRIu64 "  %-10s %13s  %s\n", wid, "(base)", d->ooms, "OOM",
                   sl_fb_size(d->peak_reserved_bytes, t1),
                   d->min_capacity_bytes ? sl_fb_size(d->min_capacity_bytes, t2) : "-");
    size_t good = 0;
    const sublet_frag_candidate *best = NULL;
    for (size_t i = 0; i < d->ncandidates; i++) {
        const sublet_frag_candidate *c = &d->candidates[i];
        if (c->status != SUBLET_OK) {
            sl_text_printf(&b, "  %-*s %6s  not replayed: %s\n", wid, c->setting, "-", c->error);
            continue;
        }
        int avoids = sublet_frag_candidate_avoids(c, first);
        sl_text_printf(&b, "  %-*s %6" PRIu64 "  %-10s %13s  %s\n", wid, c->setting, c->ooms,
                       avoids ? "avoided" : "OOM", sl_fb_size(c->peak_reserved_bytes, t1),
                       c->min_capacity_bytes ? sl_fb_size(c->min_capacity_bytes, t2) : "-");
        if (c->ooms == 0) {
            good++;
            if (!best || c->peak_reserved_bytes < best->peak_reserved_bytes)
                best = c;
        }
    }
    if (best) {
        sl_text_printf(&b,
                       "Verdict: %zu setting%s avoid every OOM; the lowest peak reserved is "
                       "%s with %s.\n",
                       good, good == 1 ? "" : "s", sl_fb_size(best->peak_reserved_bytes, t1),
                       best->setting);
    } else {
        size_t some = 0;
        for (size_t i = 0; i < d->ncandidates; i++)
            some += d->candidates[i].status == SUBLET_OK && d->candidates[i].ooms < d->ooms;
        if (some)
            sl_text_printf(&b, "Verdict: no setting avoids every OOM; %zu reduce their number.\n",
                           some);
        else
            sl_text_puts(&b, "Verdict: no setting avoids these OOMs: the device is too small for "
                         "the live tensors.\n");
    }
    capacity_text(&b, d);
    return b.len;
}
