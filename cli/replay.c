/* sublet CLI — `sublet replay TRACE [options]`: drive a recorded trace (any
 * format sublet_trace_parse reads, detected by content) through the engine
 * on the sim backend and report memory, counts and fidelity against
 * PyTorch's own decisions; optionally write the replayed allocator's
 * snapshot. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sublet/replay.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

void cli_replay_usage(FILE *out)
{
    fputs("usage: sublet replay TRACE [options]\n"
          "  Replay a recorded allocation trace through the engine (sim backend) and\n"
          "  compare every decision with PyTorch's.  TRACE is an events CSV, a PyTorch\n"
          "  snapshot (pickle or JSON), an RMM log or a Kineto trace, gzip'd or not\n"
          "  (detected by content); '-' reads stdin.\n"
          "options:\n"
          "  --conf STR            allocator settings (PYTORCH_CUDA_ALLOC_CONF grammar);\n"
          "                        default: the settings the trace recorded, else PyTorch's\n"
          "                        defaults (the environment is not read)\n"
          "  --snapshot-out FILE   record the replay and write the replayed allocator's\n"
          "                        snapshot (segments, blocks and trace) after the last\n"
          "                        event: FILE.pickle/.pkl or FILE.json, optionally .gz\n"
          "  --device-memory SIZE  simulated device capacity, e.g. 80GiB, 24GB (default 80GiB)\n"
          "  --json                print one JSON object instead of the text report\n"
          "  --at N                stop after event N (0-based index, prelude rows included)\n"
          "  --stop-on-oom         stop at the first OOM\n"
          "  --replay-ooms         ask the engine again each request PyTorch recorded as\n"
          "                        an OOM (a snapshot's oom rows); it must fail too (use\n"
          "                        the recording's device size and settings)\n"
          "  --device-base ADDR    the simulated device's addresses start at ADDR (hex or\n"
          "                        decimal; default far from any recording's): what no\n"
          "                        row places goes at the lowest free address from\n"
          "                        there; 0x200000000000 for a recording made on sublet's\n"
          "                        null device (sublet nullgpu)\n"
          "  --min-capacity        find by bisection (2 MiB steps) the smallest simulated\n"
          "                        device that runs the trace without OOM under these\n"
          "                        options (--conf, --prelude, --at, placement), and its\n"
          "                        overhead over peak live bytes (as `sublet mincap`)\n"
          "  --check               verify every allocator invariant after each event\n"
          "  --no-placement-hints  let the sim place new segments itself instead of at\n"
          "                        the recorded addresses\n"
          "  --prelude MODE        the state before a mid-run recording's first event:\n"
          "                        'adopt' PyTorch's segments and blocks as recorded,\n"
          "                        'allocate' the live blocks through the engine, or\n"
          "                        'auto': adopt under the native policy without\n"
          "                        expandable segments, allocate otherwise (default auto;\n"
          "                        a trace recorded mid-run under expandable segments is\n"
          "                        refused unless 'allocate' is given)\n"
          CLI_HELP_PYTORCH_VERSION
          "  -h, --help            this text\n",
          out);
}

typedef struct cli_ctx {
    int defer; /* keep the OOM lines for after the header (a streamed replay) */
    sl_oom_list ooms;
    sublet_frag_state *frag;     /* the state after the last event driven */
    sublet_frag_diagnosis diag;  /* when the replay had OOMs */
    int have_diag;
} cli_ctx;

/* Print an engine message on one logical line group: continuation lines are
 * indented under the first. */
static void print_indented(FILE *out, const char *msg)
{
    for (const char *p = msg; *p; p++) {
        fputc(*p, out);
        if (*p == '\n' && p[1])
            fputs("    ", out);
    }
}

static void on_oom(void *user, uint64_t event, uint64_t line, uint64_t size, sublet_stream stream,
                   const char *message)
{
    cli_ctx *c = user;
    if (!c->defer) {
        printf("event %" PRIu64 ": alloc of %" PRIu64 " bytes on stream %" PRIu64 " failed: ",
               event, size, stream);
        print_indented(stdout, message);
        fputc('\n', stdout);
        return;
    }
    sl_oom_list_push(&c->ooms, event, line, size, stream, message);
}

static void ctx_free(cli_ctx *c)
{
    sl_oom_list_free(&c->ooms);
    sublet_frag_state_free(c->frag);
    if (c->have_diag)
        sublet_frag_diagnosis_free(&c->diag);
}

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 100.0; }

static const char *fmt_size(uint64_t n, char *buf, size_t cap)
{
    sublet_format_size(n, buf, cap);
    return buf;
}

/* The deferred OOM lines, as on_oom prints them. */
static void print_deferred_ooms(const cli_ctx *c)
{
    for (size_t i = 0; i < c->ooms.n; i++) {
        const sl_oom_rec *x = &c->ooms.v[i];
        printf("event %" PRIu64 ": alloc of %" PRIu64 " bytes on stream %" PRIu64 " failed: ",
               x->event, x->size, x->stream);
        print_indented(stdout, x->message);
        fputc('\n', stdout);
    }
}

/* What the report says about the trace: from the trace loaded whole, or
 * gathered while a stream was replayed (the rows the report names kept as
 * they were driven, by keep_named_rows). */
typedef struct trace_facts {
    const sublet_trace *t; /* NULL: streamed */
    uint64_t rows, prelude, pre_segments, pre_allocs;
    sublet_trace_format format;
    const sublet_replay_result *r; /* streamed: the result being filled */
    uint64_t kept_idx[4];
    sublet_trace_event kept[4];
    int nkept;
} trace_facts;

static void facts_of(const sublet_trace *t, trace_facts *f)
{
    memset(f, 0, sizeof *f);
    f->t = t;
    f->rows = sublet_trace_count(t);
    f->prelude = sublet_trace_prelude_count(t);
    f->pre_segments = sublet_trace_count_kind(t, SUBLET_TRACE_PRE_SEGMENT);
    f->pre_allocs = sublet_trace_count_kind(t, SUBLET_TRACE_PRE_ALLOC);
    f->format = sublet_trace_source_format(t);
}

static const sublet_trace_event *facts_at(const trace_facts *f, uint64_t idx)
{
    if (f->t)
        return sublet_trace_at(f->t, (size_t)idx);
    for (int k = 0; k < f->nkept; k++)
        if (f->kept_idx[k] == idx)
            return &f->kept[k];
    return NULL;
}

/* after_event of a streamed replay: keep the rows the report will name. */
static void keep_named_rows(void *user, sublet_allocator *a, uint64_t index,
                            const sublet_trace_event *ev)
{
    (void)a;
    trace_facts *f = user;
    const sublet_replay_fidelity *x = &f->r->fidelity;
    const uint64_t named[4] = {x->first_decision_mismatch, x->first_address_mismatch,
                               x->first_size_mismatch, x->first_empty_cache_mismatch};
    for (int k = 0; k < 4; k++) {
        if (named[k] != index || facts_at(f, index) || f->nkept == 4)
            continue;
        f->kept_idx[f->nkept] = index;
        f->kept[f->nkept++] = *ev;
    }
}

/* ---- the text report -------------------------------------------------------------- */

static void print_event_ref(const trace_facts *t, uint64_t idx)
{
    const sublet_trace_event *e = facts_at(t, idx);
    if (!e) {
        printf("none\n");
        return;
    }
    printf("event %" PRIu64 " (line %" PRIu64 ": %s of %" PRIu64 " bytes at %" PRIu64 ")\n", idx,
           e->line, sublet_trace_kind_name(e->kind), e->size, e->addr);
}

/* " (first: segment_unmap of N bytes at ADDR)", nothing when there is none. */
static void print_release(const sublet_replay_release *x)
{
    if (x->kind == SUBLET_ACT_COUNT)
        return;
    printf(" (first: %s of %" PRIu64 " bytes at %" PRIu64 ")",
           sublet_action_name((sublet_action)x->kind), x->size, x->addr);
}

/* A trace with private pools: the fidelity of each pool, the default pools
 * first (sublet_replay_pool_fidelity). */
static void print_pools(const sublet_replay_options *o, const sublet_replay_result *r)
{
    printf("  per pool:\n");
    for (size_t k = 0; k < r->npools; k++) {
        const sublet_replay_pool_fidelity *p = &r->pools[k];
        const char *kind = !p->pool_id[0] && !p->pool_id[1] ? "default"
                           : p->pool_id[1] == 0             ? "CUDA graph"
                           : p->pool_id[0] == 0             ? "MemPool"
                                                            : "private";
        char id[64];
        snprintf(id, sizeof id, "(%" PRIu64 ", %" PRIu64 ")", p->pool_id[0], p->pool_id[1]);
        printf("    pool %-10s %-10s decisions %" PRIu64 " / %" PRIu64 ", segment sizes %" PRIu64
               " / %" PRIu64 " (engine made %" PRIu64 ")",
               id, kind, p->decisions_matched, p->allocs_compared, p->segment_sizes_matched,
               p->recorded_segment_allocs, p->engine_segment_allocs);
        if (o->placement_hints)
            printf(", addresses %" PRIu64 " / %" PRIu64, p->addresses_matched, p->allocs_compared);
        printf(", segment_free rows %" PRIu64, p->recorded_segment_frees);
        if (p->released_at != SUBLET_REPLAY_NONE)
            printf(", released before event %" PRIu64, p->released_at);
        printf("\n");
        if (p->first_decision_mismatch != SUBLET_REPLAY_NONE)
            printf("      first decision mismatch at event %" PRIu64 "\n", p->first_decision_mismatch);
        if (o->placement_hints && p->first_address_mismatch != SUBLET_REPLAY_NONE)
            printf("      first address mismatch at event %" PRIu64 "\n", p->first_address_mismatch);
    }
    if (r->pools_dropped)
        printf("    (%" PRIu64 " more pools not listed)\n", r->pools_dropped);
}

static void print_text(const char *path, const trace_facts *t, const sublet_replay_options *o,
                       const sublet_replay_result *r)
{
    const sublet_replay_fidelity *f = &r->fidelity;
    char b1[48], b2[48];
    printf("\n== memory_summary at peak reserved (");
    if (r->peak_reserved_event == SUBLET_REPLAY_NONE)
        printf("before the first event) ==\n");
    else
        printf("after event %" PRIu64 ") ==\n", r->peak_reserved_event);
    fputs(r->summary_peak ? r->summary_peak : "", stdout);
    printf("\n== memory_summary at the end (");
    if (r->last_event == SUBLET_REPLAY_NONE)
        printf("no event driven) ==\n");
    else
        printf("after event %" PRIu64 ") ==\n", r->last_event);
    fputs(r->summary_end ? r->summary_end : "", stdout);

    printf("\nreplay of %s\n", path);
    uint64_t npre = t->prelude;
    printf("  events driven:          %" PRIu64 " (%" PRIu64 " prelude rows, %" PRIu64
           " allocs, %" PRIu64 " frees, %" PRIu64 " deferred by stream use, %" PRIu64
           " empty_cache)\n",
           r->events, r->events < npre ? r->events : npre, r->allocs, r->frees, r->deferred_frees,
           r->empty_caches);
    printf("  peak requested:         %" PRIu64 " bytes (%s)\n", r->peak_requested_bytes,
           fmt_size(r->peak_requested_bytes, b1, sizeof b1));
    printf("  peak reserved:          %" PRIu64 " bytes (%s)\n", r->peak_reserved_bytes,
           fmt_size(r->peak_reserved_bytes, b1, sizeof b1));
    printf("  final reserved:         %" PRIu64 " bytes (%s)\n", r->final_reserved_bytes,
           fmt_size(r->final_reserved_bytes, b1, sizeof b1));
    printf("  device allocs / frees:  %" PRIu64 " / %" PRIu64 "\n", r->device_allocs,
           r->device_frees);
    printf("  alloc retries:          %" PRIu64 "\n", r->alloc_retries);
    printf("  OOMs:                   %" PRIu64 "%s\n", r->ooms,
           r->stopped_on_oom ? " (stopped at the first)" : "");
    printf("  rows not applied:       %" PRIu64 "%s%s\n", r->errors, r->errors ? ", first: " : "",
           r->errors ? r->first_error : "");
    printf("fidelity against the recording:\n");
    printf("  decisions matched:      %" PRIu64 " / %" PRIu64 " allocs (%.2f %%)\n",
           f->decisions_matched, f->allocs_compared, pct(f->decisions_matched, f->allocs_compared));
    printf("  segment sizes matched:  %" PRIu64 " / %" PRIu64
           " recorded segment allocs (engine made %" PRIu64 ")\n",
           f->segment_sizes_matched, f->recorded_segment_allocs, f->engine_segment_allocs);
    if (o->placement_hints) {
        printf("  placed as recorded:     %" PRIu64 " / %" PRIu64 " new segments\n",
               f->segments_placed_as_recorded, f->engine_segment_allocs);
        printf("  addresses matched:      %" PRIu64 " / %" PRIu64 " allocs (at PyTorch's address)\n",
               f->addresses_matched, f->allocs_compared);
    }
    if (f->recorded_segment_maps || f->engine_segment_maps) {
        printf("  map sizes matched:      %" PRIu64 " / %" PRIu64
               " allocs PyTorch served by mapping pages (engine mapped for %" PRIu64 ")\n",
               f->map_sizes_matched, f->recorded_segment_maps, f->engine_segment_maps);
        if (o->placement_hints)
            printf("  maps placed as recorded: %" PRIu64 " / %" PRIu64 " allocs (first map at "
                   "PyTorch's address)\n",
                   f->maps_placed_as_recorded, f->engine_segment_maps);
    }
    if (f->empty_caches_compared) {
        printf("  empty_cache releases:   %" PRIu64 " / %" PRIu64 " released the recorded set "
               "(engine: %" PRIu64 " segment frees, %" PRIu64 " unmaps; recorded: %" PRIu64
               " segment_free, %" PRIu64 " segment_unmap rows)\n",
               f->empty_cache_sets_matched, f->empty_caches_compared, f->engine_segment_frees,
               f->engine_segment_unmaps, f->recorded_segment_frees, f->recorded_segment_unmaps);
    }
    int64_t d = (int64_t)(r->peak_reserved_bytes - f->recorded_peak_reserved_bytes);
    printf("  peak reserved:          %" PRIu64 " engine vs %" PRIu64 " recorded (%s vs %s): ",
           r->peak_reserved_bytes, f->recorded_peak_reserved_bytes,
           fmt_size(r->peak_reserved_bytes, b1, sizeof b1),
           fmt_size(f->recorded_peak_reserved_bytes, b2, sizeof b2));
    if (d == 0)
        printf("exact\n");
    else
        printf("differs by %+" PRId64 " bytes\n", d);
    if (f->first_decision_mismatch != SUBLET_REPLAY_NONE) {
        printf("  first decision mismatch: ");
        print_event_ref(t, f->first_decision_mismatch);
    }
    if (o->placement_hints && f->first_address_mismatch != SUBLET_REPLAY_NONE) {
        printf("  first address mismatch: ");
        print_event_ref(t, f->first_address_mismatch);
    }
    if (f->first_size_mismatch != SUBLET_REPLAY_NONE) {
        printf("  first size mismatch:    ");
        print_event_ref(t, f->first_size_mismatch);
    }
    if (r->npools)
        print_pools(o, r);
    if (f->first_empty_cache_mismatch != SUBLET_REPLAY_NONE) {
        const sublet_replay_release_diff *x = &f->empty_cache_mismatch;
        const sublet_trace_event *e = facts_at(t, f->first_empty_cache_mismatch);
        printf("  first release mismatch: event %" PRIu64 " (line %" PRIu64 "): recorded %" PRIu64
               ", engine %" PRIu64 "; %" PRIu64 " only recorded",
               f->first_empty_cache_mismatch, e ? e->line : 0, x->recorded, x->engine,
               x->only_recorded);
        print_release(&x->first_only_recorded);
        printf(", %" PRIu64 " only by the engine", x->only_engine);
        print_release(&x->first_only_engine);
        printf("\n");
    }
}

/* ---- the JSON report: sublet_replay_json ------------------------------------------------ */

typedef struct write_ctx {
    const char *path;
    sublet_view_options *v;
    char werr[1024];
} write_ctx;

/* After the last event: the replayed allocator's snapshot, written to
 * --snapshot-out (then named in the document). */
static void write_at_finish(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st)
{
    (void)last_event;
    (void)st;
    write_ctx *c = user;
    sublet_snapshot *snap = NULL;
    sublet_status ts = a ? sublet_snapshot_take(a, &snap) : SUBLET_ERR_INVALID_ARGUMENT;
    if (ts != SUBLET_OK)
        snprintf(c->werr, sizeof c->werr, "%s: no snapshot was taken: %s", c->path,
                 sublet_status_text(ts));
    else if (sublet_snapshot_write(snap, c->path, SUBLET_SNAPSHOT_AUTO, c->werr,
                                   sizeof c->werr) == SUBLET_OK)
        c->v->snapshot_out = c->path;
    sublet_snapshot_free(snap);
}

static int replay_json(const char *path, const sublet_trace *t, sublet_replay_options *o,
                       const char *snap_out)
{
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = path;
    write_ctx wc = {snap_out, &v, ""};
    if (snap_out) {
        cli_record_options(t, o);
        o->on_finish = write_at_finish;
        o->finish_user = &wc;
    }
    char *doc = NULL, err[1024] = "";
    sublet_status st = sublet_replay_json(t, o, &v, &doc, err, sizeof err);
    if (doc)
        fputs(doc, stdout);
    sublet_string_free(doc);
    if (st == SUBLET_OK && err[0])
        fprintf(stderr, "sublet replay: %s\n", err);
    if (st != SUBLET_OK)
        fprintf(stderr, "sublet replay: %s\n", err[0] ? err : sublet_status_text(st));
    else if (snap_out && !v.snapshot_out && !wc.werr[0])
        snprintf(wc.werr, sizeof wc.werr, "%s: no snapshot was taken", snap_out);
    if (wc.werr[0])
        fprintf(stderr, "sublet replay: --snapshot-out: %s\n", wc.werr);
    fflush(stdout);
    return st != SUBLET_OK || wc.werr[0] ? CLI_ERROR : CLI_OK;
}

static void print_header(const char *path, const trace_facts *t, const sublet_replay_options *o,
                         int conf_from_trace)
{
    printf("sublet replay %s\n", path);
    printf("  trace:          %" PRIu64 " rows (%" PRIu64 " prelude: %" PRIu64 " pre_segment, %" PRIu64
           " pre_alloc), %s\n", t->rows, t->prelude, t->pre_segments, t->pre_allocs,
           sublet_trace_format_name(t->format));
    printf("  settings:       %s%s\n", o->conf[0] ? o->conf : "(PyTorch defaults)",
           conf_from_trace ? " (recorded in the trace)" : "");
    char b[48];
    sublet_format_size(o->device_memory, b, sizeof b);
    printf("  device memory:  %s (%" PRIu64 " bytes), sim backend%s\n", b, o->device_memory,
           o->placement_hints ? ", segments placed as recorded when free" : "");
    if (o->stop_after != SUBLET_REPLAY_ALL)
        printf("  stopping after: event %" PRIu64 "\n", o->stop_after);
    fflush(stdout);
}

/* The fragmentation picture and the OOM diagnosis, as text. */
static void print_frag_text(const cli_ctx *c)
{
    if (c->frag) {
        size_t n = sublet_frag_format_text(c->frag, NULL, NULL, 0);
        char *txt = malloc(n + 1);
        if (txt) {
            sublet_frag_format_text(c->frag, NULL, txt, n + 1);
            printf("\n%s", txt);
            free(txt);
        }
    }
    if (c->have_diag)
        cli_print_diagnosis(stdout, &c->diag);
}

/* ---- the streamed replay ------------------------------------------------------------------ */

/* The stream's error, when it has one (a malformed row, a read error). */
static int stream_failed(sublet_trace_stream *ts, char *err, size_t cap)
{
    size_t n;
    return sublet_trace_stream_next(ts, NULL, 0, &n, err, cap) != SUBLET_OK;
}

/* --json over a stream: sublet_replay_stream_json, the document of the
 * whole trace's replay_json byte for byte; a malformed row is reported as
 * when loading (nothing on stdout). */
static int replay_json_streamed(const char *path, sublet_trace_stream *ts,
                                const sublet_replay_options *o)
{
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = path;
    char *doc = NULL, err[1024] = "";
    sublet_status st = sublet_replay_stream_json(ts, o, &v, &doc, err, sizeof err);
    if (!doc) {
        fprintf(stderr, "sublet replay: %s\n", err[0] ? err : sublet_status_text(st));
        return CLI_ERROR;
    }
    if (sublet_trace_stream_notice(ts)) /* an event log's torn tail, lost events */
        fprintf(stderr, "sublet: %s: warning: %s\n", strcmp(path, "-") ? path : "stdin",
                sublet_trace_stream_notice(ts));
    fputs(doc, stdout);
    sublet_string_free(doc);
    if (err[0])
        fprintf(stderr, "sublet replay: %s\n", err);
    fflush(stdout);
    return st != SUBLET_OK ? CLI_ERROR : CLI_OK;
}

/* `sublet replay` over a stream (an events CSV or an event log, without
 * --snapshot-out or --min-capacity): the same report, byte for byte, as
 * from the trace loaded whole, in memory that grows with the live blocks.
 * A malformed row is reported as when loading (nothing on stdout): the rows
 * after the replay's last are read too, to count and check them. */
static int replay_stream_of(const char *path, sublet_trace_stream *ts, const char *conf,
                            sublet_replay_options o, int json);

static int replay_streamed(const char *path, const char *conf, sublet_replay_options o, int json)
{
    char err[1024];
    sublet_trace_stream *ts = NULL, *file = NULL;
    sublet_status st = sublet_trace_stream_open(path, NULL, &ts, err, sizeof err);
    if (st == SUBLET_OK && strcmp(path, "-") == 0) {
        /* standard input is read once, into its binary copy, which rewinds
         * (the fragmentation state and the diagnosis replay it again) */
        file = ts;
        ts = NULL;
        st = sublet_trace_stream_copy(file, &ts, err, sizeof err);
    }
    int rc = CLI_ERROR;
    if (st != SUBLET_OK)
        fprintf(stderr, "sublet replay: %s\n", err[0] ? err : sublet_status_text(st));
    else
        rc = replay_stream_of(path, ts, conf, o, json);
    sublet_trace_stream_close(ts);
    sublet_trace_stream_close(file);
    return rc;
}

static int replay_stream_of(const char *path, sublet_trace_stream *ts, const char *conf,
                            sublet_replay_options o, int json)
{
    char err[1024];
    sublet_status st;
    int conf_from_trace;
    o.conf = cli_conf_for_settings(sublet_trace_stream_settings(ts), conf, &conf_from_trace);
    if (json) {
        return replay_json_streamed(path, ts, &o);
    }
    trace_facts tf = {.format = sublet_trace_stream_format(ts)};
    const sublet_trace_event *pre;
    tf.prelude = sublet_trace_stream_prelude(ts, &pre);
    for (uint64_t i = 0; i < tf.prelude; i++) {
        tf.pre_segments += pre[i].kind == SUBLET_TRACE_PRE_SEGMENT;
        tf.pre_allocs += pre[i].kind == SUBLET_TRACE_PRE_ALLOC;
    }
    cli_ctx c = {.defer = 1};
    sublet_replay_result r;
    tf.r = &r;
    o.on_oom = on_oom;
    o.oom_user = &c;
    o.capture_summary = 1;
    o.after_event = keep_named_rows;
    o.observer_user = &tf;
    char rerr[1024] = "";
    /* the state at the end comes from the same pass */
    sublet_frag_state *end_state = NULL;
    st = sublet_frag_replay_stream(ts, &o, &r, &end_state, rerr, sizeof rerr);
    o.after_event = NULL;
    o.observer_user = NULL;
    /* the rest of the rows: counted and checked, as loading does */
    static sublet_trace_event rest[4096];
    size_t got = 1;
    while (!stream_failed(ts, err, sizeof err) && got)
        if (sublet_trace_stream_next(ts, rest, 4096, &got, err, sizeof err) != SUBLET_OK)
            break;
    if (stream_failed(ts, err, sizeof err)) {
        fprintf(stderr, "sublet replay: %s\n", err);
        sublet_frag_state_free(end_state);
        sublet_replay_result_free(&r);
        ctx_free(&c);
        return CLI_ERROR;
    }
    tf.rows = sublet_trace_stream_rows(ts);
    if (sublet_trace_stream_notice(ts)) /* an event log's torn tail, lost events */
        fprintf(stderr, "sublet: %s: warning: %s\n", strcmp(path, "-") ? path : "stdin",
                sublet_trace_stream_notice(ts));
    const char *failure = st == SUBLET_OK ? NULL : (rerr[0] ? rerr : sublet_status_text(st));
    if (!failure) {
        char ferr[512];
        c.frag = end_state;
        end_state = NULL;
        if (r.ooms && sublet_frag_diagnose_stream(ts, &o, NULL, &c.diag, ferr, sizeof ferr) ==
                          SUBLET_OK)
            c.have_diag = 1;
    }
    print_header(path, &tf, &o, conf_from_trace);
    print_deferred_ooms(&c);
    print_text(path, &tf, &o, &r);
    print_frag_text(&c);
    if (c.ooms.nomem)
        fprintf(stderr, "sublet replay: out of memory recording OOM events; some are missing\n");
    if (failure)
        fprintf(stderr, "sublet replay: %s\n", failure);
    sublet_frag_state_free(end_state); /* kept only when the replay succeeded */
    sublet_replay_result_free(&r);
    ctx_free(&c);
    return failure ? CLI_ERROR : CLI_OK;
}

/* ---- arguments ------------------------------------------------------------------------ */

static int usage_error(const char *fmt, const char *arg)
{
    fputs("sublet replay: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    cli_replay_usage(stderr);
    return CLI_USAGE;
}

int cli_replay(int argc, char **argv)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    const char *path = NULL, *conf = NULL, *snap_out = NULL;
    int json = 0, only_positional = 0, min_capacity = 0;
    char why[160];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m, src;
        const char *v;
        if (only_positional || a[0] != '-' || strcmp(a, "-") == 0) {
            if (path)
                return usage_error("more than one trace given ('%s')", a);
            path = a;
        } else if (strcmp(a, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_replay_usage(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--check") == 0) {
            o.check = 1;
        } else if (strcmp(a, "--stop-on-oom") == 0) {
            o.stop_on_oom = 1;
        } else if (strcmp(a, "--replay-ooms") == 0) {
            o.replay_ooms = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--device-base", &m)) || m) {
            char *end = NULL;
            unsigned long long base = v ? strtoull(v, &end, 0) : 0;
            if (!v || !*v || *end || base == 0 || base % (2u << 20) != 0)
                return usage_error("--device-base: '%s' is not a non-zero address aligned to "
                                   "2 MiB", v ? v : "");
            o.device_base = base;
        } else if (strcmp(a, "--min-capacity") == 0) {
            min_capacity = 1;
        } else if (strcmp(a, "--no-placement-hints") == 0) {
            o.placement_hints = 0;
        } else if ((v = cli_opt_value(argc, argv, &i, "--prelude", &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--prelude");
            int mode;
            if (cli_parse_prelude(v, &mode) != 0)
                return usage_error("--prelude: '%s' is not auto, adopt or allocate", v);
            o.prelude = mode;
        } else if ((src = cli_source_option(argc, argv, &i, &conf, &o.device_memory, NULL, why,
                                            sizeof why)) != 0) {
            if (src < 0)
                return usage_error("%s", why);
        } else if ((v = cli_opt_value(argc, argv, &i, "--snapshot-out", &m)) || m) {
            if (!v || !*v)
                return usage_error("%s needs a value", "--snapshot-out");
            if (sublet_snapshot_format_of_path(v, NULL) == SUBLET_SNAPSHOT_AUTO)
                return usage_error("--snapshot-out: '%s' does not end in .pickle, .pkl or .json "
                                   "(optionally followed by .gz)", v);
            snap_out = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--at", &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--at");
            if (cli_parse_index(v, &o.stop_after) != 0)
                return usage_error("--at: '%s' is not an event index", v);
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!path)
        return usage_error("%s", "no trace given");

    sublet_settings probe;
    sublet_settings_default(&probe);
    char err[1024];
    if (conf && sublet_settings_parse(&probe, conf, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet replay: --conf: %s\n", err);
        return CLI_USAGE;
    }

    /* an events CSV, an event log or an RMM log streams (SUBLET_REPLAY_WHOLE=1:
     * loaded whole, as every other format is) */
    const char *whole = getenv("SUBLET_REPLAY_WHOLE");
    if (!snap_out && !min_capacity && !(whole && *whole && strcmp(whole, "0") != 0)) {
        sublet_trace_format f = sublet_trace_detect_path(path);
        if (cli_format_streams(f, path) || !strcmp(path, "-"))
            return replay_streamed(path, conf, o, json);
    }
    if (min_capacity) { /* before the load: a streamable file streams */
        int rc = cli_min_capacity_streamed("sublet replay", path, conf, &o, 0, json, stdout);
        if (rc >= 0)
            return rc;
    }
    sublet_trace *t = NULL;
    sublet_status st = cli_load_input(path, NULL, &t, NULL, err, sizeof err);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet replay: %s\n", err[0] ? err : sublet_status_text(st));
        return CLI_ERROR;
    }
    int conf_from_trace;
    o.conf = cli_conf_for(t, conf, &conf_from_trace);
    if (min_capacity) {
        /* under every option given: conf, prelude, placement, --at */
        int rc = cli_min_capacity(t, path, &o, 0, json, stdout);
        sublet_trace_free(t);
        return rc;
    }

    if (json) {
        int rc = replay_json(path, t, &o, snap_out);
        cli_trace_free(t);
        return rc;
    }
    cli_ctx c = {0};
    o.on_oom = on_oom;
    o.oom_user = &c;
    o.capture_summary = 1;
    trace_facts tf;
    facts_of(t, &tf);
    print_header(path, &tf, &o, conf_from_trace);
    sublet_replay_result r;
    char rerr[1024] = "";
    sublet_snapshot *snap = NULL;
    if (snap_out)
        st = cli_replay_snapshot(t, &o, &r, &snap, rerr, sizeof rerr);
    else
        st = sublet_replay_run(t, &o, &r, rerr, sizeof rerr);
    const char *failure = st == SUBLET_OK ? NULL : (rerr[0] ? rerr : sublet_status_text(st));
    char werr[1024] = "";
    int wrote = 0;
    if (snap_out && snap) {
        if (sublet_snapshot_write(snap, snap_out, SUBLET_SNAPSHOT_AUTO, werr, sizeof werr) ==
            SUBLET_OK)
            wrote = 1;
    } else if (snap_out && !failure) {
        snprintf(werr, sizeof werr, "%s: no snapshot was taken", snap_out);
    }
    if (!failure) {
        /* the fragmentation picture after the last event, and for each OOM
         * its diagnosis and the settings that avoid it (more replays) */
        char ferr[512];
        /* a replay of its own: its OOMs are those reported already */
        sublet_replay_options fo = o;
        fo.on_oom = NULL;
        fo.oom_user = NULL;
        if (sublet_frag_state_at(t, &fo, o.stop_after, &c.frag, NULL, ferr, sizeof ferr) !=
            SUBLET_OK)
            c.frag = NULL;
        if (r.ooms && sublet_frag_diagnose_trace(t, &o, NULL, &c.diag, ferr, sizeof ferr) ==
                          SUBLET_OK)
            c.have_diag = 1;
    }
    {
        print_text(path, &tf, &o, &r);
        print_frag_text(&c);
        if (wrote)
            printf("snapshot of the replayed allocator: %s (%zu segments, %zu trace entries)\n",
                   snap_out, sublet_snapshot_segment_count(snap),
                   sublet_snapshot_trace_count(snap, sublet_snapshot_device_count(snap) - 1));
    }
    if (failure)
        fprintf(stderr, "sublet replay: %s\n", failure);
    if (werr[0])
        fprintf(stderr, "sublet replay: --snapshot-out: %s\n", werr);
    sublet_snapshot_free(snap);
    sublet_replay_result_free(&r);
    ctx_free(&c);
    cli_trace_free(t);
    return failure || werr[0] ? CLI_ERROR : CLI_OK;
}
