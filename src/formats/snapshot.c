/* sublet — memory snapshots: PyTorch's _snapshot() dict built from a live
 * allocator, read back from pickle or JSON, written atomically.  See
 * sublet/snapshot.h.
 *
 * A snapshot is one pyval tree in its own arena, whether it was taken or
 * parsed, so writing, walking and converting to a trace work the same for
 * both.  Key order follows PyTorch's _snapshot(): "frames" is the last key of
 * every segment, block and trace entry (PyTorch gathers frames after building
 * the dicts). */
#include "sublet/snapshot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/read_file.h"
#include "formats/atomic_write.h"
#include "engine/rules.h"  /* kSmallBuffer */
#include "formats/gz.h"
#include "engine/history_internal.h"
#include "formats/json_codec.h"
#include "formats/pickle.h"
#include "formats/pyval.h"
#include "formats/snapshot_internal.h"
#include "formats/trace_readers.h"

void sublet_snapshot_free(sublet_snapshot *s)
{
    if (!s)
        return;
    pv_arena_destroy(s->arena);
    free(s);
}

/* ---- taking a snapshot ------------------------------------------------------------------ */

static const char *const k_names[K_COUNT] = {
    "device", "address", "total_size", "allocated_size", "active_size", "requested_size",
    "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks", "size",
    "state", "action", "addr", "device_free", "time_us", "compile_context", "user_metadata",
    "filename", "line", "name", "pool_id"};
static const char *const k_states[3] = {"inactive", "active_allocated", "active_pending_free"};

pyval *snap_u(snap_bld *b, uint64_t v)
{
    pyval *p = pv_new_uint(b->ar, v);
    if (!p)
        b->fail = true;
    return p;
}

void snap_set(snap_bld *b, pyval *d, int key, pyval *v)
{
    if (!v || pv_dict_set(b->ar, d, b->k[key], v) != SUBLET_OK)
        b->fail = true;
}

pyval *snap_new_dict(snap_bld *b)
{
    pyval *d = pv_new_dict(b->ar);
    if (!d)
        b->fail = true;
    return d;
}

bool snap_bld_init(snap_bld *b)
{
    for (int i = 0; i < K_COUNT; i++)
        if (!(b->k[i] = pv_new_strz(b->ar, k_names[i])))
            return false;
    for (int i = 0; i < SUBLET_ACT_COUNT; i++)
        if (!(b->act[i] = pv_new_strz(b->ar, sublet_action_name((sublet_action)i))))
            return false;
    for (int i = 0; i < 3; i++)
        if (!(b->state[i] = pv_new_strz(b->ar, k_states[i])))
            return false;
    pyval *zero = pv_new_int(b->ar, 0);
    pyval *pair[2] = {zero, zero};
    b->small = pv_new_strz(b->ar, "small");
    b->large = pv_new_strz(b->ar, "large");
    b->na = pv_new_strz(b->ar, "N/A");
    b->empty_str = pv_new_strz(b->ar, "");
    b->pool_id = zero ? pv_new_tuple(b->ar, pair, 2) : NULL;
    b->no_frames = pv_new_list(b->ar);
    b->segs = pv_new_list(b->ar);
    return b->small && b->large && b->na && b->empty_str && b->pool_id && b->no_frames && b->segs;
}

pyval *snap_pool_id(snap_bld *b, const uint64_t id[2])
{
    if (id[0] == 0 && id[1] == 0)
        return b->pool_id;
    pyval *pair[2] = {snap_u(b, id[0]), snap_u(b, id[1])};
    pyval *t = pair[0] && pair[1] ? pv_new_tuple(b->ar, pair, 2) : NULL;
    if (!t)
        b->fail = true;
    return t;
}

/* The frames list of stack `id` (the shared [] for 0).  Takes the allocator's
 * lock: never call it from inside the segment walk. */
pyval *snap_frames_of(snap_bld *b, uint32_t id)
{
    if (id == 0)
        return b->no_frames;
    if (id >= b->frames_cap) {
        size_t nc = b->frames_cap ? b->frames_cap : 64;
        while (nc <= id)
            nc *= 2;
        pyval **n = realloc(b->frames, nc * sizeof *n);
        if (!n) {
            b->fail = true;
            return NULL;
        }
        memset(n + b->frames_cap, 0, (nc - b->frames_cap) * sizeof *n);
        b->frames = n;
        b->frames_cap = nc;
    }
    if (b->frames[id])
        return b->frames[id];
    const sublet_frame *fr = NULL;
    const sublet_trace_frame *tf = NULL;
    size_t n = b->t ? sublet_trace_stack(b->t, id, &tf) : sublet_stack_frames(b->a, id, &fr);
    pyval *list = pv_new_list(b->ar);
    if (!list) {
        b->fail = true;
        return NULL;
    }
    for (size_t i = 0; i < n && !b->fail; i++) {
        pyval *d = snap_new_dict(b);
        if (!d)
            break;
        const char *file = tf ? tf[i].filename : fr[i].filename;
        const char *name = tf ? tf[i].name : fr[i].name;
        snap_set(b, d, K_FILENAME, pv_new_strz(b->ar, file ? file : ""));
        snap_set(b, d, K_LINE, pv_new_int(b->ar, tf ? tf[i].line : fr[i].line));
        snap_set(b, d, K_NAME, pv_new_strz(b->ar, name ? name : ""));
        if (pv_list_append(b->ar, list, d) != SUBLET_OK)
            b->fail = true;
    }
    b->frames[id] = list;
    return list;
}

static void frames_later(snap_bld *b, pyval *d, uint32_t stack)
{
    if (stack == 0) {
        snap_set(b, d, K_FRAMES, b->no_frames);
        return;
    }
    if (b->npend == b->pend_cap) {
        size_t nc = b->pend_cap ? b->pend_cap * 2 : 256;
        snap_pend *n = realloc(b->pend, nc * sizeof *n);
        if (!n) {
            b->fail = true;
            return;
        }
        b->pend = n;
        b->pend_cap = nc;
    }
    b->pend[b->npend++] = (snap_pend){d, stack};
}

/* Called under the allocator's lock: only arena allocations here. */
static void on_segment(void *user, const sublet_segment_view *sv)
{
    snap_bld *b = user;
    if (b->fail)
        return;
    pyval *d = snap_new_dict(b);
    if (!d)
        return;
    snap_set(b, d, K_DEVICE, pv_new_int(b->ar, b->device));
    snap_set(b, d, K_ADDRESS, snap_u(b, sv->addr));
    snap_set(b, d, K_TOTAL_SIZE, snap_u(b, sv->total_size));
    snap_set(b, d, K_ALLOCATED_SIZE, snap_u(b, sv->allocated_size));
    snap_set(b, d, K_ACTIVE_SIZE, snap_u(b, sv->active_size));
    snap_set(b, d, K_REQUESTED_SIZE, snap_u(b, sv->requested_size));
    snap_set(b, d, K_STREAM, snap_u(b, sv->stream));
    snap_set(b, d, K_SEGMENT_TYPE, sv->is_small ? b->small : b->large);
    snap_set(b, d, K_SEGMENT_POOL_ID, snap_pool_id(b, sv->pool_id));
    snap_set(b, d, K_IS_EXPANDABLE, pv_bool(sv->is_expandable != 0));
    pyval *blocks = pv_new_list(b->ar);
    if (!blocks) {
        b->fail = true;
        return;
    }
    for (size_t i = 0; i < sv->nblocks && !b->fail; i++) {
        const sublet_block_view *bv = &sv->blocks[i];
        pyval *bd = snap_new_dict(b);
        if (!bd)
            return;
        snap_set(b, bd, K_ADDRESS, snap_u(b, bv->addr));
        snap_set(b, bd, K_SIZE, snap_u(b, bv->size));
        snap_set(b, bd, K_REQUESTED_SIZE, snap_u(b, bv->requested_size));
        unsigned st = (unsigned)bv->state < 3 ? (unsigned)bv->state : 0;
        snap_set(b, bd, K_STATE, b->state[st]);
        frames_later(b, bd, bv->stack);
        if (pv_list_append(b->ar, blocks, bd) != SUBLET_OK)
            b->fail = true;
    }
    snap_set(b, d, K_BLOCKS, blocks);
    frames_later(b, d, sv->stack);
    if (pv_list_append(b->ar, b->segs, d) != SUBLET_OK)
        b->fail = true;
}

pyval *snap_trace_entry(snap_bld *b, const sublet_trace_entry *e)
{
    pyval *d = snap_new_dict(b);
    if (!d)
        return NULL;
    unsigned act = (unsigned)e->action < SUBLET_ACT_COUNT ? (unsigned)e->action : 0;
    snap_set(b, d, K_ACTION, b->act[act]);
    snap_set(b, d, e->action == SUBLET_ACT_OOM ? K_DEVICE_FREE : K_ADDR, snap_u(b, e->addr));
    snap_set(b, d, K_SIZE, snap_u(b, e->size));
    snap_set(b, d, K_STREAM, snap_u(b, e->stream));
    if (e->time_us) /* 0: the clock had no time (a replay of a trace without times) */
        snap_set(b, d, K_TIME_US, snap_u(b, e->time_us));
    snap_set(b, d, K_COMPILE_CONTEXT, b->na);
    snap_set(b, d, K_USER_METADATA, b->empty_str);
    snap_set(b, d, K_FRAMES, snap_frames_of(b, e->stack));
    return d;
}

/* The recorded trace, oldest first (a malloc'd copy). */
static sublet_trace_entry *copy_history(sublet_allocator *a, size_t *n_out)
{
    size_t cap = sublet_history_count(a) + 64;
    for (;;) {
        sublet_trace_entry *v = malloc(cap * sizeof *v);
        if (!v)
            return NULL;
        size_t n = sublet_history_copy(a, v, cap);
        if (n <= cap) {
            *n_out = n;
            return v;
        }
        free(v);
        cap = n + n / 2 + 64;
    }
}

static pyval *settings_dict(snap_bld *b, const sublet_settings *st)
{
    pyval *d = snap_new_dict(b);
    if (!d)
        return NULL;
    pv_arena *ar = b->ar;
#define SETK(key, val)                                                  \
    do {                                                                \
        pyval *v_ = (val);                                              \
        if (!v_ || pv_dict_set_str(ar, d, key, v_) != SUBLET_OK)        \
            b->fail = true;                                             \
    } while (0)
    SETK("PYTORCH_CUDA_ALLOC_CONF", pv_new_strz(ar, st->raw));
    SETK("max_split_size", pv_new_int(ar, st->max_split_size == SUBLET_SIZE_UNLIMITED
                                              ? -1
                                              : (int64_t)st->max_split_size));
    SETK("garbage_collection_threshold", pv_new_float(ar, st->garbage_collection_threshold));
    SETK("expandable_segments", pv_bool(st->expandable_segments));
    SETK("pinned_num_register_threads", pv_new_int(ar, st->pinned_num_register_threads));
    SETK("release_lock_on_cudamalloc", pv_bool(st->release_lock_on_cudamalloc));
    SETK("pinned_use_cuda_host_register", pv_bool(st->pinned_use_cuda_host_register));
    pyval *rd = snap_new_dict(b);
    for (unsigned i = 0; rd && i < SUBLET_ROUNDUP_BUCKETS; i++) {
        char key[16];
        snprintf(key, sizeof key, "%u", 1u << i);
        pyval *v = pv_new_int(ar, st->roundup_power2_divisions[i]);
        if (!v || pv_dict_set_str(ar, rd, key, v) != SUBLET_OK)
            b->fail = true;
    }
    SETK("roundup_power2_divisions", rd);
    SETK("graph_capture_record_stream_reuse", pv_bool(st->graph_capture_record_stream_reuse));
#undef SETK
    return d;
}

sublet_status sublet_snapshot_take(sublet_allocator *a, sublet_snapshot **out)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_snapshot *s = calloc(1, sizeof *s);
    snap_bld b;
    memset(&b, 0, sizeof b);
    b.a = a;
    int dev = sublet_allocator_device(a); /* fixed at creation */
    b.device = dev < 0 ? 0 : dev;
    if (!s || !(s->arena = b.ar = pv_arena_create()) || !snap_bld_init(&b)) {
        sublet_snapshot_free(s);
        return SUBLET_ERR_NO_MEMORY;
    }
    /* The trace first, then the segments (PyTorch's order: the walk appends
     * the `snapshot` entry, which this dump therefore does not hold). */
    size_t nent = 0;
    sublet_trace_entry *ent = copy_history(a, &nent);
    pyval *traces = pv_new_list(b.ar), *mine = pv_new_list(b.ar);
    if (!ent || !traces || !mine)
        b.fail = true;
    for (int64_t d = 0; !b.fail && d < b.device; d++) {
        pyval *empty = pv_new_list(b.ar);
        if (!empty || pv_list_append(b.ar, traces, empty) != SUBLET_OK)
            b.fail = true;
    }
    for (size_t i = 0; !b.fail && i < nent; i++) {
        pyval *e = snap_trace_entry(&b, &ent[i]);
        if (!e || pv_list_append(b.ar, mine, e) != SUBLET_OK)
            b.fail = true;
    }
    free(ent);
    if (!b.fail && pv_list_append(b.ar, traces, mine) != SUBLET_OK)
        b.fail = true;
    if (!b.fail)
        sublet_segments_walk(a, on_segment, &b);
    sl_history_snapshot_marker(a); /* in the next dump, as PyTorch */
    for (size_t i = 0; !b.fail && i < b.npend; i++)
        snap_set(&b, b.pend[i].dict, K_FRAMES, snap_frames_of(&b, b.pend[i].stack));
    sublet_settings st;
    sublet_settings_get(a, &st);
    free(b.pend);
    if (b.fail || !snap_assemble(&b, s, traces, &st)) {
        free(b.frames);
        sublet_snapshot_free(s);
        return SUBLET_ERR_NO_MEMORY;
    }
    free(b.frames);
    *out = s;
    return SUBLET_OK;
}

bool snap_assemble(snap_bld *b, sublet_snapshot *s, pyval *traces, const sublet_settings *st)
{
    pyval *root = b->fail ? NULL : snap_new_dict(b);
    if (!root)
        return false;
    pyval *settings = settings_dict(b, st), *ann = pv_new_list(b->ar);
    if (b->fail || !settings || !ann || pv_dict_set_str(b->ar, root, "segments", b->segs) ||
        pv_dict_set_str(b->ar, root, "device_traces", traces) ||
        pv_dict_set_str(b->ar, root, "allocator_settings", settings) ||
        pv_dict_set_str(b->ar, root, "external_annotations", ann))
        return false;
    s->root = root;
    s->segments = b->segs;
    s->traces = traces;
    s->fmt = SUBLET_FORMAT_SNAPSHOT_PICKLE;
    return true;
}

/* ---- reading ------------------------------------------------------------------------------ */

static bool is_seq(const pyval *v) { return pv_typeof(v) == PV_LIST || pv_typeof(v) == PV_TUPLE; }

static sublet_status need(char *err, size_t cap, const char *path, const char *key,
                          const char *what, const pyval *v)
{
    if (!v)
        return sl_fail(err, cap, SUBLET_ERR_PARSE, "%s%s%s: missing (expected %s)", path,
                   key ? "." : "", key ? key : "", what);
    return sl_fail(err, cap, SUBLET_ERR_PARSE, "%s%s%s: expected %s, found %s", path, key ? "." : "",
               key ? key : "", what, pv_type_name(pv_typeof(v)));
}

/* d[key] must be a non-negative int (or absent when !required). */
static sublet_status check_u64(const pyval *d, const char *path, const char *key, bool required,
                               char *err, size_t cap)
{
    const pyval *v = pv_dict_get(d, key);
    uint64_t x;
    if (!v && !required)
        return SUBLET_OK;
    if (!pv_as_uint64(v, &x))
        return need(err, cap, path, key, "a non-negative int", v);
    return SUBLET_OK;
}

static sublet_status validate_segments(const pyval *segs, char *err, size_t cap)
{
    for (size_t i = 0; i < pv_list_len(segs); i++) {
        const pyval *sg = pv_list_at(segs, i);
        char path[64];
        snprintf(path, sizeof path, "segments[%zu]", i);
        if (pv_typeof(sg) != PV_DICT)
            return need(err, cap, path, NULL, "a dict", sg);
        sublet_status st;
        int64_t dev;
        const pyval *dv = pv_dict_get(sg, "device");
        if (dv && !pv_as_int(dv, &dev))
            return need(err, cap, path, "device", "an int", dv);
        if ((st = check_u64(sg, path, "address", true, err, cap)) ||
            (st = check_u64(sg, path, "total_size", true, err, cap)) ||
            (st = check_u64(sg, path, "stream", true, err, cap)) ||
            (st = check_u64(sg, path, "allocated_size", false, err, cap)) ||
            (st = check_u64(sg, path, "active_size", false, err, cap)) ||
            (st = check_u64(sg, path, "requested_size", false, err, cap)))
            return st;
        const pyval *ty = pv_dict_get(sg, "segment_type");
        if (ty && !pv_str(ty, NULL))
            return need(err, cap, path, "segment_type", "a str", ty);
        const pyval *pid = pv_dict_get(sg, "segment_pool_id");
        uint64_t pool[2];
        if (pid && !sl_snapshot_pool_id(pid, pool))
            return need(err, cap, path, "segment_pool_id",
                        "a pair of non-negative ints (or None)", pid);
        const pyval *blocks = pv_dict_get(sg, "blocks");
        if (!is_seq(blocks))
            return need(err, cap, path, "blocks", "a list", blocks);
        for (size_t j = 0; j < pv_list_len(blocks); j++) {
            const pyval *bk = pv_list_at(blocks, j);
            char bp[96];
            snprintf(bp, sizeof bp, "%s.blocks[%zu]", path, j);
            if (pv_typeof(bk) != PV_DICT)
                return need(err, cap, bp, NULL, "a dict", bk);
            if ((st = check_u64(bk, bp, "address", false, err, cap)) ||
                (st = check_u64(bk, bp, "size", true, err, cap)) ||
                (st = check_u64(bk, bp, "requested_size", false, err, cap)))
                return st;
            const pyval *state = pv_dict_get(bk, "state");
            if (!pv_str(state, NULL))
                return need(err, cap, bp, "state", "a str", state);
        }
    }
    return SUBLET_OK;
}

/* First byte that is not whitespace (or a UTF-8 BOM). */
static int first_char(const uint8_t *p, size_t n)
{
    size_t i = 0;
    if (n >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)
        i = 3;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    return i < n ? p[i] : -1;
}

sublet_status sublet_snapshot_parse(const void *buf, size_t len, sublet_snapshot **out,
                                    char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!out || (!buf && len))
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    *out = NULL;
    sl_inflated in;
    sublet_status st = sublet_gunzip_if_needed(buf ? buf : (const void *)"", len, 0, &in, err, cap);
    if (st != SUBLET_OK)
        return st;
    const uint8_t *p = in.data;
    size_t n = in.len;
    uint8_t *owned = in.owned;
    int c = first_char(p, n);
    bool json = c == '{' || c == '[';
    if (!json && !(n > 0 && (p[0] == 0x80 || p[0] == '(' || p[0] == '}' || p[0] == ']'))) {
        char shown[200];
        trace_show(p, n < 16 ? n : 16, shown, sizeof shown);
        free(owned);
        return sl_fail(err, cap, SUBLET_ERR_PARSE,
                   "not a snapshot: neither a pickle nor JSON (first bytes: '%s'%s)", shown,
                   owned ? ", after gunzip" : "");
    }
    sublet_snapshot *s = calloc(1, sizeof *s);
    if (!s || !(s->arena = pv_arena_create())) {
        free(owned);
        sublet_snapshot_free(s);
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    char why[400] = "";
    st = json ? pv_json_parse(p, n, s->arena, &s->root, why, sizeof why)
              : pv_pickle_parse(p, n, s->arena, &s->root, why, sizeof why);
    if (st != SUBLET_OK)
        sl_fail(err, cap, st, "%s: %s%s", json ? "JSON" : "pickle", why,
            owned ? " (offset in the gunzipped data)" : "");
    free(owned);
    s->fmt = json ? SUBLET_FORMAT_SNAPSHOT_JSON : SUBLET_FORMAT_SNAPSHOT_PICKLE;
    if (st == SUBLET_OK) {
        if (is_seq(s->root)) {
            s->segments = s->root;
        } else if (pv_typeof(s->root) == PV_DICT) {
            s->segments = pv_dict_get(s->root, "segments");
            s->traces = pv_dict_get(s->root, "device_traces");
            if (!s->segments && !s->traces)
                st = sl_fail(err, cap, SUBLET_ERR_PARSE,
                         "not a snapshot: a dict with neither 'segments' nor 'device_traces'");
            else if (s->segments && !is_seq(s->segments))
                st = need(err, cap, "segments", NULL, "a list", s->segments);
            else if (s->traces && !is_seq(s->traces))
                st = need(err, cap, "device_traces", NULL, "a list", s->traces);
            for (size_t d = 0; st == SUBLET_OK && d < pv_list_len(s->traces); d++) {
                char path[48];
                snprintf(path, sizeof path, "device_traces[%zu]", d);
                if (!is_seq(pv_list_at(s->traces, d)))
                    st = need(err, cap, path, NULL, "a list", pv_list_at(s->traces, d));
            }
        } else {
            st = sl_fail(err, cap, SUBLET_ERR_PARSE,
                     "not a snapshot: the top-level value is a %s, not a dict or a list",
                     pv_type_name(pv_typeof(s->root)));
        }
    }
    if (st == SUBLET_OK)
        st = validate_segments(s->segments, err, cap);
    if (st != SUBLET_OK) {
        sublet_snapshot_free(s);
        return st;
    }
    *out = s;
    return SUBLET_OK;
}

sublet_status sublet_snapshot_load(const char *path, sublet_snapshot **out, char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!path || !out)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    *out = NULL;
    uint8_t *buf;
    size_t n;
    sublet_status st = sl_read_file(path, 0, &buf, &n, err, cap);
    if (st == SUBLET_OK) {
        char inner[512];
        st = sublet_snapshot_parse(buf, n, out, inner, sizeof inner);
        if (st != SUBLET_OK)
            sl_fail(err, cap, st, "%s: %s", path, inner);
    }
    free(buf);
    return st;
}

/* ---- writing ------------------------------------------------------------------------------ */

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    if (n < k)
        return false;
    for (size_t i = 0; i < k; i++) {
        char c = s[n - k + i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != suffix[i])
            return false;
    }
    return true;
}

sublet_snapshot_format sublet_snapshot_format_of_path(const char *path, int *gzip)
{
    size_t n = path ? strlen(path) : 0;
    int gz = ends_with(path, n, ".gz");
    if (gzip)
        *gzip = gz;
    if (gz)
        n -= 3;
    if (ends_with(path, n, ".pickle") || ends_with(path, n, ".pkl"))
        return SUBLET_SNAPSHOT_PICKLE;
    if (ends_with(path, n, ".json"))
        return SUBLET_SNAPSHOT_JSON;
    return SUBLET_SNAPSHOT_AUTO;
}

sublet_status sublet_snapshot_encode(const sublet_snapshot *s, sublet_snapshot_format fmt,
                                     int gzip, uint8_t **out, size_t *out_len, char *err,
                                     size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!s || !out || !out_len || (fmt != SUBLET_SNAPSHOT_PICKLE && fmt != SUBLET_SNAPSHOT_JSON))
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    *out = NULL;
    *out_len = 0;
    pv_buf b = {0};
    char why[256] = "";
    sublet_status st = fmt == SUBLET_SNAPSHOT_PICKLE
                           ? pv_pickle_write(s->root, 0, &b, why, sizeof why)
                           : pv_json_write(s->root, PV_JSON_SPACES | PV_JSON_ASCII, &b, why,
                                           sizeof why);
    if (st != SUBLET_OK) {
        pv_buf_free(&b);
        return sl_fail(err, cap, st, "%s: %s", fmt == SUBLET_SNAPSHOT_PICKLE ? "pickle" : "JSON",
                   why[0] ? why : sublet_status_text(st));
    }
    if (!gzip) {
        *out = b.data;
        *out_len = b.len;
        return SUBLET_OK;
    }
    st = sublet_gzip(b.data, b.len, out, out_len, err, cap);
    pv_buf_free(&b);
    return st;
}

sublet_status sublet_snapshot_write(const sublet_snapshot *s, const char *path,
                                    sublet_snapshot_format fmt, char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!s || !path || !*path)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    int gz = 0;
    sublet_snapshot_format by_name = sublet_snapshot_format_of_path(path, &gz);
    if (fmt == SUBLET_SNAPSHOT_AUTO)
        fmt = by_name;
    if (fmt != SUBLET_SNAPSHOT_PICKLE && fmt != SUBLET_SNAPSHOT_JSON)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT,
                   "%s: cannot tell the snapshot format from the name (use .pickle, .pkl or "
                   ".json, optionally followed by .gz)",
                   path);
    uint8_t *data = NULL;
    size_t n = 0;
    char why[512];
    sublet_status st = sublet_snapshot_encode(s, fmt, gz, &data, &n, why, sizeof why);
    if (st != SUBLET_OK)
        return sl_fail(err, cap, st, "%s: %s", path, why);
    st = sublet_atomic_write(path, data, n, err, cap);
    free(data);
    return st;
}

/* ---- accessors ------------------------------------------------------------------------------ */

size_t sublet_snapshot_segment_count(const sublet_snapshot *s)
{
    return s ? pv_list_len(s->segments) : 0;
}

size_t sublet_snapshot_device_count(const sublet_snapshot *s)
{
    return s ? pv_list_len(s->traces) : 0;
}

size_t sublet_snapshot_trace_count(const sublet_snapshot *s, size_t device)
{
    return s ? pv_list_len(pv_list_at(s->traces, device)) : 0;
}

const char *sublet_snapshot_conf(const sublet_snapshot *s)
{
    if (!s)
        return NULL;
    const pyval *as = pv_dict_get(s->root, "allocator_settings");
    return pv_str(pv_dict_get(as, "PYTORCH_CUDA_ALLOC_CONF"), NULL);
}

static uint64_t get_u(const pyval *d, const char *key, uint64_t dflt)
{
    uint64_t v;
    return pv_as_uint64(pv_dict_get(d, key), &v) ? v : dflt;
}

static sublet_block_state state_of(const pyval *b)
{
    const char *s = pv_str(pv_dict_get(b, "state"), NULL);
    if (s && strcmp(s, "active_allocated") == 0)
        return SUBLET_BLOCK_ACTIVE_ALLOCATED;
    if (s && strncmp(s, "active", 6) == 0) /* active_pending_free, active_awaiting_free */
        return SUBLET_BLOCK_ACTIVE_PENDING_FREE;
    return SUBLET_BLOCK_INACTIVE;
}

/* One segment as a view (blocks into *buf, grown as needed). */
static bool segment_view(const pyval *sg, sublet_segment_view *sv, sublet_block_view **buf,
                         size_t *buf_cap, int64_t *device)
{
    const pyval *blocks = pv_dict_get(sg, "blocks");
    size_t nb = pv_list_len(blocks);
    if (nb > *buf_cap) {
        sublet_block_view *n = realloc(*buf, nb * sizeof *n);
        if (!n)
            return false;
        *buf = n;
        *buf_cap = nb;
    }
    memset(sv, 0, sizeof *sv);
    *device = 0;
    pv_as_int(pv_dict_get(sg, "device"), device);
    sv->addr = get_u(sg, "address", 0);
    sv->total_size = get_u(sg, "total_size", 0);
    sv->stream = get_u(sg, "stream", 0);
    const char *ty = pv_str(pv_dict_get(sg, "segment_type"), NULL);
    sv->is_small = ty ? strcmp(ty, "small") == 0 : sv->total_size <= SL_SMALL_BUFFER;
    bool ex = false;
    pv_as_bool(pv_dict_get(sg, "is_expandable"), &ex);
    sv->is_expandable = ex;
    if (!sl_snapshot_pool_id(pv_dict_get(sg, "segment_pool_id"), sv->pool_id))
        sv->pool_id[0] = sv->pool_id[1] = 0;
    uint64_t at = sv->addr, alloc = 0, active = 0, req = 0;
    for (size_t j = 0; j < nb; j++) {
        const pyval *bk = pv_list_at(blocks, j);
        sublet_block_view *bv = &(*buf)[j];
        bv->addr = get_u(bk, "address", at);
        bv->size = get_u(bk, "size", 0);
        bv->requested_size = get_u(bk, "requested_size", 0);
        bv->state = state_of(bk);
        bv->stack = 0;
        at = bv->addr + bv->size;
        if (bv->state == SUBLET_BLOCK_ACTIVE_ALLOCATED)
            alloc += bv->size;
        if (bv->state != SUBLET_BLOCK_INACTIVE) {
            active += bv->size;
            req += bv->requested_size;
        }
    }
    sv->allocated_size = get_u(sg, "allocated_size", alloc);
    sv->active_size = get_u(sg, "active_size", active);
    sv->requested_size = get_u(sg, "requested_size", req);
    sv->nblocks = nb;
    sv->blocks = *buf;
    return true;
}

sublet_status sublet_snapshot_segments_walk(const sublet_snapshot *s,
                                            sublet_snapshot_segment_fn fn, void *user)
{
    if (!s || !fn)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_block_view *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < pv_list_len(s->segments); i++) {
        sublet_segment_view sv;
        int64_t dev;
        if (!segment_view(pv_list_at(s->segments, i), &sv, &buf, &cap, &dev)) {
            free(buf);
            return SUBLET_ERR_NO_MEMORY;
        }
        fn(user, dev, &sv);
    }
    free(buf);
    return SUBLET_OK;
}

sublet_status sublet_snapshot_trace(const sublet_snapshot *s, const sublet_trace_load_options *opt,
                                    sublet_trace **out, char *err, size_t cap)
{
    if (!s || !out)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    return sublet_trace_from_snapshot(s->root, opt, s->fmt, out, err, cap);
}

/* ---- statistics from the segments ------------------------------------------------------------- */

typedef struct stats_acc {
    sublet_stats *st;
    int64_t device;
    uint64_t max_split; /* UINT64_MAX: unlimited */
} stats_acc;

static void add_cur(sublet_stat *arr, int pool, int64_t x)
{
    arr[SUBLET_POOL_ALL].current += x;
    arr[pool].current += x;
}

static void on_stat_segment(void *user, int64_t device, const sublet_segment_view *sv)
{
    stats_acc *a = user;
    if (device != a->device)
        return;
    sublet_stats *st = a->st;
    int pool = sv->is_small ? SUBLET_POOL_SMALL : SUBLET_POOL_LARGE;
    add_cur(st->reserved_bytes, pool, (int64_t)sv->total_size);
    add_cur(st->segment, pool, 1);
    if (sv->total_size >= a->max_split)
        st->oversize_segments.current++;
    for (size_t i = 0; i < sv->nblocks; i++) {
        const sublet_block_view *b = &sv->blocks[i];
        if (b->state == SUBLET_BLOCK_ACTIVE_ALLOCATED) {
            add_cur(st->allocated_bytes, pool, (int64_t)b->size);
            add_cur(st->allocation, pool, 1);
            if (b->size >= a->max_split)
                st->oversize_allocations.current++;
        }
        if (b->state != SUBLET_BLOCK_INACTIVE) {
            add_cur(st->active_bytes, pool, (int64_t)b->size);
            add_cur(st->active, pool, 1);
            add_cur(st->requested_bytes, pool, (int64_t)b->requested_size);
        } else if (sv->nblocks > 1) {
            add_cur(st->inactive_split_bytes, pool, (int64_t)b->size);
            add_cur(st->inactive_split, pool, 1);
        }
    }
}

static void settle(sublet_stat *s)
{
    s->peak = s->current;
    s->allocated = s->current;
    s->freed = 0;
}

void sublet_snapshot_stats(const sublet_snapshot *s, int64_t device, sublet_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->version = SUBLET_STATS_VERSION;
    out->struct_size = (uint32_t)sizeof *out;
    out->max_split_size = -1;
    if (!s)
        return;
    stats_acc acc = {out, device, UINT64_MAX};
    int64_t mss;
    const pyval *as = pv_dict_get(s->root, "allocator_settings");
    if (pv_as_int(pv_dict_get(as, "max_split_size"), &mss) && mss > 0) {
        acc.max_split = (uint64_t)mss;
        out->max_split_size = mss;
    }
    (void)sublet_snapshot_segments_walk(s, on_stat_segment, &acc);
#define SUBLET_X_ARR(key, title, bytes)          \
    for (int p = 0; p < SUBLET_POOL_KINDS; p++) \
        settle(&out->key[p]);
    SUBLET_STAT_ARRAYS(SUBLET_X_ARR)
#undef SUBLET_X_ARR
#define SUBLET_X_ONE(key, title) settle(&out->key);
    SUBLET_STAT_SINGLES(SUBLET_X_ONE)
#undef SUBLET_X_ONE
}
