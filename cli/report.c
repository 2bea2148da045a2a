/* sublet CLI — `sublet report FILE -o OUT.html`: one self-contained HTML page
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
 * <canvas> with the hand-written script cli/report/page.js (its style:
 * cli/report/page.css; both compiled in by cmake/embed.cmake and written
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

#include "formats/atomic_write.h"
#include "cli.h"
#include "report.h"
#include "report_assets.h"
#include "sublet/frag.h"

void cli_report_usage(FILE *out)
{
    fputs("usage: sublet report FILE -o OUT.html [options]\n"
          "  One self-contained HTML page (no network, no server): memory over time\n"
          "  (allocated, reserved, live requested bytes), fragmentation over time, the\n"
          "  segment map at the peak, at each OOM and at the end (hover a block for its\n"
          "  size, stream and allocation stack), the request sizes, the top pinning\n"
          "  segments and the OOM diagnosis.  FILE: any trace or snapshot sublet reads.\n"
          "options:\n"
          "  -o, --output FILE     the page to write (atomically)\n"
          "  --device-memory SIZE  simulated device capacity (default: the trace's, else 80GiB)\n"
          "  --conf STR            settings for the replay (default: the trace's)\n"
          "  --buckets N           points drawn per series (default 2000; each keeps min/max)\n"
          "  --oom-maps N          segment maps of the first N OOMs (default 3)\n"
          "  --no-diagnosis        skip the replays under candidate settings after an OOM\n"
          "  --device N            device of a multi-device snapshot\n"
          "  --tune                add the tuning result (as `sublet tune`): both answers with\n"
          "                        what they fix, the evidence, the Pareto trade-offs and the\n"
          "                        warm-up plan; --device-memory is your device, --conf the\n"
          "                        current settings; with --tune also --cost-model M,\n"
          "                        --band PCT, --prelude MODE, --threads N, --no-warmup\n"
          "                        (see `sublet help tune`)\n",
          out);
}

/* ---- a growable text buffer ----------------------------------------------------------- */

void tb_putn(tbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 1 << 16;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void tb_puts(tbuf *b, const char *s) { tb_putn(b, s, strlen(s)); }

void tb_printf(tbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        tb_putn(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    tb_putn(b, big, (size_t)n);
    free(big);
}

/* Length of the valid UTF-8 sequence at s (0: invalid). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* A JSON string literal that is also safe inside <script>: <, > and & are
 * \u-escaped; bytes that are not UTF-8 become U+FFFD. */
void tb_json(tbuf *b, const char *s)
{
    tb_putn(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            tb_putn(b, e, 2);
            p++;
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            if (c == '\n')
                tb_puts(b, "\\n");
            else
                tb_printf(b, "\\u%04x", c);
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n)
                tb_putn(b, (const char *)p, n);
            else
                tb_puts(b, "\\ufffd");
            p += n ? n : 1;
        }
    }
    tb_putn(b, "\"", 1);
}

/* HTML text: &, <, >, " escaped; bytes that are not UTF-8 become U+FFFD. */
void tb_html(tbuf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned c = *p;
        if (c == '&')
            tb_puts(b, "&amp;");
        else if (c == '<')
            tb_puts(b, "&lt;");
        else if (c == '>')
            tb_puts(b, "&gt;");
        else if (c == '"')
            tb_puts(b, "&quot;");
        else if (c < 0x80)
            tb_putn(b, (const char *)p, 1);
        else {
            size_t n = utf8_len(p);
            tb_putn(b, n ? (const char *)p : "\xef\xbf\xbd", n ? n : 3);
            p += n ? n : 1;
            continue;
        }
        p++;
    }
}

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

static void map_json(tbuf *b, const rmap *m, stack_table *stacks)
{
    const sublet_frag_state *st = m->st;
    tb_puts(b, "{\"title\":");
    tb_json(b, m->title);
    tb_printf(b, ",\"event\":%" PRIu64 ",\"segs\":[", m->event);
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        unsigned flags = (s->is_small ? 1u : 0u) | (s->is_expandable ? 2u : 0u) |
                         (s->live_blocks && s->free_size ? 4u : 0u);
        tb_printf(b, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u,%zu,%zu,%zu,%" PRIu64 ",%" PRIu64 "]",
                  i ? "," : "", s->addr, s->size, s->stream, flags, s->first_block, s->nblocks,
                  s->live_blocks, s->free_size, s->active_size);
    }
    tb_puts(b, "],\"blocks\":[");
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *fb = &st->blocks[s->first_block + k];
            uint32_t id = fb->stack && fb->stack <= st->nstacks
                              ? stack_id(stacks, st->stacks[fb->stack - 1])
                              : 0;
            tb_printf(b, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d,%u]",
                      s->first_block + k ? "," : "", fb->addr - s->addr, fb->size,
                      fb->requested_size, (int)fb->state, id);
        }
    }
    tb_puts(b, "],\"pins\":[");
    size_t top[10];
    size_t np = sublet_frag_pinning(st, top, 10);
    for (size_t i = 0; i < np && i < 10; i++)
        tb_printf(b, "%s%zu", i ? "," : "", top[i]);
    sublet_frag_stats f;
    sublet_frag_compute(st, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &f);
    sublet_stream s0 = 0;
    sublet_frag_streams(st, &s0, 1);
    tb_printf(b,
              "],\"metrics\":{\"reserved\":%" PRIu64 ",\"allocated\":%" PRIu64
              ",\"requested\":%" PRIu64 ",\"free_blocks\":%" PRIu64 ",\"free_bytes\":%" PRIu64
              ",\"largest\":%" PRIu64 ",\"external\":%.6f,\"unused\":%.6f,\"spread\":%.6f"
              ",\"internal_waste\":%" PRIu64 ",\"inactive_split\":%" PRIu64
              ",\"stream\":%" PRIu64 ",\"max_allocatable\":%" PRIu64 "}}",
              f.reserved_bytes, f.allocated_bytes, f.requested_bytes, f.free_blocks, f.free_bytes,
              f.largest_free_block, f.external, f.unused, f.spread, f.internal_waste_bytes,
              f.inactive_split_bytes, s0, sublet_frag_max_allocatable(st, s0));
}

static void series_json(tbuf *b, const sublet_frag_series *s)
{
    tb_printf(b, "{\"nbuckets\":%zu,\"events\":%" PRIu64 ",\"exact\":%s,\"min\":[", s->nbuckets,
              s->events, s->exact ? "true" : "false");
    for (int pass = 0; pass < 2; pass++) {
        const double *v = pass ? s->max : s->min;
        if (pass)
            tb_puts(b, "],\"max\":[");
        for (int q = 0; q < SUBLET_FRAG_SERIES_COUNT; q++) {
            int frac = q == SUBLET_FRAG_SERIES_EXTERNAL || q == SUBLET_FRAG_SERIES_UNUSED;
            tb_puts(b, q ? ",[" : "[");
            for (size_t k = 0; k < s->nbuckets; k++) {
                double x = v[(size_t)q * s->nbuckets + k];
                if (frac)
                    tb_printf(b, "%s%.4g", k ? "," : "", x);
                else
                    tb_printf(b, "%s%.0f", k ? "," : "", x);
            }
            tb_puts(b, "]");
        }
    }
    tb_puts(b, "]}");
}

static void request_hist_json(tbuf *b, const sublet_trace *t)
{
    uint64_t count[64] = {0}, bytes[64] = {0};
    size_t n = sublet_trace_count(t);
    const sublet_trace_event *ev = sublet_trace_events(t);
    int lo = 64, hi = -1;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != SUBLET_ACT_ALLOC && ev[i].kind != SUBLET_TRACE_PRE_ALLOC)
            continue;
        int k = (int)sublet_frag_bucket(ev[i].size);
        count[k]++;
        bytes[k] += ev[i].size;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    tb_puts(b, "[");
    for (int k = lo; k <= hi; k++)
        tb_printf(b, "%s[%d,%" PRIu64 ",%" PRIu64 "]", k > lo ? "," : "", k, count[k], bytes[k]);
    tb_puts(b, "]");
}

/* ---- the page ----------------------------------------------------------------------------- */

static void card(tbuf *b, const char *value, const char *label, int bad)
{
    tb_puts(b, bad ? "<div class=\"card bad\"><b>" : "<div class=\"card\"><b>");
    tb_html(b, value);
    tb_puts(b, "</b><span>");
    tb_html(b, label);
    tb_puts(b, "</span></div>\n");
}

typedef struct report {
    const char *path;
    const sublet_trace *t;
    const sublet_replay_options *o;
    const sublet_replay_result *r;
    const sublet_frag_series *s;
    rmap *maps;
    size_t nmaps;
    const char *diagnosis; /* text or NULL */
    const sublet_tune_result *tune; /* or NULL */
    const sublet_tune_options *tune_o;
} report;

static void page(tbuf *b, const report *rp)
{
    const char *name = strrchr(rp->path, '/') ? strrchr(rp->path, '/') + 1 : rp->path;
    const sublet_replay_result *r = rp->r;
    char t1[48];
    tb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>sublet report: ");
    tb_html(b, name);
    tb_puts(b, "</title>\n<style>\n");
    tb_putn(b, report_page_css, report_page_css_len);
    tb_printf(b, "\n</style></head>\n<body data-charts=\"%d\">\n<header><h1>sublet report: ",
              rp->tune ? 5 : 4);
    tb_html(b, name);
    tb_puts(b, "</h1><p>");
    tb_html(b, rp->path);
    sublet_format_size(rp->o->device_memory, t1, sizeof t1);
    tb_printf(b, " &middot; %s &middot; %zu events &middot; settings ",
              sublet_trace_format_name(sublet_trace_source_format(rp->t)), sublet_trace_count(rp->t));
    tb_html(b, rp->o->conf && *rp->o->conf ? rp->o->conf : "(PyTorch defaults)");
    tb_printf(b, " &middot; simulated device %s &middot; sublet %s</p></header>\n<main>\n",
              t1, sublet_version());

    tb_puts(b, "<section class=\"cards\">\n");
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
    tb_puts(b, "</section>\n");

    tb_printf(b, "<section><h2>Memory over time</h2><p class=\"note\">Measured after every one of "
                 "the %" PRIu64 " events and drawn as %zu buckets, each from its minimum to its "
                 "maximum%s. Dashed red: OOMs; triangle: the reserved peak.</p>\n",
              rp->s->events, rp->s->nbuckets,
              rp->s->exact ? "" : " (approximate: the replay's record and the engine disagreed at the end)");
    tb_puts(b, "<canvas id=\"c-mem\"></canvas><div class=\"legend\" id=\"c-mem-legend\"></div>"
               "</section>\n<section><h2>Fragmentation over time</h2><canvas id=\"c-frag\"></canvas>"
               "<div class=\"legend\" id=\"c-frag-legend\"></div></section>\n");
    tb_puts(b, "<section><h2>Segment map</h2><div id=\"map-tabs\"></div>"
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
    tb_puts(b, "<section><h2>Request sizes</h2><p class=\"note\">Allocation requests by size, "
               "log2 buckets.</p><canvas id=\"c-hist\"></canvas></section>\n");
    if (rp->diagnosis) {
        tb_puts(b, "<section><h2>OOM diagnosis</h2><pre class=\"diag\">");
        tb_html(b, rp->diagnosis);
        tb_puts(b, "</pre></section>\n");
    }
    if (rp->tune)
        report_tune_section(b, rp->tune, rp->tune_o);
    tb_puts(b, "</main>\n<div id=\"tip\"></div>\n<script type=\"application/json\" id=\"data\">");

    /* the data */
    stack_table stacks = {0};
    tb_printf(b, "{\"device_memory\":%" PRIu64 ",\"oom_count\":%" PRIu64 ",\"peak_event\":",
              rp->o->device_memory, r->ooms);
    if (r->peak_reserved_event == SUBLET_REPLAY_NONE)
        tb_puts(b, "null");
    else
        tb_printf(b, "%" PRIu64, r->peak_reserved_event);
    tb_puts(b, ",\"ooms\":[");
    for (size_t i = 0; i < rp->s->nooms && i < 5000; i++)
        tb_printf(b, "%s%" PRIu64, i ? "," : "", rp->s->oom_events[i]);
    tb_puts(b, "],\"series\":");
    series_json(b, rp->s);
    tb_puts(b, ",\"request_hist\":");
    request_hist_json(b, rp->t);
    tb_puts(b, ",\"maps\":[");
    for (size_t i = 0; i < rp->nmaps; i++) {
        if (i)
            tb_puts(b, ",");
        map_json(b, &rp->maps[i], &stacks);
    }
    tb_puts(b, "],\"stacks\":[");
    for (size_t i = 0; i < stacks.n; i++) {
        if (i)
            tb_puts(b, ",");
        tb_json(b, stacks.text[i]);
    }
    tb_puts(b, "]}</script>\n<script>\n");
    free(stacks.text);
    free(stacks.slots);
    tb_putn(b, report_page_js, report_page_js_len);
    tb_puts(b, "\n</script>\n");
    if (rp->tune)
        report_tune_script(b, rp->tune);
    tb_puts(b, "</body></html>\n");
}

/* ---- the command -------------------------------------------------------------------------- */

static int usage_error(const char *fmt, const char *arg)
{
    fputs("sublet report: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    cli_report_usage(stderr);
    return CLI_USAGE;
}

static int add_map(rmap *maps, size_t *n, const sublet_trace *t, const sublet_replay_options *o,
                   uint64_t event, const char *title)
{
    for (size_t i = 0; i < *n; i++)
        if (maps[i].event == event)
            return 0;
    char err[512] = "";
    sublet_frag_state *st = NULL;
    sublet_status rs = sublet_frag_state_at(t, o, event, &st, NULL, err, sizeof err);
    if (rs != SUBLET_OK) {
        fprintf(stderr, "sublet report: note: no segment map %s: %s\n", title,
                err[0] ? err : sublet_status_text(rs));
        return -1;
    }
    maps[*n].st = st;
    maps[*n].event = event;
    snprintf(maps[*n].title, sizeof maps[*n].title, "%s", title);
    (*n)++;
    return 0;
}

int cli_report(int argc, char **argv)
{
    const char *path = NULL, *outp = NULL, *conf = NULL;
    uint64_t device_memory = 0, buckets = 2000, oom_maps = 3;
    int diagnose = 1, only_positional = 0, tune = 0, tune_opts = 0;
    sublet_trace_load_options lo = {0};
    sublet_tune_options to;
    sublet_tune_options_init(&to);
    to.pytorch_version = cli_pytorch_version();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        const char *v;
        if (only_positional || a[0] != '-' || strcmp(a, "-") == 0) {
            if (path)
                return usage_error("more than one input given ('%s')", a);
            path = a;
        } else if (strcmp(a, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_report_usage(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--no-diagnosis") == 0) {
            diagnose = 0;
        } else if (strcmp(a, "--tune") == 0) {
            tune = 1;
        } else if ((m = cli_tune_option("sublet report", argc, argv, &i, &to)) != 0) {
            if (m < 0)
                return m == -CLI_USAGE ? usage_error("%s", "bad tuning option") : -m;
            tune_opts = 1;
        } else if (((v = cli_opt_value(argc, argv, &i, "-o", &m)) || m) ||
                   ((v = cli_opt_value(argc, argv, &i, "--output", &m)) || m)) {
            if (!v)
                return usage_error("%s needs a value", "-o");
            outp = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--conf", &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--conf");
            conf = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--device-memory", &m)) || m) {
            if (!v || sublet_parse_size(v, &device_memory) != 0 || !device_memory)
                return usage_error("--device-memory: '%s' is not a size (e.g. 80GiB)", v ? v : "");
        } else if ((v = cli_opt_value(argc, argv, &i, "--buckets", &m)) || m) {
            if (!v || cli_parse_index(v, &buckets) != 0 || buckets < 10 || buckets > 100000)
                return usage_error("--buckets: '%s' is not in 10..100000", v ? v : "");
        } else if ((v = cli_opt_value(argc, argv, &i, "--oom-maps", &m)) || m) {
            if (!v || cli_parse_index(v, &oom_maps) != 0 || oom_maps > 16)
                return usage_error("--oom-maps: '%s' is not in 0..16", v ? v : "");
        } else if ((v = cli_opt_value(argc, argv, &i, "--device", &m)) || m) {
            uint64_t d;
            if (!v || cli_parse_index(v, &d) != 0 || d > INT32_MAX)
                return usage_error("--device: '%s' is not a device number", v ? v : "");
            lo.pick_device = 1;
            lo.device = (int64_t)d;
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!path)
        return usage_error("%s", "no input given");
    if (!outp)
        return usage_error("%s", "no output given (-o OUT.html)");
    if (tune_opts && !tune)
        return usage_error("%s", "--cost-model, --band, --prelude, --threads and --no-warmup "
                                 "go with --tune");
    char err[1600];
    if (conf) {
        sublet_settings probe;
        sublet_settings_default(&probe);
        if (sublet_settings_parse(&probe, conf, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet report: --conf: %s\n", err);
            return CLI_USAGE;
        }
    }
    sublet_trace *t = NULL;
    sublet_snapshot *snap = NULL;
    if (cli_frag_load(path, &lo, &t, &snap, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet report: %s\n", err);
        return CLI_ERROR;
    }
    sublet_replay_options o;
    int from_trace = 0;
    cli_frag_replay_options(t, conf, device_memory, &o, &from_trace);

    int rc = CLI_OK;
    sublet_frag_series s;
    sublet_replay_result r;
    rmap maps[20];
    size_t nmaps = 0;
    char *diag = NULL;
    sublet_status st = sublet_frag_series_run(t, &o, (size_t)buckets, &s, &r, err, sizeof err);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet report: %s: replay: %s\n", path, err[0] ? err : sublet_status_text(st));
        cli_trace_free(t);
        sublet_snapshot_free(snap);
        return CLI_ERROR;
    }
    size_t npre = sublet_trace_prelude_count(t);
    uint64_t peak = r.peak_reserved_event != SUBLET_REPLAY_NONE ? r.peak_reserved_event
                    : npre                                   ? npre - 1
                                                             : SUBLET_REPLAY_ALL;
    char title[96];
    snprintf(title, sizeof title, "at the reserved peak (event %" PRIu64 ")", peak);
    add_map(maps, &nmaps, t, &o, peak, title);
    for (size_t i = 0; i < s.nooms && i < oom_maps; i++) {
        snprintf(title, sizeof title, "at OOM %zu (event %" PRIu64 ")", i + 1, s.oom_events[i]);
        add_map(maps, &nmaps, t, &o, s.oom_events[i], title);
    }
    if (r.last_event != SUBLET_REPLAY_NONE) {
        snprintf(title, sizeof title, "at the end (event %" PRIu64 ")", r.last_event);
        add_map(maps, &nmaps, t, &o, r.last_event, title);
    }
    if (!nmaps) {
        fprintf(stderr, "sublet report: %s: no state to draw\n", path);
        rc = CLI_ERROR;
    }
    if (rc == CLI_OK && diagnose && r.ooms) {
        sublet_frag_diagnosis d;
        if (sublet_frag_diagnose_trace(t, &o, NULL, &d, err, sizeof err) == SUBLET_OK) {
            size_t n = sublet_frag_diagnosis_format(&d, NULL, 0);
            diag = malloc(n + 1);
            if (diag)
                sublet_frag_diagnosis_format(&d, diag, n + 1);
        }
        sublet_frag_diagnosis_free(&d);
    }
    sublet_tune_result tr;
    memset(&tr, 0, sizeof tr);
    if (rc == CLI_OK && tune) {
        /* your device and your current settings, as the page's replay */
        to.device_memory = device_memory;
        const char *cur[1] = {conf};
        to.current = cur;
        const sublet_trace *tt = t;
        if (sublet_tune(&tt, 1, &to, &tr) != SUBLET_OK) {
            fprintf(stderr, "sublet report: %s: tuning: %s\n", path,
                    tr.error[0] ? tr.error : sublet_status_text(tr.status));
            rc = CLI_ERROR;
        }
        to.current = NULL;
    }
    if (rc == CLI_OK) {
        report rp = {path, t, &o, &r, &s, maps, nmaps, diag, tune ? &tr : NULL, &to};
        tbuf b = {0};
        page(&b, &rp);
        if (b.oom) {
            fprintf(stderr, "sublet report: out of memory\n");
            rc = CLI_ERROR;
        } else if ((st = sublet_atomic_write(outp, b.p, b.n, err, sizeof err)) != SUBLET_OK) {
            fprintf(stderr, "sublet report: %s\n", err[0] ? err : sublet_status_text(st));
            rc = CLI_ERROR;
        } else {
            char t1[48];
            sublet_format_size(r.peak_reserved_bytes, t1, sizeof t1);
            printf("report: %s (%zu bytes): %zu events, %" PRIu64 " OOMs, peak reserved %s, "
                   "%zu segment maps%s\n",
                   outp, b.n, sublet_trace_count(t), r.ooms, t1, nmaps,
                   s.exact ? "" : "; note: the series are approximate");
        }
        free(b.p);
    }
    free(diag);
    sublet_tune_result_free(&tr);
    for (size_t i = 0; i < nmaps; i++)
        sublet_frag_state_free(maps[i].st);
    sublet_frag_series_free(&s);
    sublet_replay_result_free(&r);
    cli_trace_free(t);
    sublet_snapshot_free(snap);
    return rc;
}
