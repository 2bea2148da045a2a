/* sublet — the OOMs of a replayed trace: why each one happened, and which
 * settings would have avoided it.
 *
 * The trace is replayed once under the given settings to list its OOMs; the
 * first few are replayed again, stopped right after the failed alloc, to
 * diagnose the state they left (sublet_oom_diagnose: fragmentation or
 * exhaustion, the pinning segments with their live blocks and stacks).  Then
 * the trace is replayed under each candidate setting on the same simulated
 * device, and every OOM is marked avoided or not. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/frag_internal.h"
#include "sublet/frag.h"

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

/* ---- the base replay: every OOM ------------------------------------------------------ */

typedef struct base_ctx {
    sublet_frag_diagnosis *d;
    size_t max_listed, cap;
    int nomem;
} base_ctx;

static void base_oom(void *user, uint64_t event, uint64_t line, uint64_t size, sublet_stream stream,
                     const char *message)
{
    base_ctx *c = user;
    sublet_frag_diagnosis *d = c->d;
    d->ooms++;
    if (d->noom >= c->max_listed)
        return;
    if (d->noom == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 8;
        sublet_frag_oom *n = realloc(d->oom, nc * sizeof *n);
        if (!n) {
            c->nomem = 1;
            return;
        }
        d->oom = n;
        c->cap = nc;
    }
    sublet_frag_oom *o = &d->oom[d->noom++];
    memset(o, 0, sizeof *o);
    o->event = event;
    o->line = line;
    o->size = size;
    o->stream = stream;
    o->message = dup_str(message);
    o->fragmentation = strstr(message, "sublet: fragmentation") != NULL;
    if (!o->message)
        c->nomem = 1;
}

/* ---- one OOM, diagnosed at the state it left ----------------------------------------- */

typedef struct one_ctx {
    const sublet_frag_oom *oom;
    char *text;
    uint64_t pool[2];
} one_ctx;

static void one_finish(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)st;
    one_ctx *c = user;
    if (!a || last != c->oom->event)
        return;
    sublet_frag_request_pool(a, c->oom->size, c->oom->stream, c->pool);
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
    one_ctx c = {oom, NULL, {0, 0}};
    ro.on_finish = one_finish;
    ro.finish_user = &c;
    sublet_replay_result r;
    char err[256];
    (void)run_from_start(t, &ro, &r, err, sizeof err);
    sublet_replay_result_free(&r);
    oom->diagnosis = c.text;
    oom->pool_id[0] = c.pool[0];
    oom->pool_id[1] = c.pool[1];
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

    base_ctx bc = {d, max_listed, 0, 0};
    sublet_replay_options ro = base;
    ro.on_oom = base_oom;
    ro.oom_user = &bc;
    sublet_replay_result r;
    sublet_status st = run_from_start(t, &ro, &r, err, err_cap);
    d->peak_reserved_bytes = r.peak_reserved_bytes;
    sublet_replay_result_free(&r);
    if (st == SUBLET_OK && bc.nomem)
        st = SUBLET_ERR_NO_MEMORY;
    if (st != SUBLET_OK)
        return st;
    if (!d->ooms)
        return SUBLET_OK;
    for (size_t i = 0; i < d->noom && i < max_detailed; i++)
        diagnose_one(t, &base, &d->oom[i]);

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
    for (size_t i = 0; i < d->ncandidates; i++)
        free(d->candidates[i].oom_events);
    free(d->candidates);
    memset(d, 0, sizeof *d);
}

/* ---- text ---------------------------------------------------------------------------- */

static void indented(sl_fb *b, const char *text, int indent)
{
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        sl_fb_printf(b, "%*s%.*s\n", indent, "", (int)len, p);
        p += len + (e ? 1 : 0);
    }
}

size_t sublet_frag_diagnosis_format(const sublet_frag_diagnosis *d, char *buf, size_t cap)
{
    sl_fb b;
    sl_fb_init(&b, buf, cap);
    if (!d)
        return 0;
    char t1[32], t2[32], pn[48];
    sl_fb_printf(&b,
                 "OOM diagnosis: %" PRIu64 " OOM%s replaying on a %s device (%" PRIu64
                 " bytes) under %s; peak reserved %s\n",
                 d->ooms, d->ooms == 1 ? "" : "s", sl_fb_size(d->device_memory, t1),
                 d->device_memory, d->conf[0] ? d->conf : "(PyTorch defaults)",
                 sl_fb_size(d->peak_reserved_bytes, t2));
    if (!d->ooms) {
        sl_fb_puts(&b, "No OOM: nothing to diagnose (a smaller device, --device-memory, shows "
                       "where this trace would fail).\n");
        return b.len;
    }
    for (size_t i = 0; i < d->noom; i++) {
        const sublet_frag_oom *o = &d->oom[i];
        sl_fb_printf(&b,
                     "\nOOM %zu of %" PRIu64 ": event %" PRIu64 " (line %" PRIu64
                     "): alloc of %s on stream %" PRIu64 "%s%s (%s)\n",
                     i + 1, d->ooms, o->event, o->line, sl_fb_size(o->size, t1), o->stream,
                     o->pool_id[0] || o->pool_id[1] ? " to the " : "",
                     o->pool_id[0] || o->pool_id[1]
                         ? sublet_frag_pool_name(o->pool_id, pn, sizeof pn)
                         : "",
                     o->fragmentation ? "fragmentation" : "exhaustion");
        if (o->diagnosis) {
            indented(&b, o->message, 2);
            indented(&b, o->diagnosis, 2);
        }
    }
    if (d->noom < d->ooms)
        sl_fb_printf(&b, "\n(%" PRIu64 " more OOMs not listed)\n", d->ooms - d->noom);
    const uint64_t first = d->noom ? d->oom[0].event : SUBLET_REPLAY_NONE;
    char ev[40];
    snprintf(ev, sizeof ev, "event %" PRIu64, first);
    sl_fb_printf(&b,
                 "\nSettings replayed on the same device (each added to the base settings; "
                 "the %s column: the first OOM avoided or not):\n",
                 ev);
    int wid = 24;
    for (size_t i = 0; i < d->ncandidates; i++)
        if ((int)strlen(d->candidates[i].setting) > wid)
            wid = (int)strlen(d->candidates[i].setting);
    sl_fb_printf(&b, "  %-*s %6s  %-10s %s\n", wid, "setting", "OOMs", ev, "peak reserved");
    sl_fb_printf(&b, "  %-*s %6" PRIu64 "  %-10s %s\n", wid, "(base)", d->ooms, "OOM",
                 sl_fb_size(d->peak_reserved_bytes, t1));
    size_t good = 0;
    const sublet_frag_candidate *best = NULL;
    for (size_t i = 0; i < d->ncandidates; i++) {
        const sublet_frag_candidate *c = &d->candidates[i];
        if (c->status != SUBLET_OK) {
            sl_fb_printf(&b, "  %-*s %6s  not replayed: %s\n", wid, c->setting, "-", c->error);
            continue;
        }
        int avoids = sublet_frag_candidate_avoids(c, first);
        sl_fb_printf(&b, "  %-*s %6" PRIu64 "  %-10s %s\n", wid, c->setting, c->ooms,
                     avoids ? "avoided" : "OOM", sl_fb_size(c->peak_reserved_bytes, t1));
        if (c->ooms == 0) {
            good++;
            if (!best || c->peak_reserved_bytes < best->peak_reserved_bytes)
                best = c;
        }
    }
    if (best) {
        sl_fb_printf(&b,
                     "Verdict: %zu setting%s avoid every OOM; the lowest peak reserved is "
                     "%s with %s.\n",
                     good, good == 1 ? "" : "s", sl_fb_size(best->peak_reserved_bytes, t1),
                     best->setting);
    } else {
        size_t some = 0;
        for (size_t i = 0; i < d->ncandidates; i++)
            some += d->candidates[i].status == SUBLET_OK && d->candidates[i].ooms < d->ooms;
        if (some)
            sl_fb_printf(&b, "Verdict: no setting avoids every OOM; %zu reduce their number.\n",
                         some);
        else
            sl_fb_puts(&b, "Verdict: no setting avoids these OOMs: the device is too small for "
                           "the live tensors.\n");
    }
    return b.len;
}
