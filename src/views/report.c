/* sublet views — the page of `sublet report`: one self-contained HTML page
 * (no network, no server, no third-party code) that shows a trace's memory
 * and fragmentation over time, the segment map at the peak, at each OOM and
 * at the end with the block under the pointer named (size, stream, stack),
 * the request sizes, the pinning segments and, when the replay OOMs, the
 * diagnosis with the settings that avoid it.
 *
 * Everything is measured at every event (sublet_frag_series_run); what is
 * drawn is decimated to at most --buckets buckets (2000) per series, each
 * bucket keeping its min and max, so a 10^6-event trace gives a page of a
 * few hundred KiB that draws in well under a second.  The page draws on
 * <canvas> with the hand-written script src/views/report/page.js (its style:
 * src/views/report/page.css; both compiled in by cmake/embed.cmake and written
 * inline, so the page stays one file); the data travels as one JSON
 * object in a <script type="application/json"> element.  When it has drawn
 * every chart the script sets data-rendered (the count, against
 * data-charts) and data-render-ms (performance.now()) on <body>, and
 * data-errors when anything failed: tests/cli_report.sh reads them from
 * headless Chromium. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "report_assets.h"
#include "sublet/frag.h"
#include "views/report_tune.h"
#include "views/views_internal.h"

/* ---- stacks shared by every map, deduplicated ------------------------------------------- */

typedef struct stack_table {
    char **text;     /* borrowed from the states */
    size_t n, cap;
    uint32_t *slots; /* open addressing: index + 1, 0 = empty */
    size_t nslots;
} stack_table;

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The 1-based id of `s` in the table (added when new); 0 on out of memory. */
static uint32_t stack_id(stack_table *t, char *s)
{
    if ((t->n + 1) * 2 > t->nslots) {
        size_t ns = t->nslots ? t->nslots * 2 : 256;
        uint32_t *sl = calloc(ns, sizeof *sl);
        if (!sl)
            return 0;
        for (size_t i = 0; i < t->n; i++) {
            size_t h = (size_t)fnv(t->text[i]) & (ns - 1);
            while (sl[h])
                h = (h + 1) & (ns - 1);
            sl[h] = (uint32_t)i + 1;
        }
        free(t->slots);
        t->slots = sl;
        t->nslots = ns;
    }
    size_t h = (size_t)fnv(s) & (t->nslots - 1);
    while (t->slots[h]) {
        if (strcmp(t->text[t->slots[h] - 1], s) == 0)
            return t->slots[h];
        h = (h + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 64;
        char **nt = realloc(t->text, nc * sizeof *nt);
        if (!nt)
            return 0;
        t->text = nt;
        t->cap = nc;
    }
    t->text[t->n++] = s;
    t->slots[h] = (uint32_t)t->n;
    return (uint32_t)t->n;
}

/* ---- the data ----------------------------------------------------------------------------- */

typedef struct rmap {
    char title[96];
    uint64_t event;
    sublet_frag_state *st;
} rmap;

static void map_json(sl_text *b, const rmap *m, stack_table *stacks)
{
    const sublet_frag_state *st = m->st;
    /* with private pools, each segment carries the index of its pool in
     * "pools" (the default pools first); without one the map is as before */
    size_t np = 0;
    sublet_frag_pool *pools = NULL;
    if (sublet_frag_has_private_pools(st)) {
        np = sublet_frag_pools(st, NULL, 0);
        pools = malloc(np * sizeof *pools);
        np = pools ? sublet_frag_pools(st, pools, np) : 0;
    }
    sl_text_puts(b, "{\"title\":");
    sl_tb_json(b, m->title);
    sl_text_printf(b, ",\"event\":%" PRIu64 ",\"segs\":[", m->event);
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        unsigned flags = (s->is_small ? 1u : 0u) | (s->is_expandable ? 2u : 0u) |
                         (s->live_blocks && s->free_size ? 4u : 0u);
        sl_text_printf(b, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u,%zu,%zu,%zu,%" PRIu64 ",%" PRIu64,
                  i ? "," : "", s->addr, s->size, s->stream, flags, s->first_block, s->nblocks,
                  s->live_blocks, s->free_size, s->active_size);
        size_t pi = 0;
        while (pi < np && (pools[pi].pool_id[0] != s->pool_id[0] ||
                           pools[pi].pool_id[1] != s->pool_id[1]))
            pi++;
        if (np)
            sl_text_printf(b, ",%zu", pi);
        sl_text_puts(b, "]");
    }
    sl_text_puts(b, "],\"blocks\":[");
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *fb = &st->blocks[s->first_block + k];
            uint32_t id = fb->stack && fb->stack <= st->nstacks
                              ? stack_id(stacks, st->stacks[fb->stack - 1])
                              : 0;
            sl_text_printf(b, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d,%u]",
                      s->first_block + k ? "," : "", fb->addr - s->addr, fb->size,
                      fb->requested_size, (int)fb->state, id);
        }
    }
    sl_text_puts(b, "],\"pins\":[");
    size_t top[10];
    size_t npin = sublet_frag_pinning(st, top, 10);
    for (size_t i = 0; i < npin && i < 10; i++)
        sl_text_printf(b, "%s%zu", i ? "," : "", top[i]);
    sublet_frag_stats f;
    sublet_frag_compute(st, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &f);
    sublet_stream s0 = 0;
    sublet_frag_streams(st, &s0, 1);
    sl_text_printf(b,
              "],\"metrics\":{\"reserved\":%" PRIu64 ",\"allocated\":%" PRIu64
              ",\"requested\":%" PRIu64 ",\"free_blocks\":%" PRIu64 ",\"free_bytes\":%" PRIu64
              ",\"largest\":%" PRIu64 ",\"external\":%.6f,\"unused\":%.6f,\"spread\":%.6f"
              ",\"internal_waste\":%" PRIu64 ",\"inactive_split\":%" PRIu64
              ",\"stream\":%" PRIu64 ",\"max_allocatable\":%" PRIu64 "}",
              f.reserved_bytes, f.allocated_bytes, f.requested_bytes, f.free_blocks, f.free_bytes,
              f.largest_free_block, f.external, f.unused, f.spread, f.internal_waste_bytes,
              f.inactive_split_bytes, s0, sublet_frag_max_allocatable(st, s0));
    if (np) {
        /* [first, second, name, segments, reserved, allocated, free, largest free,
         *  pinned segments, free bytes in pinned segments] */
        sl_text_puts(b, ",\"pools\":[");
        for (size_t p = 0; p < np; p++) {
            const sublet_frag_pool *q = &pools[p];
            char name[48];
            sl_text_printf(b, "%s[%" PRIu64 ",%" PRIu64 ",", p ? "," : "", q->pool_id[0],
                         q->pool_id[1]);
            sl_tb_json(b, sublet_frag_pool_name(q->pool_id, name, sizeof name));
            sl_text_printf(b, ",%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%zu,%" PRIu64 "]",
                         q->segments, q->reserved_bytes, q->allocated_bytes, q->free_bytes,
                         q->largest_free_block, q->pinned_segments, q->pinned_free_bytes);
        }
        sl_text_puts(b, "]");
    }
    sl_text_puts(b, "}");
    free(pools);
}

static void series_json(sl_text *b, const sublet_frag_series *s)
{
    sl_text_printf(b, "{\"nbuckets\":%zu,\"events\":%" PRIu64 ",\"exact\":%s,\"min\":[", s->nbuckets,
              s->events, s->exact ? "true" : "false");
    for (int pass = 0; pass < 2; pass++) {
        const double *v = pass ? s->max : s->min;
        if (pass)
            sl_text_puts(b, "],\"max\":[");
        for (int q = 0; q < SUBLET_FRAG_SERIES_COUNT; q++) {
            int frac = q == SUBLET_FRAG_SERIES_EXTERNAL || q == SUBLET_FRAG_SERIES_UNUSED;
            sl_text_puts(b, q ? ",[" : "[");
            for (size_t k = 0; k < s->nbuckets; k++) {
                double x = v[(size_t)q * s->nbuckets + k];
                if (frac)
                    sl_text_printf(b, "%s%.4g", k ? "," : "", x);
                else
                    sl_text_printf(b, "%s%.0f", k ? "," : "", x);
            }
            sl_text_puts(b, "]");
        }
    }
    sl_text_puts(b, "]}");
}

/* Allocation requests by size (log2 buckets): every alloc and pre_alloc row
 * of the trace, whatever the replay drove. */
typedef struct rhist {
    uint64_t count[64], bytes[64];
} rhist;

static void rhist_add(rhist *h, const sublet_trace_event *e)
{
    if (e->kind != SUBLET_ACT_ALLOC && e->kind != SUBLET_TRACE_PRE_ALLOC)
        return;
    int k = (int)sublet_frag_bucket(e->size);
    h->count[k]++;
    h->bytes[k] += e->size;
}

/* One pass over the stream, from its start to its end: the histogram, and
 * the number of rows in *rows. */
static sublet_status request_hist(sublet_trace_stream *ts, rhist *h, uint64_t *rows, char *err,
                                  size_t cap)
{
    memset(h, 0, sizeof *h);
    sublet_status st = sublet_trace_stream_rewind(ts, err, cap);
    if (st != SUBLET_OK)
        return st;
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(ts, &pre);
    for (size_t i = 0; i < npre; i++)
        rhist_add(h, &pre[i]);
    enum { CHUNK = 1024 };
    sublet_trace_event *ev = malloc(CHUNK * sizeof *ev);
    if (!ev)
        return SUBLET_ERR_NO_MEMORY;
    size_t n;
    while ((st = sublet_trace_stream_next(ts, ev, CHUNK, &n, err, cap)) == SUBLET_OK && n)
        for (size_t i = 0; i < n; i++)
            rhist_add(h, &ev[i]);
    free(ev);
    *rows = sublet_trace_stream_rows(ts);
    return st;
}

static void request_hist_json(sl_text *b, const rhist *h)
{
    int lo = 64, hi = -1;
    for (int k = 0; k < 64; k++) {
        if (!h->count[k])
            continue;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    sl_text_puts(b, "[");
    for (int k = lo; k <= hi; k++)
        sl_text_printf(b, "%s[%d,%" PRIu64 ",%" PRIu64 "]", k > lo ? "," : "", k, h->count[k],
                     h->bytes[k]);
    sl_text_puts(b, "]");
}

/* ---- the page ----------------------------------------------------------------------------- */

static void card(sl_text *b, const char *value, const char *label, int bad)
{
    sl_text_puts(b, bad ? "<div class=\"card bad\"><b>" : "<div class=\"card\"><b>");
    sl_tb_html(b, value);
    sl_text_puts(b, "</b><span>");
    sl_tb_html(b, label);
    sl_text_puts(b, "</span></div>\n");
}

typedef struct report {
    const char *path;
    sublet_trace_format format;
    uint64_t rows;
    const rhist *hist;
    const sublet_replay_options *o;
    const sublet_replay_result *r;
    const sublet_frag_series *s;
    rmap *maps;
    size_t nmaps;
    const char *diagnosis; /* text or NULL */
    const sublet_tune_result *tune; /* or NULL */
    const sublet_tune_options *tune_o;
    const char *no_replay; /* the replay's error when the page shows only the
                            * snapshot's segments (r and s are NULL), else NULL */
} report;

/* The segment map (tabs, note, legend, canvas, pinning and metrics tables)
 * and the request sizes. */
static void map_sections(sl_text *b)
{
    sl_text_puts(b, "<section><h2>Segment map</h2><div id=\"map-tabs\"></div>"
               "<p class=\"note\" id=\"map-note\"></p><p class=\"note\">Every reserved byte, to "
               "scale, segment after segment (dark ticks: segment starts)."
               "<span class=\"swatch\" style=\"background:#3266cc\"></span>allocated"
               "<span class=\"swatch\" style=\"background:#f0960e\"></span>freed, pending on a stream"
               "<span class=\"swatch\" style=\"background:#f3aaaa\"></span>free, pinned by live blocks"
               "<span class=\"swatch\" style=\"background:#dde1e6\"></span>free, releasable. "
               "Hover a block for its size, stream and stack.</p>"
               "<canvas id=\"c-map\"></canvas>\n<div class=\"two\"><div><h2>Top pinning segments"
               "</h2><table id=\"pins\"></table></div><div><h2>Metrics</h2><table id=\"metrics\">"
               "</table></div></div></section>\n");
    sl_text_puts(b, "<section><h2>Request sizes</h2><p class=\"note\">Allocation requests by size, "
               "log2 buckets.</p><canvas id=\"c-hist\"></canvas></section>\n");
}

/* The data and the scripts, to the end of the page. */
static void page_end(sl_text *b, const report *rp)
{
    const sublet_replay_result *r = rp->r;
    sl_text_puts(b, "</main>\n<div id=\"tip\"></div>\n<script type=\"application/json\" id=\"data\">");

    /* the data */
    stack_table stacks = {0};
    sl_text_printf(b, "{\"device_memory\":%" PRIu64 ",\"oom_count\":%" PRIu64 ",\"peak_event\":",
              rp->o->device_memory, r ? r->ooms : 0);
    if (!r || r->peak_reserved_event == SUBLET_REPLAY_NONE)
        sl_text_puts(b, "null");
    else
        sl_text_printf(b, "%" PRIu64, r->peak_reserved_event);
    sl_text_puts(b, ",\"ooms\":[");
    for (size_t i = 0; rp->s && i < rp->s->nooms && i < 5000; i++)
        sl_text_printf(b, "%s%" PRIu64, i ? "," : "", rp->s->oom_events[i]);
    sl_text_puts(b, "],\"series\":");
    if (rp->s)
        series_json(b, rp->s);
    else
        sl_text_puts(b, "null");
    sl_text_puts(b, ",\"request_hist\":");
    request_hist_json(b, rp->hist);
    sl_text_puts(b, ",\"maps\":[");
    for (size_t i = 0; i < rp->nmaps; i++) {
        if (i)
            sl_text_puts(b, ",");
        map_json(b, &rp->maps[i], &stacks);
    }
    sl_text_puts(b, "],\"stacks\":[");
    for (size_t i = 0; i < stacks.n; i++) {
        if (i)
            sl_text_puts(b, ",");
        sl_tb_json(b, stacks.text[i]);
    }
    sl_text_puts(b, "]}</script>\n<script>\n");
    free(stacks.text);
    free(stacks.slots);
    sl_text_putn(b, sl_report_page_js, sl_report_page_js_len);
    sl_text_puts(b, "\n</script>\n");
    if (rp->tune)
        sl_report_tune_script(b, rp->tune);
    sl_text_puts(b, "</body></html>\n");
}

/* The page when the trace cannot be replayed (a mid-run recording with a
 * prelude in a private pool, ...) but the input is a snapshot: its
 * segments, per pool, without the series. */
static void segments_page(sl_text *b, const report *rp)
{
    const sublet_frag_state *st = rp->maps[0].st;
    sublet_frag_stats f;
    sublet_frag_compute(st, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &f);
    char t1[48], label[96];
    sl_text_puts(b, "<section class=\"cards\">\n");
    sublet_format_size(f.reserved_bytes, t1, sizeof t1);
    card(b, t1, "reserved (the snapshot's segments)", 0);
    sublet_format_size(f.requested_bytes, t1, sizeof t1);
    card(b, t1, "requested: live tensors", 0);
    size_t np = sublet_frag_pools(st, NULL, 0);
    snprintf(t1, sizeof t1, "%zu", np - 1);
    card(b, t1, np - 1 == 1 ? "private pool" : "private pools", 0);
    snprintf(t1, sizeof t1, "%.1f %%", 100.0 * f.external);
    snprintf(label, sizeof label, "external fragmentation, %" PRIu64 " free blocks", f.free_blocks);
    card(b, t1, label, 0);
    sl_text_puts(b, "</section>\n<section><p class=\"note\">No memory over time: the trace could "
                  "not be replayed (");
    sl_tb_html(b, rp->no_replay);
    sl_text_puts(b, "). The page shows the snapshot's segments as recorded.</p></section>\n");
    map_sections(b);
    page_end(b, rp);
}

static void page(sl_text *b, const report *rp)
{
    const char *name = strrchr(rp->path, '/') ? strrchr(rp->path, '/') + 1 : rp->path;
    const sublet_replay_result *r = rp->r;
    char t1[48];
    sl_text_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>sublet report: ");
    sl_tb_html(b, name);
    sl_text_puts(b, "</title>\n<style>\n");
    sl_text_putn(b, sl_report_page_css, sl_report_page_css_len);
    sl_text_printf(b, "\n</style></head>\n<body data-charts=\"%d\">\n<header><h1>sublet report: ",
              rp->no_replay ? 2 : rp->tune ? 5 : 4);
    sl_tb_html(b, name);
    sl_text_puts(b, "</h1><p>");
    sl_tb_html(b, rp->path);
    sublet_format_size(rp->o->device_memory, t1, sizeof t1);
    sl_text_printf(b, " &middot; %s &middot; %" PRIu64 " events &middot; settings ",
              sublet_trace_format_name(rp->format), rp->rows);
    sl_tb_html(b, rp->o->conf && *rp->o->conf ? rp->o->conf : "(PyTorch defaults)");
    sl_text_printf(b, " &middot; simulated device %s &middot; sublet %s</p></header>\n<main>\n",
              t1, sublet_version());

    if (rp->no_replay) {
        segments_page(b, rp);
        return;
    }
    sl_text_puts(b, "<section class=\"cards\">\n");
    sublet_format_size(r->peak_reserved_bytes, t1, sizeof t1);
    card(b, t1, "peak reserved", 0);
    sublet_format_size(r->peak_requested_bytes, t1, sizeof t1);
    card(b, t1, "peak requested: the lower bound", 0);
    snprintf(t1, sizeof t1, "%+.1f %%",
             r->peak_requested_bytes
                 ? 100.0 * ((double)r->peak_reserved_bytes / (double)r->peak_requested_bytes - 1.0)
                 : 0.0);
    card(b, t1, "reserved over the lower bound at the peaks", 0);
    snprintf(t1, sizeof t1, "%" PRIu64, r->ooms);
    card(b, t1, r->ooms ? "OOMs: see the diagnosis below" : "OOMs", r->ooms != 0);
    if (rp->nmaps) {
        sublet_frag_stats f;
        sublet_frag_compute(rp->maps[0].st, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &f);
        snprintf(t1, sizeof t1, "%.1f %%", 100.0 * f.external);
        char label[160];
        snprintf(label, sizeof label, "external fragmentation, %" PRIu64 " free blocks, %.90s",
                 f.free_blocks, rp->maps[0].title);
        card(b, t1, label, 0);
    }
    sl_text_puts(b, "</section>\n");

    sl_text_printf(b, "<section><h2>Memory over time</h2><p class=\"note\">Measured after every one of "
                 "the %" PRIu64 " events and drawn as %zu buckets, each from its minimum to its "
                 "maximum%s. Dashed red: OOMs; triangle: the reserved peak.</p>\n",
              rp->s->events, rp->s->nbuckets,
              rp->s->exact ? "" : " (approximate: the replay's record and the engine disagreed at the end)");
    sl_text_puts(b, "<canvas id=\"c-mem\"></canvas><div class=\"legend\" id=\"c-mem-legend\"></div>"
               "</section>\n<section><h2>Fragmentation over time</h2><canvas id=\"c-frag\"></canvas>"
               "<div class=\"legend\" id=\"c-frag-legend\"></div></section>\n");
    map_sections(b);
    if (rp->diagnosis) {
        sl_text_puts(b, "<section><h2>OOM diagnosis</h2><pre class=\"diag\">");
        sl_tb_html(b, rp->diagnosis);
        sl_text_puts(b, "</pre></section>\n");
    }
    if (rp->tune)
        sl_report_tune_section(b, rp->tune, rp->tune_o);
    page_end(b, rp);
}

/* ---- the page from a trace ----------------------------------------------------------------- */

void sublet_report_options_init(sublet_report_options *r)
{
    memset(r, 0, sizeof *r);
    r->buckets = 2000;
    r->oom_maps = 3;
    r->diagnose = 1;
}

static void note(const sublet_report_options *ro, const char *fmt, const char *a, const char *b)
{
    if (!ro->on_note)
        return;
    char line[1024];
    snprintf(line, sizeof line, fmt, a, b);
    ro->on_note(ro->note_user, line);
}

static int add_map(rmap *maps, size_t *n, sublet_trace_stream *t, const sublet_replay_options *o,
                   uint64_t event, const char *title, const sublet_report_options *ro)
{
    for (size_t i = 0; i < *n; i++)
        if (maps[i].event == event)
            return 0;
    char err[512] = "";
    sublet_frag_state *st = NULL;
    sublet_status rs = sublet_frag_state_at_stream(t, o, event, &st, NULL, err, sizeof err);
    if (rs != SUBLET_OK) {
        note(ro, "no segment map %s: %s", title, err[0] ? err : sublet_status_text(rs));
        return -1;
    }
    maps[*n].st = st;
    maps[*n].event = event;
    snprintf(maps[*n].title, sizeof maps[*n].title, "%s", title);
    (*n)++;
    return 0;
}

sublet_status sublet_report_html(const sublet_trace *t, const sublet_replay_options *o,
                                 const sublet_report_options *ro, const sublet_view_options *v,
                                 char **out, char *err, size_t cap)
{
    if (ro && ro->info)
        memset(ro->info, 0, sizeof *ro->info);
    sublet_trace_stream *ts = NULL;
    sublet_status st = sl_view_trace_open(t, o, v, out, err, cap, &ts);
    if (st != SUBLET_OK)
        return st;
    st = sublet_report_html_stream(ts, o, ro, v, out, err, cap);
    sublet_trace_stream_close(ts);
    return st;
}

/* The page of a snapshot's segments, when its trace cannot be replayed (a
 * prelude in private pools; replay_st, rp->no_replay: why), as `sublet
 * frag` falls back to them: rp the page's path, format, rows, request sizes
 * and settings; 1 when the segments were read (*out the page, NULL when out
 * of memory, said in err), 0 when not. */
static int snapshot_page(sublet_trace_stream *t, const sublet_view_options *v,
                         const sublet_report_options *ro, report *rp, sublet_status replay_st,
                         char **out, char *err, size_t cap)
{
    sublet_report_info *info = ro->info;
    const char *rerr = rp->no_replay;
    int64_t dev = v->device >= 0 ? v->device : sublet_trace_stream_device(t);
    sublet_frag_state *fs = NULL;
    if (sublet_frag_from_snapshot(v->snapshot, dev < 0 ? 0 : dev, &fs) != SUBLET_OK)
        return 0;
    note(ro, "the replay stopped (%s): %s", rerr[0] ? rerr : sublet_status_text(replay_st),
         "the page shows the snapshot's segments");
    rmap m = {.st = fs, .event = SUBLET_REPLAY_ALL};
    snprintf(m.title, sizeof m.title, "the snapshot's segments");
    rp->maps = &m;
    rp->nmaps = 1;
    sl_text b;
    sl_text_growable(&b);
    page(&b, rp);
    sublet_frag_stats f;
    sublet_frag_compute(fs, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &f);
    sublet_frag_state_free(fs);
    if (b.oom || !b.buf) {
        sl_text_free(&b);
        sl_msg(err, cap, "out of memory");
        return 1;
    }
    *out = b.buf;
    if (info) {
        info->len = b.len;
        info->nmaps = 1;
        info->exact = 1; /* no series to be approximate */
        info->peak_reserved_bytes = f.reserved_bytes; /* the snapshot's */
    }
    return 1;
}

sublet_status sublet_report_html_stream(sublet_trace_stream *t, const sublet_replay_options *o,
                                        const sublet_report_options *ro_in,
                                        const sublet_view_options *v, char **out, char *err,
                                        size_t cap)
{
    sublet_report_info *info = ro_in ? ro_in->info : NULL;
    if (info)
        memset(info, 0, sizeof *info);
    sublet_status args = sl_view_begin(t, o, v, out, err, cap);
    if (args != SUBLET_OK)
        return args;
    sublet_report_options ro;
    if (ro_in)
        ro = *ro_in;
    else
        sublet_report_options_init(&ro);
    size_t buckets = ro.buckets ? ro.buckets : 2000;
    size_t oom_maps = ro.oom_maps > 16 ? 16 : ro.oom_maps;
    const char *path = v->name ? v->name : "";
    char rerr[1024] = "";
    sublet_frag_series s;
    sublet_replay_result r;
    rmap maps[20];
    size_t nmaps = 0;
    char *diag = NULL;
    int tune = (v->flags & SUBLET_VIEW_TUNE) != 0;
    rhist hist;
    uint64_t rows = 0;
    sublet_status st = request_hist(t, &hist, &rows, err, cap);
    if (st != SUBLET_OK)
        return st;
    memset(&r, 0, sizeof r);
    st = sublet_frag_series_run_stream(t, o, buckets, &s, &r, rerr, sizeof rerr);
    if (st != SUBLET_OK && v->snapshot && !tune) {
        /* a snapshot whose trace cannot be replayed (a prelude in private pools):
         * the page of its segments, as `sublet frag` falls back to them */
        sublet_frag_series_free(&s);
        sublet_replay_result_free(&r);
        report rp = {path, sublet_trace_stream_format(t), rows, &hist, o, NULL, NULL, NULL, 0,
                     NULL, NULL, NULL, rerr};
        if (snapshot_page(t, v, &ro, &rp, st, out, err, cap))
            return *out ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
    }
    if (st != SUBLET_OK) {
        return sl_fail(err, cap, st, "replay: %s", rerr[0] ? rerr : sublet_status_text(st));
    }
    const sublet_trace_event *pre_rows;
    size_t npre = sublet_trace_stream_prelude(t, &pre_rows);
    uint64_t peak = r.peak_reserved_event != SUBLET_REPLAY_NONE ? r.peak_reserved_event
                    : npre                                   ? npre - 1
                                                             : SUBLET_REPLAY_ALL;
    char title[96];
    snprintf(title, sizeof title, "at the reserved peak (event %" PRIu64 ")", peak);
    add_map(maps, &nmaps, t, o, peak, title, &ro);
    for (size_t i = 0; i < s.nooms && i < oom_maps; i++) {
        snprintf(title, sizeof title, "at OOM %zu (event %" PRIu64 ")", i + 1, s.oom_events[i]);
        add_map(maps, &nmaps, t, o, s.oom_events[i], title, &ro);
    }
    if (r.last_event != SUBLET_REPLAY_NONE) {
        snprintf(title, sizeof title, "at the end (event %" PRIu64 ")", r.last_event);
        add_map(maps, &nmaps, t, o, r.last_event, title, &ro);
    }
    if (!nmaps) {
        st = sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "no state to draw");
    }
    if (st == SUBLET_OK && ro.diagnose && r.ooms) {
        sublet_frag_diagnosis d;
        if (sublet_frag_diagnose_stream(t, o, NULL, &d, rerr, sizeof rerr) == SUBLET_OK) {
            size_t n = sublet_frag_diagnosis_format(&d, NULL, 0);
            diag = malloc(n + 1);
            if (diag)
                sublet_frag_diagnosis_format(&d, diag, n + 1);
        }
        sublet_frag_diagnosis_free(&d);
    }
    sublet_tune_options to;
    if (ro.tune)
        to = *ro.tune;
    else
        sublet_tune_options_init(&to);
    sublet_tune_result tr;
    memset(&tr, 0, sizeof tr);
    if (st == SUBLET_OK && tune) {
        /* the stream as it is (a trace in memory, or a binary copy read
         * again), else copied once by the tuning itself */
        st = sublet_tune_streams(&t, 1, &to, &tr);
        if (st != SUBLET_OK)
            sl_msg(err, cap, "tuning: %s", tr.error[0] ? tr.error : sublet_status_text(st));
    }
    if (st == SUBLET_OK) {
        report rp = {path, sublet_trace_stream_format(t), rows, &hist, o, &r, &s, maps, nmaps,
                     diag, tune ? &tr : NULL, &to, NULL};
        sl_text b;
        sl_text_growable(&b);
        page(&b, &rp);
        if (b.oom || !b.buf) {
            sl_text_free(&b);
            st = sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
        } else {
            *out = b.buf;
            if (info) {
                info->len = b.len;
                info->nmaps = nmaps;
                info->exact = s.exact;
                info->ooms = r.ooms;
                info->peak_reserved_bytes = r.peak_reserved_bytes;
            }
        }
    }
    free(diag);
    sublet_tune_result_free(&tr);
    for (size_t i = 0; i < nmaps; i++)
        sublet_frag_state_free(maps[i].st);
    sublet_frag_series_free(&s);
    sublet_replay_result_free(&r);
    return st;
}
