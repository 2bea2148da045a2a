/* sublet views — the tuning section of `sublet report --tune` (report.c writes
 * the page): what `sublet tune` prints, as HTML.  Both answers with the
 * sentence on what each fixes, the evidence table beside the current
 * settings, the Pareto trade-offs of min capacity against cost (a chart and
 * a table per family) and the warm-up plan with the exact SUBLET_ALLOC_CONF
 * string.  The chart is drawn by its own script, src/views/report/tune.js (compiled
 * in by cmake/embed.cmake), after the page's, with the page's helpers
 * (window.subletReport), and counts itself into data-rendered as the page's
 * charts do. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "report_assets.h"
#include "views/report_tune.h"
#include "views/views_internal.h"

static void conf_code(sl_text *b, const char *conf)
{
    sl_text_puts(b, "<code>");
    sl_tb_html(b, conf && *conf ? conf : "\"\" (PyTorch's defaults)");
    sl_text_puts(b, "</code>");
}

/* One row of the evidence table: a label and three cells. */
static void row3(sl_text *b, const char *label, const char *x, const char *y, const char *z)
{
    sl_text_puts(b, "<tr><th>");
    sl_tb_html(b, label);
    sl_text_puts(b, "</th>");
    const char *v[3] = {x, y, z};
    for (int i = 0; i < 3; i++) {
        sl_text_puts(b, "<td>");
        sl_tb_html(b, v[i]);
        sl_text_puts(b, "</td>");
    }
    sl_text_puts(b, "</tr>\n");
}

static void evidence(sl_text *b, const sublet_tune_result *r)
{
    const sublet_tune_eval *e[3] = {&r->current, &r->pytorch, &r->sublet};
    char c[3][64];
    sl_text_puts(b, "<table class=\"tune\"><tr><th></th><th>current</th><th>PyTorch knobs</th>"
               "<th>sublet</th></tr>\n<tr><th>settings</th>");
    for (int i = 0; i < 3; i++) {
        sl_text_puts(b, "<td>");
        conf_code(b, e[i]->conf);
        sl_text_puts(b, "</td>");
    }
    sl_text_puts(b, "</tr>\n");
#define ROW(label, ...)                                                                      \
    do {                                                                                     \
        for (int i = 0; i < 3; i++)                                                          \
            snprintf(c[i], sizeof c[i], __VA_ARGS__);                                        \
        row3(b, label, c[0], c[1], c[2]);                                                    \
    } while (0)
    for (int i = 0; i < 3; i++)
        sl_fmt_mib(e[i]->min_capacity_bytes, c[i], sizeof c[i]);
    row3(b, "min capacity (smallest device that runs it)", c[0], c[1], c[2]);
    ROW("over the peak of live tensors", "%+.2f %%", e[i]->overhead * 100);
    char label[96];
    snprintf(label, sizeof label, "peak reserved on your device (%.2f GiB)",
             (double)r->device_memory / (double)((uint64_t)1 << 30));
    for (int i = 0; i < 3; i++)
        sl_fmt_mib(e[i]->peak_reserved_bytes, c[i], sizeof c[i]);
    row3(b, label, c[0], c[1], c[2]);
    ROW("device calls", "%" PRIu64, e[i]->device_calls);
    sublet_tune_calls k[3];
    for (int i = 0; i < 3; i++)
        sl_tune_calls_sum(e[i], &k[i]);
    ROW("cudaMalloc / cudaFree", "%" PRIu64 " / %" PRIu64, k[i].segment_allocs,
        k[i].segment_frees);
    ROW("pages mapped / unmapped", "%" PRIu64 " / %" PRIu64, k[i].map_pages, k[i].unmap_pages);
    ROW("allocation retries", "%" PRIu64, e[i]->retries);
    for (int i = 0; i < 3; i++)
        sl_fmt_us(e[i]->cost_us, c[i], sizeof c[i]);
    row3(b, "cost (model)", c[0], c[1], c[2]);
    ROW("runs on your device", "%s", e[i]->fits ? "yes" : "NO");
#undef ROW
    sl_text_puts(b, "</table>\n");
}

/* conf, and the call beside it where the release has no option for the fraction */
static void conf_call(sl_text *b, const sublet_tune_eval *e)
{
    char code[96];
    conf_code(b, e->conf);
    if (sl_view_fraction_code(e, code, sizeof code)) {
        sl_text_puts(b, " + <code>");
        sl_tb_html(b, code);
        sl_text_puts(b, "</code>");
    }
}

/* pytorch: the PYTORCH_CUDA_ALLOC_CONF answer, with its release (version) */
static void answer(sl_text *b, const char *env, const sublet_tune_eval *a, const char *cause,
                   const sublet_tune_eval *cur, int pytorch, const char *version)
{
    char b1[32], b2[32], note[512];
    sl_text_puts(b, "<p class=\"answer\"><code>");
    sl_tb_html(b, env);
    sl_text_puts(b, "=");
    sl_tb_html(b, a->conf);
    sl_text_puts(b, "</code></p>\n");
    if (sl_view_fraction_code(a, note, sizeof note)) {
        sl_text_puts(b, "<p class=\"answer\">and before the first CUDA allocation: <code>");
        sl_tb_html(b, note);
        sl_text_puts(b, "</code></p>\n");
    }
    if (pytorch) {
        sl_text_puts(b, "<p class=\"note\">");
        sl_tb_html(b, sl_view_release_note(a, version, note, sizeof note));
        sl_text_puts(b, "</p>\n");
    }
    sl_text_puts(b, "<p class=\"note\">");
    int64_t dm = (int64_t)a->min_capacity_bytes - (int64_t)cur->min_capacity_bytes;
    double dc = a->cost_us - cur->cost_us;
    sl_text_printf(b, "vs current: min capacity %s%s (%+.2f %%), cost %s%s", dm < 0 ? "&minus;" : "+",
              sl_fmt_mib((uint64_t)(dm < 0 ? -dm : dm), b1, sizeof b1),
              cur->min_capacity_bytes ? 100.0 * (double)dm / (double)cur->min_capacity_bytes : 0.0,
              dc < 0 ? "&minus;" : "+", sl_fmt_us(dc < 0 ? -dc : dc, b2, sizeof b2));
    if (cur->cost_us > 0 && a->cost_us > 1.5 * cur->cost_us)
        sl_text_printf(b, " (%.1fx: a trade-off, memory for device calls)", a->cost_us / cur->cost_us);
    sl_text_puts(b, "</p>\n<p><b>Fixes:</b> ");
    if (cause[0])
        sl_tb_html(b, cause);
    else if (strcmp(a->conf, cur->conf) == 0)
        sl_text_puts(b, "nothing: the current settings are already the answer.");
    else
        sl_text_puts(b, "no difference in segments or at the minimum device was found.");
    sl_text_puts(b, "</p>\n");
}

static void pareto_table(sl_text *b, const char *title, const sublet_tune_eval *p, size_t n,
                         const sublet_tune_eval *ans)
{
    char b1[32], b2[32];
    sl_text_printf(b, "<h3>%s</h3><table class=\"tune\"><tr><th></th><th>min capacity</th>"
                 "<th>overhead</th><th>cost</th><th>calls</th><th>settings</th></tr>\n",
              title);
    for (size_t i = 0; i < n; i++) {
        int is = strcmp(p[i].conf, ans->conf) == 0;
        sl_text_printf(b, "<tr%s><td>%s</td><td>%s</td><td>%+.2f %%</td><td>%s</td><td>%" PRIu64
                     "</td><td>",
                  is ? " class=\"on\"" : "", is ? "&#9733; answer" : "",
                  sl_fmt_mib(p[i].min_capacity_bytes, b1, sizeof b1), p[i].overhead * 100,
                  sl_fmt_us(p[i].cost_us, b2, sizeof b2), p[i].device_calls);
        conf_call(b, &p[i]);
        sl_text_puts(b, "</td></tr>\n");
    }
    sl_text_puts(b, "</table>\n");
}

static void plan_part(sl_text *b, const sublet_tune_result *r, const sublet_tune_options *o)
{
    const sublet_tune_plan *p = &r->plan;
    char b1[32], b2[32], b3[32];
    sl_text_puts(b, "<h3>Warm-up plan</h3>\n");
    if (!o->warmup) {
        sl_text_puts(b, "<p class=\"note\">Not derived (--no-warmup).</p>\n");
        return;
    }
    const char *whose = strcmp(p->conf, r->sublet.conf) == 0
                            ? ""
                            : " (for the PyTorch answer: policy:stitch has none)";
    if (!sl_view_plan_helps(p)) {
        sl_text_printf(b, "<p>No plan helps here%s: ", whose);
        sl_tb_html(b, p->note[0] ? p->note : "the run makes no device allocation a plan removes");
        sl_text_puts(b, "</p>\n");
        return;
    }
    sl_text_printf(b, "<p>Reserved when the allocator is created (<code>sublet_reserve</code>), "
                 "so that the run makes no device allocation%s:</p>\n<p class=\"answer\">"
                 "<code>SUBLET_ALLOC_CONF=",
              whose);
    sl_tb_html(b, p->env);
    sl_text_puts(b, "</code></p>\n<table class=\"tune\">\n");
    uint64_t segs = 0;
    for (size_t i = 0; i < p->nentries; i++)
        segs += p->entries[i].count;
    sublet_settings ps;
    sublet_settings_default(&ps);
    (void)sublet_settings_parse(&ps, p->conf, NULL, 0);
    sl_text_printf(b, "<tr><th>reserved at start</th><td>%s %s %" PRIu64 " %s</td></tr>\n",
              sl_fmt_mib(p->plan_bytes, b1, sizeof b1), ps.expandable_segments ? "of pages in" : "in",
              segs,
              ps.expandable_segments ? (segs == 1 ? "pool" : "pools")
                                     : (segs == 1 ? "segment" : "segments"));
    sl_text_printf(b, "<tr><th>the run's peak reserved</th><td>%s without the plan, %s with it</td>"
                 "</tr>\n",
              sl_fmt_mib(p->peak_reserved_bytes, b1, sizeof b1),
              sl_fmt_mib(p->peak_reserved_with_plan, b2, sizeof b2));
    sl_text_printf(b, "<tr><th>device allocations during the run</th><td>%" PRIu64 " &rarr; %" PRIu64
                 " (checked by replay)</td></tr>\n",
              p->device_allocs_before, p->device_allocs_after);
    sl_text_printf(b, "<tr><th>device calls during the run</th><td>%" PRIu64 " &rarr; %" PRIu64
                 ", cost %s &rarr; %s</td></tr>\n",
              p->device_calls_before, p->device_calls_after, sl_fmt_us(p->cost_before_us, b1, sizeof b1),
              sl_fmt_us(p->cost_after_us, b2, sizeof b2));
    sl_text_printf(b, "<tr><th>the plan's own calls</th><td>%" PRIu64 ", %s, once at start-up</td></tr>"
                 "\n<tr><th>fits your device</th><td>yes</td></tr>\n",
              p->plan_calls, sl_fmt_us(p->plan_cost_us, b3, sizeof b3));
    if (p->note[0]) {
        sl_text_puts(b, "<tr><th>note</th><td>");
        sl_tb_html(b, p->note);
        sl_text_puts(b, "</td></tr>\n");
    }
    sl_text_puts(b, "</table>\n");
}

void sl_report_tune_section(sl_text *b, const sublet_tune_result *r, const sublet_tune_options *o)
{
    sl_text_puts(b, "<section id=\"tune\"><h2>Settings: <code>sublet tune</code></h2>\n"
               "<p class=\"note\">");
    sl_text_printf(b, "%zu settings searched (%zu distinct), %" PRIu64 " replays, %.2f s, on a "
                 "%.2f GiB device; cost model (&micro;s): cudaMalloc %g + %g/GiB, cudaFree %g, "
                 "retry %g, map %g/page, unmap %g/page. Min capacity: the smallest device "
                 "(2 MiB steps) the trace runs on; the answer is the cheapest setting within "
                 "%.2g %% of the best (docs/tune.md).</p>\n",
              r->space, r->distinct, r->replays, r->seconds,
              (double)r->device_memory / (double)((uint64_t)1 << 30), o->cost.malloc_us,
              o->cost.malloc_us_per_gib, o->cost.free_us, o->cost.retry_us, o->cost.map_us,
              o->cost.unmap_us, o->band * 100);
    sl_text_puts(b, "<div class=\"two\"><div><h3>Keep PyTorch's allocator</h3>\n");
    answer(b, "PYTORCH_CUDA_ALLOC_CONF", &r->pytorch, r->pytorch_cause, &r->current, 1,
           o->pytorch_version);
    sl_text_puts(b, "</div><div><h3>Run sublet's</h3>\n");
    answer(b, "SUBLET_ALLOC_CONF", &r->sublet, r->sublet_cause, &r->current, 0, NULL);
    sl_text_puts(b, "</div></div>\n<h3>The evidence</h3>\n");
    evidence(b, r);
    sl_text_puts(b, "<h3>Trade-offs: min capacity against cost</h3><p class=\"note\">The Pareto sets: "
               "every setting no other beats on both. Hover a point for its settings.</p>\n"
               "<canvas id=\"c-tune\"></canvas><div class=\"legend\" id=\"c-tune-legend\"></div>\n"
               "<div class=\"two\"><div>");
    pareto_table(b, "PyTorch knobs", r->pareto_pytorch, r->npareto_pytorch, &r->pytorch);
    sl_text_puts(b, "</div><div>");
    pareto_table(b, "All (SUBLET_ALLOC_CONF)", r->pareto_sublet, r->npareto_sublet, &r->sublet);
    sl_text_puts(b, "</div></div>\n");
    plan_part(b, r, o);
    sl_text_puts(b, "</section>\n");
}

static void point_json(sl_text *b, const sublet_tune_eval *e, int is_answer)
{
    char conf[SUBLET_TUNE_CONF_MAX + 128], code[96];
    const char *call = sl_view_fraction_code(e, code, sizeof code);
    snprintf(conf, sizeof conf, "%s%s%s", e->conf, call ? " + " : "", call ? call : "");
    sl_text_puts(b, "{\"conf\":");
    sl_tb_json(b, conf);
    sl_text_printf(b, ",\"m\":%" PRIu64 ",\"overhead\":%.6f,\"cost\":%.3f,\"calls\":%" PRIu64
                 ",\"answer\":%s}",
              e->min_capacity_bytes, e->overhead, e->cost_us, e->device_calls,
              is_answer ? "true" : "false");
}

void sl_report_tune_script(sl_text *b, const sublet_tune_result *r)
{
    sl_text_puts(b, "<script type=\"application/json\" id=\"tune-data\">{\"pytorch\":[");
    for (size_t i = 0; i < r->npareto_pytorch; i++) {
        sl_text_puts(b, i ? "," : "");
        point_json(b, &r->pareto_pytorch[i], strcmp(r->pareto_pytorch[i].conf, r->pytorch.conf) == 0);
    }
    sl_text_puts(b, "],\"sublet\":[");
    for (size_t i = 0; i < r->npareto_sublet; i++) {
        sl_text_puts(b, i ? "," : "");
        point_json(b, &r->pareto_sublet[i], strcmp(r->pareto_sublet[i].conf, r->sublet.conf) == 0);
    }
    sl_text_puts(b, "],\"current\":");
    point_json(b, &r->current, 0);
    sl_text_puts(b, "}</script>\n<script>\n");
    sl_text_putn(b, sl_report_tune_js, sl_report_tune_js_len);
    sl_text_puts(b, "</script>\n");
}
