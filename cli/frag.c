/* sublet CLI — `sublet frag FILE`: the fragmentation of a trace or snapshot at
 * any event (metrics, free blocks by size, pinning segments, segment map), and
 * `sublet diagnose FILE`: every OOM of a replay explained, with the settings
 * that would have avoided it.  Also the helpers other commands use to show the
 * same things (cli.h: cli_frag_*, cli_diagnosis_*). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sublet/frag.h"

void cli_frag_usage(FILE *out)
{
    fputs("usage: sublet frag FILE [options]\n"
          "  Fragmentation of a trace or snapshot (any format sublet reads, detected by\n"
          "  content) after event N: the metrics per pool and stream, the free blocks by\n"
          "  size, the segments that pin free memory (with their live blocks and\n"
          "  allocation stacks) and a map of every segment drawn to scale ('#'\n"
          "  allocated, '+' pending free, '.' free).  The trace is replayed through the\n"
          "  engine (sim backend); a snapshot without events is read from its segments.\n"
          "options:\n"
          "  --at N                after event N (0-based, prelude rows included;\n"
          "                        default: the last)\n"
          "  --json                one JSON object with the same content\n"
          "  --device-memory SIZE  simulated device capacity (default: the trace's, else 80GiB)\n"
          "  --conf STR            settings for the replay (default: the trace's)\n"
          "  --width N             columns of the segment map (default 64)\n"
          "  --top N               pinning segments shown (default 5)\n"
          "  --device N            device of a multi-device snapshot\n",
          out);
}

void cli_diagnose_usage(FILE *out)
{
    fputs("usage: sublet diagnose FILE [options]\n"
          "  Replay a trace and explain every OOM: fragmentation (the free bytes would\n"
          "  suffice, no block does) or exhaustion, the segments that pin free memory\n"
          "  with their live blocks and stacks, and which settings avoid it: the trace\n"
          "  is replayed on the same device under each candidate (max_split_size_mb\n"
          "  128/256/512, roundup_power2_divisions, expandable_segments:True,\n"
          "  policy:stitch, garbage_collection_threshold with a memory fraction).\n"
          "options:\n"
          "  --device-memory SIZE  simulated device capacity (default: the trace's, else 80GiB)\n"
          "  --conf STR            base settings (default: the trace's)\n"
          "  --candidate STR       try this setting (repeatable; replaces the default list)\n"
          "  --detailed N          OOMs diagnosed with their pinning segments (default 3)\n"
          "  --json                one JSON object\n",
          out);
}

/* ---- loading ------------------------------------------------------------------------- */

sublet_status cli_frag_load(const char *path, const sublet_trace_load_options *lo, sublet_trace **t,
                            sublet_snapshot **snap, char *err, size_t cap)
{
    *t = NULL;
    *snap = NULL;
    uint8_t *buf;
    size_t n;
    if (cli_read_file(path, &buf, &n, err, cap) != 0)
        return SUBLET_ERR_IO;
    const char *name = strcmp(path, "-") == 0 ? "stdin" : path;
    sublet_trace_format f = sublet_trace_detect(buf, n);
    sublet_status st;
    if (f == SUBLET_FORMAT_SNAPSHOT_PICKLE || f == SUBLET_FORMAT_SNAPSHOT_JSON) {
        char inner[1024];
        st = sublet_snapshot_parse(buf, n, snap, inner, sizeof inner);
        if (st == SUBLET_OK)
            st = sublet_snapshot_trace(*snap, lo, t, inner, sizeof inner);
        if (st != SUBLET_OK) {
            snprintf(err, cap, "%s: %s", name, inner);
            sublet_snapshot_free(*snap);
            *snap = NULL;
        }
    } else {
        st = cli_parse_trace(buf, n, name, lo, t, err, cap);
    }
    free(buf);
    return st;
}

void cli_frag_replay_options(const sublet_trace *t, const char *conf, uint64_t device_memory,
                             sublet_replay_options *o, int *conf_from_trace)
{
    sublet_replay_options_init(o);
    o->conf = cli_conf_for(t, conf, conf_from_trace);
    uint64_t dm = sublet_trace_device_memory(t);
    o->device_memory = device_memory ? device_memory
                       : dm          ? dm
                                     : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
}

/* ---- JSON pieces ----------------------------------------------------------------------- */

static void json_metrics(json_writer *w, const sublet_frag_stats *m)
{
    json_object_begin(w);
    json_kv_u64(w, "reserved_bytes", m->reserved_bytes);
    json_kv_u64(w, "allocated_bytes", m->allocated_bytes);
    json_kv_u64(w, "active_bytes", m->active_bytes);
    json_kv_u64(w, "requested_bytes", m->requested_bytes);
    json_kv_u64(w, "inactive_split_bytes", m->inactive_split_bytes);
    json_kv_u64(w, "unallocated_bytes", m->unallocated_bytes);
    json_kv_u64(w, "internal_waste_bytes", m->internal_waste_bytes);
    json_kv_u64(w, "free_bytes", m->free_bytes);
    json_kv_u64(w, "free_blocks", m->free_blocks);
    json_kv_u64(w, "largest_free_block", m->largest_free_block);
    json_kv_double(w, "external", m->external);
    json_kv_double(w, "unused", m->unused);
    json_kv_double(w, "spread", m->spread);
    json_object_end(w);
}

void cli_frag_json(json_writer *w, const char *key, const sublet_frag_state *st)
{
    static const char *const pools[3] = {"all", "small_pool", "large_pool"};
    json_key(w, key);
    if (!st) {
        json_null(w);
        return;
    }
    json_object_begin(w);
    for (int k = 0; k < 3; k++) {
        sublet_frag_stats m;
        sublet_frag_compute(st, k, SUBLET_STREAM_ALL, &m);
        json_key(w, pools[k]);
        json_metrics(w, &m);
    }
    json_key(w, "streams");
    json_array_begin(w);
    size_t ns = sublet_frag_streams(st, NULL, 0);
    sublet_stream *streams = ns ? malloc(ns * sizeof *streams) : NULL;
    if (streams) {
        sublet_frag_streams(st, streams, ns);
        for (size_t i = 0; i < ns; i++) {
            sublet_frag_stats m;
            sublet_frag_compute(st, SUBLET_POOL_ALL, streams[i], &m);
            json_object_begin(w);
            json_kv_u64(w, "stream", streams[i]);
            json_kv_u64(w, "free_blocks", m.free_blocks);
            json_kv_u64(w, "free_bytes", m.free_bytes);
            json_kv_u64(w, "largest_free_block", m.largest_free_block);
            json_kv_double(w, "external", m.external);
            json_kv_double(w, "spread", m.spread);
            json_kv_u64(w, "max_allocatable", sublet_frag_max_allocatable(st, streams[i]));
            json_object_end(w);
        }
        free(streams);
    }
    json_array_end(w);
    json_object_end(w);
}

static const char *state_name(sublet_block_state s)
{
    return s == SUBLET_BLOCK_ACTIVE_ALLOCATED      ? "active_allocated"
           : s == SUBLET_BLOCK_ACTIVE_PENDING_FREE ? "active_pending_free"
                                                   : "inactive";
}

static void json_stack(json_writer *w, const sublet_frag_state *st, uint32_t stack)
{
    json_key(w, "stack");
    json_array_begin(w);
    if (stack && stack <= st->nstacks) {
        const char *p = st->stacks[stack - 1];
        while (*p) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1),
                     p);
            json_string(w, line);
            p += len + (e ? 1 : 0);
        }
    }
    json_array_end(w);
}

static void json_segment_head(json_writer *w, const sublet_frag_segment *s)
{
    json_kv_u64(w, "address", s->addr);
    json_kv_u64(w, "size", s->size);
    json_kv_u64(w, "stream", s->stream);
    json_kv_string(w, "pool", s->is_small ? "small" : "large");
    json_kv_bool(w, "expandable", s->is_expandable);
    json_kv_u64(w, "allocated_bytes", s->allocated_size);
    json_kv_u64(w, "active_bytes", s->active_size);
    json_kv_u64(w, "requested_bytes", s->requested_size);
    json_kv_u64(w, "free_bytes", s->free_size);
    json_kv_u64(w, "largest_free_block", s->largest_free);
    json_kv_u64(w, "live_blocks", s->live_blocks);
}

void cli_frag_pinning_json(json_writer *w, const char *key, const sublet_frag_state *st, size_t top)
{
    json_key(w, key);
    json_array_begin(w);
    size_t *idx = top ? malloc(top * sizeof *idx) : NULL;
    size_t n = idx ? sublet_frag_pinning(st, idx, top) : 0;
    for (size_t r = 0; r < n && r < top; r++) {
        const sublet_frag_segment *s = &st->segments[idx[r]];
        json_object_begin(w);
        json_kv_u64(w, "rank", r + 1);
        json_segment_head(w, s);
        json_kv_u64(w, "hostage_bytes", s->size - s->active_size);
        json_key(w, "live");
        json_array_begin(w);
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *b = &st->blocks[s->first_block + k];
            if (b->state == SUBLET_BLOCK_INACTIVE)
                continue;
            json_object_begin(w);
            json_kv_u64(w, "address", b->addr);
            json_kv_u64(w, "size", b->size);
            json_kv_u64(w, "requested_size", b->requested_size);
            json_kv_u64(w, "stream", s->stream);
            json_kv_string(w, "state", state_name(b->state));
            json_stack(w, st, b->stack);
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    free(idx);
    json_array_end(w);
}

static void json_histogram(json_writer *w, const sublet_frag_state *st)
{
    sublet_frag_histogram h;
    sublet_frag_histogram_of(st, SUBLET_POOL_ALL, &h);
    json_key(w, "free_block_histogram");
    json_array_begin(w);
    for (unsigned k = 0; k < SUBLET_FRAG_HIST_BUCKETS; k++) {
        if (!h.count[k])
            continue;
        json_object_begin(w);
        json_kv_u64(w, "min_size", UINT64_C(1) << k);
        json_kv_u64(w, "max_size", k < 63 ? (UINT64_C(1) << (k + 1)) - 1 : UINT64_MAX);
        json_kv_u64(w, "count", h.count[k]);
        json_kv_u64(w, "bytes", h.bytes[k]);
        json_object_end(w);
    }
    json_array_end(w);
}

static void json_segments(json_writer *w, const sublet_frag_state *st, unsigned width)
{
    char *row = malloc((size_t)width + 1);
    json_key(w, "segments");
    json_array_begin(w);
    for (size_t i = 0; row && i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        json_object_begin(w);
        json_segment_head(w, s);
        sublet_frag_map_row(st, i, width, row);
        json_kv_string(w, "map", row);
        json_key(w, "blocks");
        json_array_begin(w);
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *b = &st->blocks[s->first_block + k];
            json_object_begin(w);
            json_kv_u64(w, "address", b->addr);
            json_kv_u64(w, "size", b->size);
            json_kv_u64(w, "requested_size", b->requested_size);
            json_kv_string(w, "state", state_name(b->state));
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    free(row);
}

/* ---- diagnosis output -------------------------------------------------------------------- */

void cli_print_diagnosis(FILE *out, const sublet_frag_diagnosis *d)
{
    size_t n = sublet_frag_diagnosis_format(d, NULL, 0);
    char *text = malloc(n + 1);
    if (!text)
        return;
    sublet_frag_diagnosis_format(d, text, n + 1);
    fputs(text, out);
    free(text);
}

void cli_diagnosis_json(json_writer *w, const char *key, const sublet_frag_diagnosis *d)
{
    json_key(w, key);
    json_object_begin(w);
    json_kv_string(w, "conf", d->conf);
    json_kv_u64(w, "device_memory_bytes", d->device_memory);
    json_kv_u64(w, "ooms", d->ooms);
    json_kv_u64(w, "peak_reserved_bytes", d->peak_reserved_bytes);
    json_key(w, "oom_list");
    json_array_begin(w);
    for (size_t i = 0; i < d->noom; i++) {
        const sublet_frag_oom *o = &d->oom[i];
        json_object_begin(w);
        json_kv_u64(w, "event", o->event);
        json_kv_u64(w, "line", o->line);
        json_kv_u64(w, "size", o->size);
        json_kv_u64(w, "stream", o->stream);
        json_kv_string(w, "kind", o->fragmentation ? "fragmentation" : "exhaustion");
        json_kv_string(w, "message", o->message ? o->message : "");
        json_key(w, "diagnosis");
        if (o->diagnosis)
            json_string(w, o->diagnosis);
        else
            json_null(w);
        json_key(w, "avoided_by");
        json_array_begin(w);
        for (size_t c = 0; c < d->ncandidates; c++)
            if (sublet_frag_candidate_avoids(&d->candidates[c], o->event))
                json_string(w, d->candidates[c].setting);
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "candidates");
    json_array_begin(w);
    for (size_t i = 0; i < d->ncandidates; i++) {
        const sublet_frag_candidate *c = &d->candidates[i];
        json_object_begin(w);
        json_kv_string(w, "setting", c->setting);
        json_kv_string(w, "conf", c->conf);
        json_kv_bool(w, "replayed", c->status == SUBLET_OK);
        if (c->status != SUBLET_OK)
            json_kv_string(w, "error", c->error[0] ? c->error : sublet_status_text(c->status));
        json_kv_u64(w, "ooms", c->ooms);
        json_key(w, "first_oom_event");
        if (c->first_oom_event == SUBLET_REPLAY_NONE)
            json_null(w);
        else
            json_u64(w, c->first_oom_event);
        json_kv_u64(w, "peak_reserved_bytes", c->peak_reserved_bytes);
        json_kv_bool(w, "avoids_all", c->status == SUBLET_OK && c->ooms == 0);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

/* ---- argument parsing shared by both commands ---------------------------------------------- */

typedef struct fargs {
    const char *path, *conf;
    uint64_t at, device_memory, width, top, detailed;
    int json;
    sublet_trace_load_options lo;
    const char **cands;
    size_t ncands;
} fargs;

static int usage_error(const char *cmd, void (*usage)(FILE *), const char *fmt, const char *arg)
{
    fprintf(stderr, "sublet %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    usage(stderr);
    return CLI_USAGE;
}

static int parse_args(int argc, char **argv, const char *cmd, void (*usage)(FILE *), fargs *a,
                      int diagnose)
{
    memset(a, 0, sizeof *a);
    a->at = SUBLET_REPLAY_ALL;
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int m;
        const char *v;
        if (only_positional || s[0] != '-' || strcmp(s, "-") == 0) {
            if (a->path)
                return usage_error(cmd, usage, "more than one input given ('%s')", s);
            a->path = s;
        } else if (strcmp(s, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            usage(stdout);
            return -1;
        } else if (strcmp(s, "--json") == 0) {
            a->json = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--conf", &m)) || m) {
            if (!v)
                return usage_error(cmd, usage, "%s needs a value", "--conf");
            a->conf = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--device-memory", &m)) || m) {
            if (!v || sublet_parse_size(v, &a->device_memory) != 0 || !a->device_memory)
                return usage_error(cmd, usage, "--device-memory: '%s' is not a size (e.g. 80GiB)",
                                   v ? v : "");
        } else if (!diagnose && ((v = cli_opt_value(argc, argv, &i, "--at", &m)) || m)) {
            if (!v || cli_parse_index(v, &a->at) != 0)
                return usage_error(cmd, usage, "--at: '%s' is not an event index", v ? v : "");
        } else if (!diagnose && ((v = cli_opt_value(argc, argv, &i, "--width", &m)) || m)) {
            if (!v || cli_parse_index(v, &a->width) != 0 || a->width < 8 || a->width > 1000)
                return usage_error(cmd, usage, "--width: '%s' is not in 8..1000", v ? v : "");
        } else if (!diagnose && ((v = cli_opt_value(argc, argv, &i, "--top", &m)) || m)) {
            if (!v || cli_parse_index(v, &a->top) != 0 || a->top < 1 || a->top > 64)
                return usage_error(cmd, usage, "--top: '%s' is not in 1..64", v ? v : "");
        } else if (diagnose && ((v = cli_opt_value(argc, argv, &i, "--detailed", &m)) || m)) {
            if (!v || cli_parse_index(v, &a->detailed) != 0 || a->detailed < 1)
                return usage_error(cmd, usage, "--detailed: '%s' is not a count", v ? v : "");
        } else if (diagnose && ((v = cli_opt_value(argc, argv, &i, "--candidate", &m)) || m)) {
            if (!v)
                return usage_error(cmd, usage, "%s needs a value", "--candidate");
            const char **n = realloc(a->cands, (a->ncands + 2) * sizeof *n);
            if (!n)
                return usage_error(cmd, usage, "%s", "out of memory");
            a->cands = n;
            a->cands[a->ncands++] = v;
            a->cands[a->ncands] = NULL;
        } else if ((v = cli_opt_value(argc, argv, &i, "--device", &m)) || m) {
            uint64_t d;
            if (!v || cli_parse_index(v, &d) != 0 || d > INT32_MAX)
                return usage_error(cmd, usage, "--device: '%s' is not a device number", v ? v : "");
            a->lo.pick_device = 1;
            a->lo.device = (int64_t)d;
        } else {
            return usage_error(cmd, usage, "unknown option '%s'", s);
        }
    }
    if (!a->path)
        return usage_error(cmd, usage, "%s", "no input given");
    if (a->conf) {
        sublet_settings probe;
        sublet_settings_default(&probe);
        char err[512];
        if (sublet_settings_parse(&probe, a->conf, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet %s: --conf: %s\n", cmd, err);
            return CLI_USAGE;
        }
    }
    return 0;
}

/* ---- sublet frag ------------------------------------------------------------------------- */

int cli_frag(int argc, char **argv)
{
    fargs a;
    int pr = parse_args(argc, argv, "frag", cli_frag_usage, &a, 0);
    if (pr)
        return pr < 0 ? CLI_OK : pr;
    char err[1600];
    sublet_trace *t = NULL;
    sublet_snapshot *snap = NULL;
    if (cli_frag_load(a.path, &a.lo, &t, &snap, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet frag: %s\n", err);
        return CLI_ERROR;
    }
    sublet_replay_options o;
    int from_trace = 0;
    cli_frag_replay_options(t, a.conf, a.device_memory, &o, &from_trace);
    size_t n = sublet_trace_count(t);
    if (a.at != SUBLET_REPLAY_ALL && a.at >= n) {
        fprintf(stderr, "sublet frag: --at %" PRIu64 ": the trace has %zu events (0..%zu)\n", a.at,
                n, n ? n - 1 : 0);
        cli_trace_free(t);
        sublet_snapshot_free(snap);
        return CLI_USAGE;
    }
    sublet_frag_state *st = NULL;
    sublet_replay_result r;
    memset(&r, 0, sizeof r);
    r.last_event = SUBLET_REPLAY_NONE;
    const char *source = "replay";
    char rerr[1024] = "";
    sublet_status rs = sublet_frag_state_at(t, &o, a.at, &st, &r, rerr, sizeof rerr);
    int rc = CLI_OK;
    if (rs != SUBLET_OK && snap && a.at == SUBLET_REPLAY_ALL) {
        fprintf(stderr,
                "sublet frag: note: the replay stopped (%s): the state comes from the "
                "snapshot's segments\n",
                rerr[0] ? rerr : sublet_status_text(rs));
        int64_t dev = a.lo.pick_device ? a.lo.device : sublet_trace_device(t);
        rs = sublet_frag_from_snapshot(snap, dev < 0 ? 0 : dev, &st);
        source = "segments";
    }
    if (rs != SUBLET_OK) {
        fprintf(stderr, "sublet frag: %s: %s\n", a.path, rerr[0] ? rerr : sublet_status_text(rs));
        rc = CLI_ERROR;
    }
    unsigned width = a.width ? (unsigned)a.width : 64;
    size_t top = a.top ? (size_t)a.top : 5;
    if (rc == CLI_OK && a.json) {
        json_writer w;
        json_init(&w, stdout);
        json_object_begin(&w);
        json_kv_string(&w, "file", a.path);
        json_kv_string(&w, "format", sublet_trace_format_name(sublet_trace_source_format(t)));
        json_kv_string(&w, "source", source);
        json_kv_u64(&w, "trace_events", n);
        json_key(&w, "event");
        if (r.last_event == SUBLET_REPLAY_NONE)
            json_null(&w);
        else
            json_u64(&w, r.last_event);
        json_kv_string(&w, "conf", o.conf);
        json_kv_u64(&w, "device_memory_bytes", o.device_memory);
        json_kv_u64(&w, "ooms", r.ooms);
        json_kv_u64(&w, "replay_errors", r.errors);
        cli_frag_json(&w, "fragmentation", st);
        json_histogram(&w, st);
        cli_frag_pinning_json(&w, "pinning", st, top);
        json_segments(&w, st, width);
        json_object_end(&w);
        json_finish(&w);
    } else if (rc == CLI_OK) {
        printf("sublet frag %s\n", a.path);
        printf("  source:   %s, %zu events (%zu of them the prelude); ",
               sublet_trace_format_name(sublet_trace_source_format(t)), n,
               sublet_trace_prelude_count(t));
        if (!strcmp(source, "segments"))
            printf("the snapshot's segments\n");
        else if (r.last_event == SUBLET_REPLAY_NONE)
            printf("state before the first recorded event\n");
        else
            printf("state after event %" PRIu64 "\n", r.last_event);
        char t1[48];
        sublet_format_size(o.device_memory, t1, sizeof t1);
        printf("  replay:   settings %s%s, device %s\n", o.conf[0] ? o.conf : "(PyTorch defaults)",
               from_trace ? " (recorded)" : "", t1);
        if (r.ooms)
            printf("  OOMs:     %" PRIu64 " up to here (first at event %" PRIu64
                   "); `sublet diagnose` explains them\n",
                   r.ooms, r.first_oom_event);
        if (r.errors)
            printf("  note:     %" PRIu64 " rows could not be replayed (first: %s)\n", r.errors,
                   r.first_error);
        putchar('\n');
        sublet_frag_format_options fo = {
            .sections = SUBLET_FRAG_SECTION_ALL, .map_width = width, .top_pinning = top};
        size_t len = sublet_frag_format_text(st, &fo, NULL, 0);
        char *text = malloc(len + 1);
        if (text) {
            sublet_frag_format_text(st, &fo, text, len + 1);
            fputs(text, stdout);
            free(text);
        } else {
            fprintf(stderr, "sublet frag: out of memory\n");
            rc = CLI_ERROR;
        }
    }
    sublet_frag_state_free(st);
    sublet_replay_result_free(&r);
    cli_trace_free(t);
    sublet_snapshot_free(snap);
    return rc;
}

/* ---- sublet diagnose ----------------------------------------------------------------------- */

int cli_diagnose(int argc, char **argv)
{
    fargs a;
    int pr = parse_args(argc, argv, "diagnose", cli_diagnose_usage, &a, 1);
    if (pr) {
        free(a.cands);
        return pr < 0 ? CLI_OK : pr;
    }
    char err[1600];
    sublet_trace *t = NULL;
    sublet_snapshot *snap = NULL;
    if (cli_frag_load(a.path, &a.lo, &t, &snap, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet diagnose: %s\n", err);
        free(a.cands);
        return CLI_ERROR;
    }
    sublet_replay_options o;
    int from_trace = 0;
    cli_frag_replay_options(t, a.conf, a.device_memory, &o, &from_trace);
    sublet_frag_diagnose_options dopt = {.candidates = a.cands, .max_detailed = (size_t)a.detailed};
    sublet_frag_diagnosis d;
    sublet_status st = sublet_frag_diagnose_trace(t, &o, &dopt, &d, err, sizeof err);
    int rc = CLI_OK;
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet diagnose: %s: %s\n", a.path, err[0] ? err : sublet_status_text(st));
        rc = CLI_ERROR;
    } else if (a.json) {
        json_writer w;
        json_init(&w, stdout);
        json_object_begin(&w);
        json_kv_string(&w, "file", a.path);
        cli_diagnosis_json(&w, "diagnosis", &d);
        json_object_end(&w);
        json_finish(&w);
    } else {
        printf("sublet diagnose %s\n", a.path);
        cli_print_diagnosis(stdout, &d);
    }
    sublet_frag_diagnosis_free(&d);
    cli_trace_free(t);
    sublet_snapshot_free(snap);
    free(a.cands);
    return rc;
}
