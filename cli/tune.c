/* sublet CLI — `sublet tune TRACE... [options]`: search the allocator settings
 * for the smallest device that runs the traces and the fewest device calls
 * (sublet_tune, sublet/tune.h; the workflow in docs/tune.md). */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "sublet/tune.h"

void cli_tune_usage(FILE *out)
{
    fputs("usage: sublet tune TRACE... [options]\n"
          "  Search PyTorch's allocator knobs (max_split_size_mb, max_non_split_rounding_mb,\n"
          "  roundup_power2_divisions, garbage_collection_threshold with a memory fraction,\n"
          "  expandable_segments) and sublet's policies for the settings that run the\n"
          "  traces on the smallest device (2 MiB steps), then with the fewest device calls\n"
          "  on yours.  Prints the best PYTORCH_CUDA_ALLOC_CONF (PyTorch's allocator) and\n"
          "  SUBLET_ALLOC_CONF strings with the evidence, beside the current settings.\n"
          "  Several TRACEs (ranks, batch shapes) get one answer that is safe for all.\n"
          "  TRACE is a PyTorch snapshot (pickle or JSON), an events CSV, an RMM log or a\n"
          "  Kineto trace, gzip'd or not.  Each TRACE is loaded whole (64 bytes an event:\n"
          "  640 MB at 10^7) and replayed a few hundred times: 10^6 events took ~3 CPU-\n"
          "  minutes; for longer runs tune a window of a few iterations (docs/tune.md,\n"
          "  \"Long traces\"); `sublet mincap` and `replay --conf` stream any length.\n"
          "options:\n"
          "  --device-memory SIZE  your device (cost is measured there), e.g. 80GiB, 24GB;\n"
          "                        default: the device the traces recorded, else 80GiB\n"
          "  --cost-model M        a FILE of key=value lines, or a key=value,... list, on top\n"
          "                        of the defaults (µs): malloc_us=35 malloc_us_per_gib=64\n"
          "                        free_us=35 retry_us=1000 reserve_us=10 release_us=10\n"
          "                        map_us=35 unmap_us=35 (per page); see docs/tune.md\n"
          "  --current CONF        the settings the run used (default: what the trace\n"
          "                        recorded, else PyTorch's defaults)\n"
          "  --band PCT            memory within PCT % of the best counts as best\n"
          "                        (default 0.5)\n"
          "  --prelude MODE        state before the recording: adopt (PyTorch's segments as\n"
          "                        recorded), allocate (live blocks allocated under each\n"
          "                        setting) or auto: adopt under the native policy without\n"
          "                        expandable segments, allocate otherwise (default auto)\n"
          "  --threads N           parallel replays (default: every online core)\n"
          "  --pytorch-version X   replay every candidate under PyTorch release X's rules\n"
          "                        and answer with strings X takes (2.6, ...; default the\n"
          "                        newest; docs/versions.md, docs/tune.md)\n"
          "  --no-warmup           skip the warm-up plan (the segments to reserve at start so\n"
          "                        that the run makes no device allocation: the `warmup`\n"
          "                        option of SUBLET_ALLOC_CONF)\n"
          "  --json                print one JSON object instead of the text report\n"
          "  -h, --help            this text\n",
          out);
}

static const char *fmt_gib(uint64_t n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.2f GiB", (double)n / (double)((uint64_t)1 << 30));
    return buf;
}

/* Print s left-aligned in `width` columns (UTF-8 aware), then a space. */
static void cell(const char *s, int width)
{
    int w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        w += (*p & 0xc0) != 0x80;
    fputs(s, stdout);
    for (; w < width; w++)
        fputc(' ', stdout);
    fputc(' ', stdout);
}

static void row(const char *label, const char *a, const char *b, const char *c)
{
    fputs("  ", stdout);
    cell(label, 28);
    cell(a, 20);
    cell(b, 20);
    fputs(c, stdout);
    fputc('\n', stdout);
}

static const char *show_conf(const char *c) { return c && *c ? c : "\"\" (PyTorch's defaults)"; }

/* The progress line (stderr on a terminal only): phase, events replayed,
 * candidates left, time left. */
static void progress(void *user, const sublet_tune_progress *p)
{
    (void)user;
    char left[32] = "?";
    if (p->seconds_left >= 0)
        snprintf(left, sizeof left, "%.0f s", p->seconds_left);
    fprintf(stderr, "\r\033[Ktuning: %s, %" PRIu64 " replays, %.1fM events, %zu candidates left, ~%s left",
            p->phase, p->replays, (double)p->events / 1e6, p->candidates_left, left);
    fflush(stderr);
}

/* Ctrl-C: the flag the search polls (a signal handler can only reach a
 * static); a second Ctrl-C ends the process at once (SA_RESETHAND). */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int cancel_poll(void *user)
{
    (void)user;
    return interrupted != 0;
}

static void catch_sigint(sublet_tune_options *o)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) == 0) {
        o->cancel = cancel_poll;
        o->cancel_user = NULL;
    }
}

/* After Ctrl-C: the best answers the search had found. */
static void print_best_so_far(const sublet_tune_result *r)
{
    printf("interrupted: the best found so far (not checked, no plan)\n");
    for (int w = 0; w < 2; w++) {
        const sublet_tune_eval *e = w == 0 ? &r->pytorch : &r->sublet;
        if (!(r->partial & (1u << w)))
            continue;
        char m[32];
        printf("  %s=%s  min capacity %s, cost %.1f ms\n",
               w == 0 ? "PYTORCH_CUDA_ALLOC_CONF" : "SUBLET_ALLOC_CONF", e->conf,
               sl_fmt_mib(e->min_capacity_bytes, m, sizeof m), e->cost_us / 1000.0);
    }
    if (!r->partial)
        printf("  none yet (every setting's cost replay comes first)\n");
}

/* ---- text -------------------------------------------------------------------------- */

static void row_size(const char *label, uint64_t a, uint64_t b, uint64_t c)
{
    char x[32], y[32], z[32];
    row(label, sl_fmt_mib(a, x, sizeof x), sl_fmt_mib(b, y, sizeof y), sl_fmt_mib(c, z, sizeof z));
}

static void row_u64(const char *label, uint64_t a, uint64_t b, uint64_t c)
{
    char x[32], y[32], z[32];
    snprintf(x, sizeof x, "%" PRIu64, a);
    snprintf(y, sizeof y, "%" PRIu64, b);
    snprintf(z, sizeof z, "%" PRIu64, c);
    row(label, x, y, z);
}

static void vs_current(const sublet_tune_eval *a, const sublet_tune_eval *cur)
{
    char b1[32], b2[32];
    int64_t dm = (int64_t)a->min_capacity_bytes - (int64_t)cur->min_capacity_bytes;
    double dc = a->cost_us - cur->cost_us;
    printf("  vs current: min capacity %s%s (%+.2f %%), cost %s%s",
           dm < 0 ? "-" : "+", sl_fmt_mib((uint64_t)(dm < 0 ? -dm : dm), b1, sizeof b1),
           cur->min_capacity_bytes ? 100.0 * (double)dm / (double)cur->min_capacity_bytes : 0.0,
           dc < 0 ? "-" : "+", sl_fmt_us(dc < 0 ? -dc : dc, b2, sizeof b2));
    if (cur->cost_us > 0 && a->cost_us > 1.5 * cur->cost_us)
        printf(" (%.1fx: a trade-off, memory for device calls)", a->cost_us / cur->cost_us);
    printf("\n");
}

/* A min capacity whose probes were not monotone (docs/replay.md): said. */
static void print_monotone(const sublet_tune_eval *e, size_t n)
{
    char b1[32], b2[32], which[48] = "";
    for (size_t i = 0; i < e->ntraces; i++) {
        const sublet_tune_trace_eval *t = &e->per_trace[i];
        if (t->monotone || !t->min_capacity_bytes)
            continue;
        if (n > 1)
            snprintf(which, sizeof which, " of trace [%zu]", i);
        printf("  min capacity%s not monotone: %s ran, but sizes between it and %s failed "
               "(`sublet mincap` lists them)\n",
               which, sl_fmt_mib(t->smallest_ok_bytes, b1, sizeof b1),
               sl_fmt_mib(t->min_capacity_bytes, b2, sizeof b2));
    }
}

/* The answer checked on the user's device (its evaluation replayed the
 * whole trace there), and a min capacity that is not monotone. */
static void print_check(const sublet_tune_eval *e, const sublet_tune_result *r, size_t n)
{
    char b1[32], b2[32];
    const char *src = r->device_source == SUBLET_TUNE_DEVICE_GIVEN ? "--device-memory"
                      : r->device_source == SUBLET_TUNE_DEVICE_RECORDED
                          ? "recorded in the trace"
                          : "the default: none given or recorded";
    printf("  on your device (%s, %s): ", fmt_gib(r->device_memory, b1, sizeof b1), src);
    if (e->fits) {
        printf("checked, the whole run replayed without an OOM (peak reserved %s)\n",
               sl_fmt_mib(e->peak_reserved_bytes, b2, sizeof b2));
    } else {
        printf("OUT OF MEMORY");
        for (size_t i = 0; i < e->ntraces; i++) {
            const sublet_tune_trace_eval *t = &e->per_trace[i];
            if (t->fits)
                continue;
            if (t->first_oom_event != SUBLET_REPLAY_NONE)
                printf(" at event %" PRIu64, t->first_oom_event);
            else
                printf(" rebuilding the prelude");
            if (n > 1)
                printf(" of trace [%zu]", i);
            break;
        }
        printf(": NOT recommended for this device (no setting searched runs there; this one "
               "needs %s)\n", sl_fmt_mib(e->min_capacity_bytes, b2, sizeof b2));
    }
    print_monotone(e, n);
}

static void print_cause(const char *cause, size_t trace, size_t n, const sublet_tune_eval *a,
                        const sublet_tune_eval *cur)
{
    if (cause[0] && n > 1)
        printf("  fixes, in trace [%zu]: %s\n", trace, cause);
    else if (cause[0])
        printf("  fixes: %s\n", cause);
    else if (strcmp(a->conf, cur->conf) == 0)
        printf("  fixes: nothing: the current settings are already the answer\n");
    else
        printf("  fixes: no difference in segments or at the minimum device was found\n");
}

static void print_pareto(const char *title, const sublet_tune_eval *p, size_t n,
                         const sublet_tune_eval *answer)
{
    char b1[32], b2[32], b3[32], code[96];
    printf("  %s\n", title);
    printf("    ");
    cell("min capacity", 12);
    cell("overhead", 9);
    cell("cost", 10);
    cell("calls", 6);
    printf("settings\n");
    for (size_t i = 0; i < n; i++) {
        int is = strcmp(p[i].conf, answer->conf) == 0;
        char ov[32], calls[32];
        snprintf(ov, sizeof ov, "%+.2f %%", p[i].overhead * 100);
        snprintf(calls, sizeof calls, "%" PRIu64, p[i].device_calls);
        printf("  %s ", is ? "*" : " ");
        cell(sl_fmt_mib(p[i].min_capacity_bytes, b1, sizeof b1), 12);
        cell(ov, 9);
        cell(sl_fmt_us(p[i].cost_us, b2, sizeof b2), 10);
        cell(calls, 6);
        printf("%s", p[i].conf[0] ? p[i].conf : "\"\"");
        if (sl_view_fraction_code(&p[i], code, sizeof code))
            printf(" + %s", code);
        if (!is && answer->min_capacity_bytes) {
            if (p[i].min_capacity_bytes < answer->min_capacity_bytes && answer->cost_us > 0)
                printf("   saves %s for %.1fx the cost",
                       sl_fmt_mib(answer->min_capacity_bytes - p[i].min_capacity_bytes, b3,
                                sizeof b3),
                       p[i].cost_us / answer->cost_us);
            else if (p[i].min_capacity_bytes > answer->min_capacity_bytes)
                printf("   %s cheaper, needs %s more",
                       sl_fmt_us(answer->cost_us - p[i].cost_us, b2, sizeof b2),
                       sl_fmt_mib(p[i].min_capacity_bytes - answer->min_capacity_bytes, b3,
                                sizeof b3));
        }
        printf("\n");
    }
}

static void print_plan(const sublet_tune_plan *p, const sublet_tune_result *r,
                       const sublet_tune_options *o)
{
    if (!o->warmup)
        return;
    char b1[32], b2[32], b3[32];
    const char *whose = strcmp(p->conf, r->sublet.conf) == 0 ? "" : " (for the PyTorch answer)";
    if (!sl_view_plan_helps(p)) {
        printf("\nwarm-up plan%s: none helps here%s%s\n", whose, p->note[0] ? ": " : "",
               p->note);
        return;
    }
    printf("\nwarm-up plan%s: reserve it at start-up, and the run makes no device allocation\n"
           "  SUBLET_ALLOC_CONF=%s\n",
           whose, p->env);
    uint64_t segs = 0;
    for (size_t i = 0; i < p->nentries; i++)
        segs += p->entries[i].count;
    sublet_settings ps;
    sublet_settings_default(&ps);
    (void)sublet_settings_parse(&ps, p->conf, NULL, 0);
    printf("  reserved at start: %s %s %" PRIu64 " %s (the run's peak reserved: %s without the "
           "plan, %s with it)\n",
           sl_fmt_mib(p->plan_bytes, b1, sizeof b1), ps.expandable_segments ? "of pages in" : "in",
           segs,
           ps.expandable_segments ? (segs == 1 ? "pool" : "pools")
                                  : (segs == 1 ? "segment" : "segments"),
           sl_fmt_mib(p->peak_reserved_bytes, b2, sizeof b2),
           sl_fmt_mib(p->peak_reserved_with_plan, b3, sizeof b3));
    printf("  device allocations during the run: %" PRIu64 " -> %" PRIu64 " (checked by replay)\n",
           p->device_allocs_before, p->device_allocs_after);
    printf("  device calls during the run: %" PRIu64 " -> %" PRIu64 ", cost %s -> %s; the plan's "
           "own: %" PRIu64 " call%s, %s, once at start-up\n",
           p->device_calls_before, p->device_calls_after, sl_fmt_us(p->cost_before_us, b1, sizeof b1),
           sl_fmt_us(p->cost_after_us, b2, sizeof b2), p->plan_calls, p->plan_calls == 1 ? "" : "s",
           sl_fmt_us(p->plan_cost_us, b3, sizeof b3));
    printf("  fits your device (%s): yes\n", fmt_gib(r->device_memory, b1, sizeof b1));
    if (p->note[0])
        printf("  note: %s\n", p->note);
}

static void print_text(char **paths, size_t n, const sublet_tune_result *r,
                       const sublet_tune_options *o)
{
    const sublet_tune_eval *c = &r->current, *p = &r->pytorch, *s = &r->sublet;
    char b1[32], b2[32], b3[32], x[32], y[32], z[32];
    printf("sublet tune: %zu trace%s, device %s%s; %zu settings (%zu distinct), %" PRIu64
           " replays, %.2f s\n",
           n, n == 1 ? "" : "s", fmt_gib(r->device_memory, b1, sizeof b1),
           o->device_memory ? "" : " (default)", r->space, r->distinct, r->replays, r->seconds);
    printf("cost model (µs): cudaMalloc %g + %g/GiB, cudaFree %g, retry %g, VA reserve %g, "
           "release %g, map %g/page, unmap %g/page\n\n",
           o->cost.malloc_us, o->cost.malloc_us_per_gib, o->cost.free_us, o->cost.retry_us,
           o->cost.reserve_us, o->cost.release_us, o->cost.map_us, o->cost.unmap_us);
    if (o->pytorch_version)
        printf("every replay under PyTorch %s's rules (--pytorch-version; docs/versions.md)\n\n",
               o->pytorch_version);
    if (r->private_pool_traces)
        printf("private pools (CUDA graphs, MemPool) in %zu of the traces: kept as recorded, every "
               "allocation replayed in its own pool under every setting; policy:stitch (no "
               "private pools) left out\n\n",
               r->private_pool_traces);
    row("", "current", "PyTorch knobs", "sublet");
    row("settings recorded", r->current_recorded ? "yes" : "no", "", "");
    row_size(n > 1 ? "min capacity (max of traces)" : "min capacity", c->min_capacity_bytes,
             p->min_capacity_bytes, s->min_capacity_bytes);
    char lbl[64];
    snprintf(lbl, sizeof lbl, "  over peak live %s", sl_fmt_mib(c->peak_requested_bytes, b1, sizeof b1));
    snprintf(x, sizeof x, "%+.2f %%", c->overhead * 100);
    snprintf(y, sizeof y, "%+.2f %%", p->overhead * 100);
    snprintf(z, sizeof z, "%+.2f %%", s->overhead * 100);
    row(lbl, x, y, z);
    snprintf(lbl, sizeof lbl, "peak reserved on %s", fmt_gib(r->device_memory, b1, sizeof b1));
    row_size(lbl, c->peak_reserved_bytes, p->peak_reserved_bytes, s->peak_reserved_bytes);
    sublet_tune_calls cc, pc, sc;
    sl_tune_calls_sum(c, &cc);
    sl_tune_calls_sum(p, &pc);
    sl_tune_calls_sum(s, &sc);
    row_u64("device calls", c->device_calls, p->device_calls, s->device_calls);
#define ROW2(label, f1, f2)                                                                 \
    do {                                                                                    \
        snprintf(x, sizeof x, "%" PRIu64 " / %" PRIu64, cc.f1, cc.f2);                     \
        snprintf(y, sizeof y, "%" PRIu64 " / %" PRIu64, pc.f1, pc.f2);                     \
        snprintf(z, sizeof z, "%" PRIu64 " / %" PRIu64, sc.f1, sc.f2);                     \
        row(label, x, y, z);                                                                \
    } while (0)
    ROW2("  cudaMalloc / cudaFree", segment_allocs, segment_frees);
    ROW2("  VA reserve / release", va_reserves, va_releases);
    ROW2("  map / unmap calls", va_maps, va_unmaps);
    ROW2("  pages mapped / unmapped", map_pages, unmap_pages);
#undef ROW2
    row_u64("allocation retries", c->retries, p->retries, s->retries);
    row("cost (model)", sl_fmt_us(c->cost_us, x, sizeof x), sl_fmt_us(p->cost_us, y, sizeof y),
        sl_fmt_us(s->cost_us, z, sizeof z));
    row("runs on your device", c->fits ? "yes" : "NO", p->fits ? "yes" : "NO",
        s->fits ? "yes" : "NO");

    if (n > 1) {
        printf("\nper trace (min capacity / cost):\n");
        for (size_t i = 0; i < n; i++) {
            const sublet_tune_trace_eval *ct = &c->per_trace[i], *pt = &p->per_trace[i],
                                         *st = &s->per_trace[i];
            printf("  [%zu] %s\n", i, paths[i]);
            printf("      peak live %s; current %s (%+.2f %%) %s; PyTorch knobs %s (%+.2f %%) "
                   "%s; sublet %s (%+.2f %%) ",
                   sl_fmt_mib(ct->peak_requested_bytes, b1, sizeof b1),
                   sl_fmt_mib(ct->min_capacity_bytes, b2, sizeof b2), ct->overhead * 100,
                   sl_fmt_us(ct->cost_us, b3, sizeof b3),
                   sl_fmt_mib(pt->min_capacity_bytes, x, sizeof x), pt->overhead * 100,
                   sl_fmt_us(pt->cost_us, y, sizeof y),
                   sl_fmt_mib(st->min_capacity_bytes, z, sizeof z), st->overhead * 100);
            printf("%s\n", sl_fmt_us(st->cost_us, b3, sizeof b3));
        }
    }

    printf("\ncurrent:\n  %s\n", show_conf(c->conf));
    print_monotone(c, n);
    printf("\nPYTORCH_CUDA_ALLOC_CONF=%s\n", p->conf);
    char code[96], note[512];
    if (sl_view_fraction_code(p, code, sizeof code))
        printf("  and before the first CUDA allocation: %s\n", code);
    printf("  %s\n", sl_view_release_note(p, o->pytorch_version, note, sizeof note));
    if (!p->conf[0])
        printf("  (PyTorch's defaults are already the best of the PyTorch knobs here)\n");
    vs_current(p, c);
    print_check(p, r, n);
    print_cause(r->pytorch_cause, r->pytorch_cause_trace, n, p, c);
    printf("\nSUBLET_ALLOC_CONF=%s\n", s->conf);
    vs_current(s, c);
    print_check(s, r, n);
    print_cause(r->sublet_cause, r->sublet_cause_trace, n, s, c);

    print_plan(&r->plan, r, o);

    printf("\ntrade-offs: min capacity against cost, the Pareto set (* = the answer)\n");
    print_pareto("PyTorch knobs:", r->pareto_pytorch, r->npareto_pytorch, p);
    print_pareto("all (SUBLET_ALLOC_CONF):", r->pareto_sublet, r->npareto_sublet, s);
}

/* ---- the command ------------------------------------------------------------------- */

static int read_cost_model(const char *prog, const char *arg, sublet_tune_cost_model *m)
{
    char err[512];
    uint8_t *buf = NULL;
    size_t len = 0;
    const char *text = arg;
    FILE *f = strchr(arg, '=') ? NULL : fopen(arg, "rb");
    if (f) {
        fclose(f);
        if (sublet_input_read(arg, &buf, &len, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "%s: %s\n", prog, err);
            return -1;
        }
        char *t = realloc(buf, len + 1);
        if (!t) {
            free(buf);
            fprintf(stderr, "%s: out of memory\n", prog);
            return -1;
        }
        t[len] = '\0';
        buf = (uint8_t *)t;
        text = t;
    } else if (!strchr(arg, '=')) {
        fprintf(stderr, "%s: --cost-model: no such file, and not a key=value list: %s\n", prog,
                arg);
        return -1;
    }
    sublet_status st = sublet_tune_cost_model_parse(m, text, err, sizeof err);
    free(buf);
    if (st != SUBLET_OK) {
        const char *why = strncmp(err, "cost model: ", 12) == 0 ? err + 12 : err;
        fprintf(stderr, "%s: --cost-model '%s': %s\n", prog, arg, why);
        return -1;
    }
    return 0;
}

/* The search options `sublet tune` and `sublet report --tune` share: 1 when
 * argv[*i] was one (its value consumed), 0 when not, -CLI_USAGE or
 * -CLI_ERROR (the message printed, prefixed with prog). */
int cli_tune_option(const char *prog, int argc, char **argv, int *i, sublet_tune_options *o)
{
    int m = 0;
    const char *v;
    if (strcmp(argv[*i], "--no-warmup") == 0) {
        o->warmup = 0;
        return 1;
    }
    if ((v = cli_opt_value(argc, argv, i, "--cost-model", &m)) || m) {
        if (!v) {
            fprintf(stderr, "%s: --cost-model needs a value\n", prog);
            return -CLI_USAGE;
        }
        return read_cost_model(prog, v, &o->cost) == 0 ? 1 : -CLI_ERROR;
    }
    if ((v = cli_opt_value(argc, argv, i, "--band", &m)) || m) {
        char *end = NULL;
        double b = v ? strtod(v, &end) : -1;
        if (!v || end == v || *end || !(b > 0) || b >= 100) {
            fprintf(stderr, "%s: --band needs a percentage in (0, 100)\n", prog);
            return -CLI_USAGE;
        }
        o->band = b / 100.0;
        return 1;
    }
    if ((v = cli_opt_value(argc, argv, i, "--prelude", &m)) || m) {
        if (v && strcmp(v, "auto") == 0)
            o->prelude = SUBLET_PRELUDE_AUTO;
        else if (v && strcmp(v, "adopt") == 0)
            o->prelude = SUBLET_PRELUDE_ADOPT;
        else if (v && strcmp(v, "allocate") == 0)
            o->prelude = SUBLET_PRELUDE_ALLOCATE;
        else {
            fprintf(stderr, "%s: --prelude needs auto, adopt or allocate\n", prog);
            return -CLI_USAGE;
        }
        return 1;
    }
    if ((v = cli_opt_value(argc, argv, i, "--threads", &m)) || m) {
        char *end = NULL;
        long t = v ? strtol(v, &end, 10) : 0;
        if (!v || end == v || *end || t < 1 || t > 64) {
            fprintf(stderr, "%s: --threads needs a number from 1 to 64\n", prog);
            return -CLI_USAGE;
        }
        o->threads = (unsigned)t;
        return 1;
    }
    return 0;
}

int cli_tune(int argc, char **argv)
{
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    o.pytorch_version = cli_pytorch_version();
    int json = 0;
    const char *current = NULL;
    char **paths = calloc((size_t)argc, sizeof *paths);
    if (!paths)
        return CLI_ERROR;
    size_t n = 0;
    int rc = CLI_OK;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m = 0;
        const char *v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_tune_usage(stdout);
            free(paths);
            return CLI_OK;
        }
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        char why[160];
        int src = cli_source_option(argc, argv, &i, NULL, &o.device_memory, NULL, why, sizeof why);
        if (src < 0) {
            fprintf(stderr, "sublet tune: %s\n", why);
            rc = CLI_USAGE;
            break;
        }
        if (src > 0)
            continue;
        int tr = cli_tune_option("sublet tune", argc, argv, &i, &o);
        if (tr < 0) {
            rc = -tr;
            break;
        }
        if (tr > 0)
            continue;
        if ((v = cli_opt_value(argc, argv, &i, "--current", &m)) || m) {
            if (!v) {
                fprintf(stderr, "sublet tune: --current needs a settings string\n");
                rc = CLI_USAGE;
                break;
            }
            sublet_settings s;
            sublet_settings_default(&s);
            char err[256];
            if (sublet_settings_parse(&s, v, err, sizeof err) != SUBLET_OK) {
                fprintf(stderr, "sublet tune: --current: %s\n", err);
                rc = CLI_USAGE;
                break;
            }
            current = v;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "sublet tune: unknown option '%s'\n", a);
            rc = CLI_USAGE;
            break;
        }
        paths[n++] = argv[i];
    }
    if (rc == CLI_OK && n == 0) {
        fprintf(stderr, "sublet tune: no trace given\n");
        rc = CLI_USAGE;
    }
    if (rc == CLI_OK && n > 64) {
        fprintf(stderr, "sublet tune: at most 64 traces\n");
        rc = CLI_USAGE;
    }
    if (rc != CLI_OK) {
        if (rc == CLI_USAGE)
            cli_tune_usage(stderr);
        free(paths);
        return rc;
    }
    sublet_trace **traces = calloc(n, sizeof *traces);
    const char **cur = calloc(n, sizeof *cur);
    if (!traces || !cur) {
        free(paths);
        free(traces);
        free(cur);
        return CLI_ERROR;
    }
    for (size_t i = 0; i < n && rc == CLI_OK; i++) {
        char err[1024];
        if (cli_load_input(paths[i], NULL, &traces[i], NULL, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet tune: %s\n", err);
            rc = CLI_ERROR;
        }
        cur[i] = current;
    }
    if (rc == CLI_OK) {
        o.current = cur;
        if (!json && isatty(STDERR_FILENO)) {
            o.progress_to = progress;
            o.progress_user = NULL;
        }
        if (!json)
            catch_sigint(&o);
        if (json) {
            char *doc = NULL, err[1024] = "";
            sublet_status st = sublet_tune_json((const sublet_trace *const *)traces,
                                                (const char *const *)paths, n, &o, &doc, err,
                                                sizeof err);
            if (st != SUBLET_OK) {
                fprintf(stderr, "sublet tune: %s\n", err[0] ? err : sublet_status_text(st));
                rc = CLI_ERROR;
            } else
                fputs(doc, stdout);
            sublet_string_free(doc);
        } else {
            sublet_tune_result r;
            sublet_status st = sublet_tune((const sublet_trace *const *)traces, n, &o, &r);
            if (o.progress_to)
                fprintf(stderr, "\r\033[K");
            if (st == SUBLET_ERR_CANCELLED) {
                print_best_so_far(&r);
                rc = CLI_ERROR;
            } else if (st != SUBLET_OK) {
                fprintf(stderr, "sublet tune: %s\n", r.error[0] ? r.error : sublet_status_text(st));
                rc = CLI_ERROR;
            } else {
                print_text(paths, n, &r, &o);
            }
            sublet_tune_result_free(&r);
        }
    }
    for (size_t i = 0; i < n; i++)
        if (traces[i])
            cli_trace_free(traces[i]);
    free(traces);
    free(cur);
    free(paths);
    return rc;
}
