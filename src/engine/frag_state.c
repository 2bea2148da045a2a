/* sublet — fragmentation computed from a copy of the segments and blocks.
 *
 * A state (sublet/frag.h) is what sublet_segments_walk or a snapshot shows:
 * segments in address order, each with the blocks that tile it.  Everything
 * here reads that copy: the metrics of sublet_frag_read (which the engine keeps
 * live from its free index; the tests hold both to the same values), the
 * free-block histogram, the pinning segments, the texts (the summary's
 * fragmentation section among them), and the diagnosis of an OOM on a live
 * allocator.  A snapshot's state is built in analysis/frag_series.c with the
 * same builder (engine/frag_internal.h).  The diagnosis of an OOM on a live
 * allocator is in engine/frag_oom.c. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/frag_internal.h"
#include "sublet/frag_state.h"
#include "sublet/history.h"

/* ---- sizes in the texts ------------------------------------------------------------ */

const char *sl_fb_size(uint64_t n, char tmp[32])
{
    sublet_format_size(n, tmp, 32);
    return tmp;
}

/* ---- building a state ---------------------------------------------------------------- */

void sl_frag_add_segment(sl_frag_builder *b, const sublet_segment_view *sv)
{
    sublet_frag_state *st = b->st;
    if (b->oom)
        return;
    if (st->nsegments == b->seg_cap) {
        size_t nc = b->seg_cap ? b->seg_cap * 2 : 64;
        sublet_frag_segment *n = realloc(st->segments, nc * sizeof *n);
        if (!n) {
            b->oom = 1;
            return;
        }
        st->segments = n;
        b->seg_cap = nc;
    }
    if (st->nblocks + sv->nblocks > b->blk_cap) {
        size_t nc = b->blk_cap ? b->blk_cap : 256;
        while (nc < st->nblocks + sv->nblocks)
            nc *= 2;
        sublet_frag_block *n = realloc(st->blocks, nc * sizeof *n);
        if (!n) {
            b->oom = 1;
            return;
        }
        st->blocks = n;
        b->blk_cap = nc;
    }
    sublet_frag_segment *s = &st->segments[st->nsegments++];
    memset(s, 0, sizeof *s);
    s->addr = sv->addr;
    s->stream = sv->stream;
    s->is_small = sv->is_small != 0;
    s->is_expandable = sv->is_expandable != 0;
    s->pool_id[0] = sv->pool_id[0];
    s->pool_id[1] = sv->pool_id[1];
    s->first_block = st->nblocks;
    s->nblocks = sv->nblocks;
    for (size_t i = 0; i < sv->nblocks; i++) {
        const sublet_block_view *v = &sv->blocks[i];
        sublet_frag_block *fb = &st->blocks[st->nblocks++];
        fb->addr = v->addr;
        fb->size = v->size;
        fb->requested_size = v->requested_size;
        fb->state = v->state;
        fb->stack = v->stack; /* the allocator's id until resolved */
        s->size += v->size;
        if (v->state == SUBLET_BLOCK_ACTIVE_ALLOCATED)
            s->allocated_size += v->size;
        if (v->state == SUBLET_BLOCK_INACTIVE) {
            s->free_size += v->size;
            if (v->size > s->largest_free)
                s->largest_free = v->size;
        } else {
            s->active_size += v->size;
            s->requested_size += v->requested_size;
            s->live_blocks++;
        }
    }
    if (!sv->nblocks)
        s->size = sv->total_size;
}

static void walk_cb(void *user, const sublet_segment_view *sv) { sl_frag_add_segment(user, sv); }

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

static int is_python(const char *file)
{
    size_t n = file ? strlen(file) : 0;
    return n > 3 && strcmp(file + n - 3, ".py") == 0;
}

/* Frames of the allocator and of the dispatcher down to it: left out of a
 * stack without Python frames (an autograd thread's), which would show them
 * first and nothing else. */
static int is_plumbing(const sublet_frame *f)
{
    static const char *const prefixes[] = {"torch::unwind",
                                           "torch::CapturedTraceback",
                                           "torch::cuda::",
                                           "c10::",
                                           "at::TensorBase at::detail::",
                                           "at::detail::",
                                           "at::native::empty",
                                           "at::empty",
                                           "at::_ops::",
                                           "at::(anonymous namespace)",
                                           "sublet",
                                           "sl_"};
    const char *name = f->name ? f->name : "";
    if (!*name || strcmp(name, "??") == 0)
        return 1;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* Frames of one stack as text (see sublet_frag_state.stacks). */
char *sl_frag_stack_text(const sublet_frame *fr, size_t n)
{
    size_t py = 0, useful = 0;
    for (size_t i = 0; i < n; i++) {
        py += is_python(fr[i].filename);
        useful += !is_plumbing(&fr[i]);
    }
    sl_text b;
    char *out = NULL;
    for (int pass = 0; pass < 2; pass++) {
        size_t cap = pass ? b.len + 1 : 0;
        if (pass && !(out = malloc(cap)))
            return NULL;
        sl_text_fixed(&b, out, cap);
        size_t kept = 0;
        for (size_t i = 0; i < n && kept < 12; i++) {
            if (py ? !is_python(fr[i].filename) : useful && is_plumbing(&fr[i]))
                continue;
            const char *file = fr[i].filename ? fr[i].filename : "";
            const char *name = fr[i].name && *fr[i].name ? fr[i].name : "??";
            /* C++ signatures run to hundreds of characters: 160 say enough */
            if (!*file || strcmp(file, "??") == 0)
                sl_text_printf(&b, "%s%.160s", kept ? "\n" : "", name);
            else if (fr[i].line > 0)
                sl_text_printf(&b, "%s%s:%d %.160s", kept ? "\n" : "", file, fr[i].line, name);
            else
                sl_text_printf(&b, "%s%s %.160s", kept ? "\n" : "", file, name);
            kept++;
        }
    }
    return out;
}

/* Replace the allocator's stack ids by indices into st->stacks. */
static sublet_status resolve_stacks(sublet_allocator *a, sublet_frag_state *st)
{
    size_t n = 0;
    for (size_t i = 0; i < st->nblocks; i++)
        n += st->blocks[i].stack != 0;
    if (!n)
        return SUBLET_OK;
    uint32_t *ids = malloc(n * sizeof *ids);
    if (!ids)
        return SUBLET_ERR_NO_MEMORY;
    n = 0;
    for (size_t i = 0; i < st->nblocks; i++)
        if (st->blocks[i].stack)
            ids[n++] = st->blocks[i].stack;
    qsort(ids, n, sizeof *ids, cmp_u32);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || ids[u - 1] != ids[i])
            ids[u++] = ids[i];
    st->stacks = calloc(u, sizeof *st->stacks);
    if (!st->stacks) {
        free(ids);
        return SUBLET_ERR_NO_MEMORY;
    }
    st->nstacks = u;
    for (size_t k = 0; k < u; k++) {
        const sublet_frame *fr = NULL;
        size_t nf = sublet_stack_frames(a, ids[k], &fr);
        st->stacks[k] = sl_frag_stack_text(fr, nf);
        if (!st->stacks[k]) {
            free(ids);
            return SUBLET_ERR_NO_MEMORY;
        }
    }
    for (size_t i = 0; i < st->nblocks; i++) {
        uint32_t id = st->blocks[i].stack;
        if (!id)
            continue;
        uint32_t *hit = bsearch(&id, ids, u, sizeof *ids, cmp_u32);
        st->blocks[i].stack = hit ? (uint32_t)(hit - ids) + 1 : 0;
    }
    free(ids);
    return SUBLET_OK;
}

void sublet_frag_state_free(sublet_frag_state *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->nstacks; i++)
        free(st->stacks[i]);
    free(st->stacks);
    free(st->segments);
    free(st->blocks);
    free(st);
}

sublet_status sublet_frag_capture(sublet_allocator *a, sublet_frag_state **out)
{
    if (!a || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    sublet_frag_state *st = calloc(1, sizeof *st);
    if (!st)
        return SUBLET_ERR_NO_MEMORY;
    sl_frag_builder b = {.st = st};
    sublet_segments_walk(a, walk_cb, &b);
    sublet_settings_get(a, &st->settings);
    sublet_status rc = b.oom ? SUBLET_ERR_NO_MEMORY : resolve_stacks(a, st);
    if (rc != SUBLET_OK) {
        sublet_frag_state_free(st);
        return rc;
    }
    *out = st;
    return SUBLET_OK;
}

/* ---- metrics ------------------------------------------------------------------------- */

static int pool_match(int pool_kind, const sublet_frag_segment *s)
{
    return pool_kind == SUBLET_POOL_ALL || pool_kind == sl_frag_kind(s);
}

sublet_status sublet_frag_compute(const sublet_frag_state *st, int pool_kind, sublet_stream stream,
                                  sublet_frag_stats *o)
{
    if (!st || !o || pool_kind < SUBLET_POOL_ALL || pool_kind > SUBLET_POOL_LARGE)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(o, 0, sizeof *o);
    double squares = 0.0;
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        if (!pool_match(pool_kind, s))
            continue;
        o->reserved_bytes += s->size;
        o->allocated_bytes += s->allocated_size;
        o->active_bytes += s->active_size;
        o->requested_bytes += s->requested_size;
        int split = !s->is_expandable && s->nblocks > 1;
        int counted = stream == SUBLET_STREAM_ALL || s->stream == stream;
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *b = &st->blocks[s->first_block + k];
            if (b->state != SUBLET_BLOCK_INACTIVE)
                continue;
            if (split)
                o->inactive_split_bytes += b->size;
            if (!counted)
                continue;
            o->free_blocks++;
            o->free_bytes += b->size;
            squares += (double)b->size * (double)b->size;
            if (b->size > o->largest_free_block)
                o->largest_free_block = b->size;
        }
    }
    sl_frag_derive(o, squares);
    return SUBLET_OK;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

size_t sublet_frag_streams(const sublet_frag_state *st, sublet_stream *out, size_t cap)
{
    if (!st || !st->nsegments)
        return 0;
    sublet_stream *all = malloc(st->nsegments * sizeof *all);
    if (!all)
        return 0;
    for (size_t i = 0; i < st->nsegments; i++)
        all[i] = st->segments[i].stream;
    qsort(all, st->nsegments, sizeof *all, cmp_u64);
    size_t n = 0;
    for (size_t i = 0; i < st->nsegments; i++) {
        if (n && all[i] == all[n - 1])
            continue;
        if (out && n < cap)
            out[n] = all[i];
        all[n++] = all[i];
    }
    free(all);
    return n;
}

/* The largest n >= lo whose rounded size fits in `block` (as src/frag.c). */
static uint64_t largest_fitting(const sublet_settings *s, uint64_t block, uint64_t lo)
{
    if (block < lo || sublet_round_size(s, lo) > block)
        return 0;
    uint64_t hi = block;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (sublet_round_size(s, mid) <= block)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static uint64_t largest_free_in(const sublet_frag_state *st, const uint64_t pool[2], int kind,
                                sublet_stream stream, int skip_expandable)
{
    uint64_t best = 0;
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        if (!sl_frag_same_pool(s, pool) || sl_frag_kind(s) != kind || s->stream != stream ||
            (skip_expandable && s->is_expandable))
            continue;
        if (s->largest_free > best)
            best = s->largest_free;
    }
    return best;
}

uint64_t sublet_frag_max_allocatable(const sublet_frag_state *st, sublet_stream stream)
{
    static const uint64_t dflt[2] = {0, 0};
    return sublet_frag_max_allocatable_in(st, dflt, stream);
}

uint64_t sublet_frag_max_allocatable_in(const sublet_frag_state *st, const uint64_t pool_id[2],
                                        sublet_stream stream)
{
    if (!st || !pool_id)
        return 0;
    const sublet_settings *set = &st->settings;
    int skip = !(set->expandable_segments || set->policy == SUBLET_POLICY_STITCH);
    uint64_t big = largest_free_in(st, pool_id, SUBLET_POOL_LARGE, stream, skip);
    uint64_t best = big ? largest_fitting(set, big, SL_SMALL_SIZE + 1) : 0;
    if (!best) {
        uint64_t sm = largest_free_in(st, pool_id, SUBLET_POOL_SMALL, stream, skip);
        if (sm)
            best = largest_fitting(set, sm < SL_SMALL_SIZE ? sm : SL_SMALL_SIZE, 1);
    }
    return best;
}

/* ---- per pool ------------------------------------------------------------------------ */

int sublet_frag_has_private_pools(const sublet_frag_state *st)
{
    for (size_t i = 0; st && i < st->nsegments; i++)
        if (sl_frag_is_private(&st->segments[i]))
            return 1;
    return 0;
}

const char *sublet_frag_pool_name(const uint64_t pool_id[2], char *buf, size_t cap)
{
    if (!pool_id[0] && !pool_id[1])
        snprintf(buf, cap, "default pools (0,0)");
    else
        snprintf(buf, cap, "private pool (%" PRIu64 ",%" PRIu64 ")", pool_id[0], pool_id[1]);
    return buf;
}

static int cmp_pool_id(const void *x, const void *y)
{
    const uint64_t *a = x, *b = y;
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

static void pool_add(sublet_frag_pool *p, const sublet_frag_state *st, const sublet_frag_segment *s)
{
    p->segments++;
    p->reserved_bytes += s->size;
    p->allocated_bytes += s->allocated_size;
    p->active_bytes += s->active_size;
    p->requested_bytes += s->requested_size;
    p->free_bytes += s->free_size;
    if (s->largest_free > p->largest_free_block)
        p->largest_free_block = s->largest_free;
    if (s->live_blocks) {
        p->pinned_segments++;
        p->pinned_free_bytes += s->free_size;
    }
    for (size_t k = 0; k < s->nblocks; k++)
        p->free_blocks += st->blocks[s->first_block + k].state == SUBLET_BLOCK_INACTIVE;
}

size_t sublet_frag_pools(const sublet_frag_state *st, sublet_frag_pool *out, size_t cap)
{
    if (!st)
        return 0;
    /* the distinct private ids, ascending (the default pools are always first) */
    uint64_t(*ids)[2] = st->nsegments ? malloc(st->nsegments * sizeof *ids) : NULL;
    size_t n = 0;
    if (st->nsegments && !ids)
        return 0;
    for (size_t i = 0; i < st->nsegments; i++)
        if (sl_frag_is_private(&st->segments[i])) {
            ids[n][0] = st->segments[i].pool_id[0];
            ids[n][1] = st->segments[i].pool_id[1];
            n++;
        }
    if (n)
        qsort(ids, n, sizeof *ids, cmp_pool_id);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || cmp_pool_id(ids[u - 1], ids[i]) != 0) {
            ids[u][0] = ids[i][0];
            ids[u][1] = ids[i][1];
            u++;
        }
    size_t total = u + 1;
    for (size_t p = 0; out && p < total && p < cap; p++) {
        sublet_frag_pool *o = &out[p];
        memset(o, 0, sizeof *o);
        if (p) {
            o->pool_id[0] = ids[p - 1][0];
            o->pool_id[1] = ids[p - 1][1];
        }
        for (size_t i = 0; i < st->nsegments; i++)
            if (sl_frag_same_pool(&st->segments[i], o->pool_id))
                pool_add(o, st, &st->segments[i]);
    }
    free(ids);
    return total;
}

sublet_frag_pool *sl_frag_pools_of(const sublet_frag_state *st, size_t *n)
{
    *n = sublet_frag_pools(st, NULL, 0);
    sublet_frag_pool *p = *n ? malloc(*n * sizeof *p) : NULL;
    if (p)
        *n = sublet_frag_pools(st, p, *n);
    else
        *n = 0;
    return p;
}

unsigned sublet_frag_bucket(uint64_t size)
{
    unsigned k = 0;
    while (size > 1) {
        size >>= 1;
        k++;
    }
    return k;
}

void sublet_frag_histogram_of(const sublet_frag_state *st, int pool_kind,
                              sublet_frag_histogram *out)
{
    memset(out, 0, sizeof *out);
    if (!st)
        return;
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        if (!pool_match(pool_kind, s))
            continue;
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *b = &st->blocks[s->first_block + k];
            if (b->state != SUBLET_BLOCK_INACTIVE)
                continue;
            unsigned q = sublet_frag_bucket(b->size);
            out->count[q]++;
            out->bytes[q] += b->size;
        }
    }
}

typedef struct pin_key {
    uint64_t hostage, live, addr;
    size_t idx;
} pin_key;

static int cmp_pin(const void *x, const void *y)
{
    const pin_key *a = x, *b = y;
    if (a->hostage != b->hostage)
        return a->hostage > b->hostage ? -1 : 1;
    if (a->live != b->live)
        return a->live < b->live ? -1 : 1;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

static int pins(const sublet_frag_segment *s)
{
    return s->live_blocks > 0 && s->active_size < s->size;
}

size_t sublet_frag_pinning(const sublet_frag_state *st, size_t *out, size_t cap)
{
    if (!st)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < st->nsegments; i++)
        n += pins(&st->segments[i]);
    if (!n || !out || !cap)
        return n;
    pin_key *keys = malloc(n * sizeof *keys);
    if (!keys)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        if (pins(s))
            keys[k++] = (pin_key){s->size - s->active_size, s->live_blocks, s->addr, i};
    }
    qsort(keys, n, sizeof *keys, cmp_pin);
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = keys[i].idx;
    free(keys);
    return n;
}

/* ---- texts --------------------------------------------------------------------------- */

static const char *pool_name(const sublet_frag_segment *s)
{
    return s->is_small ? "small" : "large";
}

void sl_frag_pinning_text(sl_text *b, const sublet_frag_state *st, size_t n, size_t max_live,
                          size_t max_frames, int indent)
{
    size_t top[64];
    if (n > 64)
        n = 64;
    size_t total = sublet_frag_pinning(st, top, n);
    char t1[32], t2[32], t3[32];
    if (!total) {
        sl_text_printf(b, "%*sno segment holds free memory next to live blocks\n", indent, "");
        return;
    }
    size_t shown = total < n ? total : n;
    for (size_t r = 0; r < shown; r++) {
        const sublet_frag_segment *s = &st->segments[top[r]];
        uint64_t hostage = s->size - s->active_size;
        char owner[64] = "", pn[48];
        if (sl_frag_is_private(s))
            snprintf(owner, sizeof owner, "%s: ", sublet_frag_pool_name(s->pool_id, pn, sizeof pn));
        sl_text_printf(b,
                     "%*s%zu. segment 0x%" PRIx64 " (%s%s pool%s, stream %" PRIu64 "), %s: %s free "
                       "(%.1f %%) held by %zu live block%s, largest free block %s\n",
                       indent, "", r + 1, s->addr, owner, pool_name(s),
                       s->is_expandable ? ", expandable" : "", s->stream, sl_fb_size(s->size, t1),
                       sl_fb_size(hostage, t2), 100.0 * (double)hostage / (double)s->size,
                       s->live_blocks, s->live_blocks == 1 ? "" : "s",
                       sl_fb_size(s->largest_free, t3));
        size_t listed = 0;
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *blk = &st->blocks[s->first_block + k];
            if (blk->state == SUBLET_BLOCK_INACTIVE)
                continue;
            if (listed == max_live) {
                sl_text_printf(b, "%*s     ... and %zu more live block%s\n", indent, "",
                               s->live_blocks - listed, s->live_blocks - listed == 1 ? "" : "s");
                break;
            }
            listed++;
            sl_text_printf(
                b, "%*s     live block 0x%" PRIx64 ": %s (requested %s), stream %" PRIu64 "%s%s\n",
                           indent, "", blk->addr, sl_fb_size(blk->size, t1),
                           sl_fb_size(blk->requested_size, t2), s->stream,
                           blk->state == SUBLET_BLOCK_ACTIVE_PENDING_FREE
                           ? ", freed but waiting on another stream"
                           : "",
                blk->stack && blk->stack <= st->nstacks && max_frames ? ", allocated at:" : "");
            if (!blk->stack || blk->stack > st->nstacks || !max_frames)
                continue;
            const char *p = st->stacks[blk->stack - 1];
            for (size_t f = 0; f < max_frames && *p; f++) {
                const char *e = strchr(p, '\n');
                size_t len = e ? (size_t)(e - p) : strlen(p);
                sl_text_printf(b, "%*s       %.*s\n", indent, "", (int)len, p);
                p += len + (e ? 1 : 0);
            }
        }
    }
    if (total > shown)
        sl_text_printf(b, "%*s(%zu more pinning segment%s)\n", indent, "", total - shown,
                       total - shown == 1 ? "" : "s");
}

static void metrics_rows(sl_text *b, const sublet_frag_stats m[3])
{
    static const int order[3] = {SUBLET_POOL_ALL, SUBLET_POOL_LARGE, SUBLET_POOL_SMALL};
    char t[32];
#define ROW_BYTES(title, field)                                                                    \
    do {                                                                                           \
        sl_text_printf(b, "  %-34s", title);                                                       \
        for (int i = 0; i < 3; i++)                                                                \
            sl_text_printf(b, " %13s", sl_fb_size(m[order[i]].field, t));                          \
        sl_text_puts(b, "\n");                                                                     \
    } while (0)
#define ROW_PCT(title, field)                                                                      \
    do {                                                                                           \
        sl_text_printf(b, "  %-34s", title);                                                       \
        for (int i = 0; i < 3; i++)                                                                \
            sl_text_printf(b, " %11.2f %%", 100.0 * m[order[i]].field);                            \
        sl_text_puts(b, "\n");                                                                     \
    } while (0)
    sl_text_printf(b, "  %-34s %13s %13s %13s\n", "", "all pools", "large pool", "small pool");
    ROW_BYTES("reserved", reserved_bytes);
    ROW_BYTES("allocated", allocated_bytes);
    ROW_BYTES("active (allocated + pending free)", active_bytes);
    ROW_BYTES("requested (live tensors)", requested_bytes);
    ROW_BYTES("reserved but unallocated", unallocated_bytes);
    ROW_BYTES("inactive split (non-releasable)", inactive_split_bytes);
    ROW_BYTES("internal waste (allocated-requested)", internal_waste_bytes);
    sl_text_printf(b, "  %-34s", "free blocks");
    for (int i = 0; i < 3; i++)
        sl_text_printf(b, " %13" PRIu64, m[order[i]].free_blocks);
    sl_text_puts(b, "\n");
    ROW_BYTES("free bytes in free blocks", free_bytes);
    ROW_BYTES("largest free block", largest_free_block);
    ROW_PCT("external: 1 - largest free / free", external);
    ROW_PCT("unused: 1 - active / reserved", unused);
    ROW_PCT("spread: 1 - sum f^2 / (sum f)^2", spread);
#undef ROW_BYTES
#undef ROW_PCT
}

/* "512 B", "64 KiB", "2 MiB", "1 GiB" for a power of two. */
static const char *pow2_name(uint64_t v, char tmp[32])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    snprintf(tmp, 32, "%" PRIu64 " %s", v, units[u]);
    return tmp;
}

static void histogram_text(sl_text *b, const sublet_frag_state *st)
{
    sublet_frag_histogram h;
    sublet_frag_histogram_of(st, SUBLET_POOL_ALL, &h);
    uint64_t most = 0;
    for (unsigned k = 0; k < SUBLET_FRAG_HIST_BUCKETS; k++)
        if (h.count[k] > most)
            most = h.count[k];
    sl_text_puts(b, "free blocks by size (log2 buckets):\n");
    if (!most) {
        sl_text_puts(b, "  none\n");
        return;
    }
    char t1[32], t2[32], t3[32];
    for (unsigned k = 0; k < SUBLET_FRAG_HIST_BUCKETS; k++) {
        if (!h.count[k])
            continue;
        uint64_t lo = UINT64_C(1) << k, hi = k < 63 ? lo << 1 : UINT64_MAX;
        unsigned bar = (unsigned)((h.count[k] * 40 + most - 1) / most);
        char bars[41];
        memset(bars, '#', bar);
        bars[bar] = '\0';
        sl_text_printf(b, "  [%7s, %7s) %7" PRIu64 " blocks %12s  %s\n", pow2_name(lo, t1),
                       k < 63 ? pow2_name(hi, t2) : "max", h.count[k], sl_fb_size(h.bytes[k], t3),
                       bars);
    }
}

void sublet_frag_map_row(const sublet_frag_state *st, size_t segment, unsigned width, char *row)
{
    const sublet_frag_segment *s = &st->segments[segment];
    size_t k = 0;
    for (unsigned c = 0; c < width; c++) {
        uint64_t lo = s->addr + (uint64_t)((double)s->size * c / width);
        uint64_t hi = s->addr + (uint64_t)((double)s->size * (c + 1) / width);
        if (c + 1 == width)
            hi = s->addr + s->size;
        uint64_t cover[3] = {0, 0, 0};
        while (k < s->nblocks) {
            const sublet_frag_block *b = &st->blocks[s->first_block + k];
            uint64_t e = b->addr + b->size;
            uint64_t a0 = b->addr > lo ? b->addr : lo, a1 = e < hi ? e : hi;
            if (a1 > a0)
                cover[b->state] += a1 - a0;
            if (e > hi)
                break;
            k++;
        }
        char ch = '.';
        if (cover[SUBLET_BLOCK_ACTIVE_ALLOCATED] >= cover[SUBLET_BLOCK_INACTIVE] &&
            cover[SUBLET_BLOCK_ACTIVE_ALLOCATED] >= cover[SUBLET_BLOCK_ACTIVE_PENDING_FREE] &&
            cover[SUBLET_BLOCK_ACTIVE_ALLOCATED])
            ch = '#';
        else if (cover[SUBLET_BLOCK_ACTIVE_PENDING_FREE] > cover[SUBLET_BLOCK_INACTIVE])
            ch = '+';
        row[c] = ch;
    }
    row[width] = '\0';
    /* a live block narrower than a column still shows, at its first column */
    for (k = 0; k < s->nblocks; k++) {
        const sublet_frag_block *b = &st->blocks[s->first_block + k];
        if (b->state == SUBLET_BLOCK_INACTIVE)
            continue;
        char want = b->state == SUBLET_BLOCK_ACTIVE_ALLOCATED ? '#' : '+';
        unsigned c0 = (unsigned)((double)(b->addr - s->addr) * width / (double)s->size);
        unsigned c1 = (unsigned)((double)(b->addr + b->size - s->addr) * width / (double)s->size);
        if (c0 >= width)
            c0 = width - 1;
        if (c1 >= width)
            c1 = width - 1;
        int seen = 0;
        for (unsigned c = c0; c <= c1 && !seen; c++)
            seen = row[c] == want;
        if (!seen && row[c0] == '.')
            row[c0] = want;
    }
}

static void map_rows(sl_text *b, const sublet_frag_state *st, unsigned width, char *row,
                     const uint64_t *pool)
{
    char t[32];
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        if (pool && !sl_frag_same_pool(s, pool))
            continue;
        sublet_frag_map_row(st, i, width, row);
        sl_text_printf(b, "  0x%012" PRIx64 " %11s %c%s s%-3" PRIu64 " |%s|\n", s->addr,
                     sl_fb_size(s->size, t), s->is_small ? 'S' : 'L', s->is_expandable ? "E" : " ",
                       s->stream, row);
    }
}

/* One line per segment; with private pools, grouped by pool under a line
 * naming each (the default pools first). */
static void map_text(sl_text *b, const sublet_frag_state *st, unsigned width)
{
    char *row = malloc((size_t)width + 1);
    if (!row)
        return;
    size_t np = 0;
    sublet_frag_pool *pools = sublet_frag_has_private_pools(st) ? sl_frag_pools_of(st, &np) : NULL;
    if (!pools) {
        map_rows(b, st, width, row, NULL);
        free(row);
        return;
    }
    char pn[48], t1[32], t2[32];
    for (size_t p = 0; p < np; p++) {
        sl_text_printf(b, " %s: %zu segment%s, %s reserved, %s free\n",
                       sublet_frag_pool_name(pools[p].pool_id, pn, sizeof pn), pools[p].segments,
                       pools[p].segments == 1 ? "" : "s", sl_fb_size(pools[p].reserved_bytes, t1),
                       sl_fb_size(pools[p].free_bytes, t2));
        map_rows(b, st, width, row, pools[p].pool_id);
    }
    free(pools);
    free(row);
}

/* The per-pool group of the metrics section (only with private pools). */
static void pools_text(sl_text *b, const sublet_frag_state *st)
{
    size_t np = 0;
    sublet_frag_pool *pools = sl_frag_pools_of(st, &np);
    if (!pools)
        return;
    char pn[48], t[6][32];
    sl_text_puts(b,
                 "  per pool (a block never moves to another pool: the free memory of one serves "
                 "only its own requests; pinned: segments with a live block, which empty_cache "
                 "cannot release):\n");
    sl_text_printf(b, "    %-26s %8s %11s %11s %11s %11s %12s %15s\n", "pool", "segments",
                   "reserved", "allocated", "active", "free", "largest free", "pinned (free)");
    for (size_t p = 0; p < np; p++) {
        const sublet_frag_pool *q = &pools[p];
        char pinned[64];
        snprintf(pinned, sizeof pinned, "%zu (%s)", q->pinned_segments,
                 sl_fb_size(q->pinned_free_bytes, t[5]));
        sl_text_printf(b, "    %-26s %8zu %11s %11s %11s %11s %12s %15s\n",
                       sublet_frag_pool_name(q->pool_id, pn, sizeof pn), q->segments,
                       sl_fb_size(q->reserved_bytes, t[0]), sl_fb_size(q->allocated_bytes, t[1]),
                       sl_fb_size(q->active_bytes, t[2]), sl_fb_size(q->free_bytes, t[3]),
                       sl_fb_size(q->largest_free_block, t[4]), pinned);
    }
    free(pools);
}

size_t sublet_frag_format_map(const sublet_frag_state *st, unsigned width, char *buf, size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (st)
        map_text(&b, st, width ? width : 64);
    return b.len;
}

size_t sublet_frag_format_text(const sublet_frag_state *st, const sublet_frag_format_options *o,
                               char *buf, size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (!st)
        return 0;
    sublet_frag_format_options d = {0};
    if (o)
        d = *o;
    if (!d.sections)
        d.sections = SUBLET_FRAG_SECTION_METRICS | SUBLET_FRAG_SECTION_HISTOGRAM |
                     SUBLET_FRAG_SECTION_PINNING;
    size_t top = d.top_pinning ? d.top_pinning : 5;
    size_t live = d.max_live_blocks ? d.max_live_blocks : 4;
    size_t frames = d.max_frames ? d.max_frames : 4;
    unsigned width = d.map_width ? d.map_width : 64;
    char t1[32], t2[32], t3[32];
    if (d.sections & SUBLET_FRAG_SECTION_METRICS) {
        sublet_frag_stats m[3];
        for (int k = 0; k < 3; k++)
            sublet_frag_compute(st, k, SUBLET_STREAM_ALL, &m[k]);
        sl_text_printf(&b, "fragmentation (%zu segments, %zu blocks):\n", st->nsegments,
                       st->nblocks);
        metrics_rows(&b, m);
        size_t ns = sublet_frag_streams(st, NULL, 0);
        sublet_stream *streams = ns ? malloc(ns * sizeof *streams) : NULL;
        if (streams) {
            sublet_frag_streams(st, streams, ns);
            sl_text_puts(&b,
                         "  per stream (free blocks of both pools; max allocatable: the largest "
                         "request served without a device allocation):\n");
            for (size_t i = 0; i < ns; i++) {
                sublet_frag_stats f;
                sublet_frag_compute(st, SUBLET_POOL_ALL, streams[i], &f);
                sl_text_printf(&b,
                               "    stream %" PRIu64 ": %" PRIu64
                               " free blocks, %s free, largest %s, "
                               "external %.2f %%, max allocatable %s\n",
                               streams[i], f.free_blocks, sl_fb_size(f.free_bytes, t1),
                               sl_fb_size(f.largest_free_block, t2), 100.0 * f.external,
                               sl_fb_size(sublet_frag_max_allocatable(st, streams[i]), t3));
            }
            free(streams);
        }
        if (sublet_frag_has_private_pools(st))
            pools_text(&b, st);
    }
    if (d.sections & SUBLET_FRAG_SECTION_HISTOGRAM)
        histogram_text(&b, st);
    if (d.sections & SUBLET_FRAG_SECTION_PINNING) {
        size_t total = sublet_frag_pinning(st, NULL, 0);
        sl_text_printf(&b,
                       "segments pinning free memory (mostly free, yet held by live blocks; "
                       "top %zu of %zu):\n",
                       top < total ? top : total, total);
        sl_frag_pinning_text(&b, st, top, live, frames, 2);
    }
    if (d.sections & SUBLET_FRAG_SECTION_MAP) {
        sl_text_printf(&b,
                       "segment map ('#' allocated, '+' pending free, '.' free; %u columns per "
                       "segment, to scale):\n",
                       width);
        map_text(&b, st, width);
    }
    return b.len;
}

/* ---- flat keys --------------------------------------------------------------------------- */

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static int push_line(char ***lines, size_t *n, size_t *cap, const char *fmt, ...)
    SL_TEXT_PRINTF(4, 5);
static int push_line(char ***lines, size_t *n, size_t *cap, const char *fmt, ...)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        char **l = realloc(*lines, nc * sizeof *l);
        if (!l)
            return -1;
        *lines = l;
        *cap = nc;
    }
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    char *s = malloc(strlen(tmp) + 1);
    if (!s)
        return -1;
    strcpy(s, tmp);
    (*lines)[(*n)++] = s;
    return 0;
}

size_t sublet_frag_format_flat(const sublet_frag_state *st, char *buf, size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (!st)
        return 0;
    static const char *const pools[3] = {"all", "small_pool", "large_pool"};
    char **lines = NULL;
    size_t n = 0, lcap = 0;
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        sublet_frag_stats m;
        sublet_frag_compute(st, k, SUBLET_STREAM_ALL, &m);
        const char *p = pools[k];
#define PUSH_U(key)                                                                                \
    bad |= push_line(&lines, &n, &lcap, "fragmentation.%s." #key " %" PRIu64, p, m.key)
#define PUSH_D(key) bad |= push_line(&lines, &n, &lcap, "fragmentation.%s." #key " %.6f", p, m.key)
        PUSH_U(reserved_bytes);
        PUSH_U(allocated_bytes);
        PUSH_U(active_bytes);
        PUSH_U(requested_bytes);
        PUSH_U(inactive_split_bytes);
        PUSH_U(unallocated_bytes);
        PUSH_U(free_bytes);
        PUSH_U(free_blocks);
        PUSH_U(largest_free_block);
        PUSH_U(internal_waste_bytes);
        PUSH_D(external);
        PUSH_D(unused);
        PUSH_D(spread);
#undef PUSH_U
#undef PUSH_D
    }
    size_t ns = sublet_frag_streams(st, NULL, 0);
    sublet_stream *streams = ns ? malloc(ns * sizeof *streams) : NULL;
    if (streams) {
        sublet_frag_streams(st, streams, ns);
        for (size_t i = 0; i < ns; i++) {
            sublet_frag_stats m;
            sublet_frag_compute(st, SUBLET_POOL_ALL, streams[i], &m);
            uint64_t s = streams[i];
            bad |= push_line(&lines, &n, &lcap,
                             "fragmentation.stream_%" PRIu64 ".free_blocks %" PRIu64, s,
                             m.free_blocks);
            bad |=
                push_line(&lines, &n, &lcap, "fragmentation.stream_%" PRIu64 ".free_bytes %" PRIu64,
                          s, m.free_bytes);
            bad |= push_line(&lines, &n, &lcap,
                             "fragmentation.stream_%" PRIu64 ".largest_free_block %" PRIu64, s,
                             m.largest_free_block);
            bad |= push_line(&lines, &n, &lcap, "fragmentation.stream_%" PRIu64 ".external %.6f", s,
                             m.external);
            bad |= push_line(&lines, &n, &lcap, "fragmentation.stream_%" PRIu64 ".spread %.6f", s,
                             m.spread);
            bad |= push_line(&lines, &n, &lcap,
                             "fragmentation.stream_%" PRIu64 ".max_allocatable %" PRIu64, s,
                             sublet_frag_max_allocatable(st, s));
        }
        free(streams);
    }
    size_t np = 0;
    sublet_frag_pool *pp = sublet_frag_has_private_pools(st) ? sl_frag_pools_of(st, &np) : NULL;
    for (size_t p = 0; p < np; p++) {
        const sublet_frag_pool *q = &pp[p];
        char key[80];
        snprintf(key, sizeof key, "fragmentation.pool_%" PRIu64 "_%" PRIu64, q->pool_id[0],
                 q->pool_id[1]);
#define PUSH_P(field, v) bad |= push_line(&lines, &n, &lcap, "%s." #field " %" PRIu64, key, (uint64_t)(v))
        PUSH_P(segments, q->segments);
        PUSH_P(pinned_segments, q->pinned_segments);
        PUSH_P(reserved_bytes, q->reserved_bytes);
        PUSH_P(allocated_bytes, q->allocated_bytes);
        PUSH_P(active_bytes, q->active_bytes);
        PUSH_P(requested_bytes, q->requested_bytes);
        PUSH_P(free_bytes, q->free_bytes);
        PUSH_P(free_blocks, q->free_blocks);
        PUSH_P(largest_free_block, q->largest_free_block);
        PUSH_P(pinned_free_bytes, q->pinned_free_bytes);
#undef PUSH_P
    }
    free(pp);
    (void)bad; /* a line that could not be made is left out */
    qsort(lines, n, sizeof *lines, cmp_str);
    for (size_t i = 0; i < n; i++) {
        sl_text_puts(&b, lines[i]);
        sl_text_puts(&b, "\n");
        free(lines[i]);
    }
    free(lines);
    return b.len;
}
