/* sublet — what an answer fixes, in one sentence tied to the trace: two
 * recorded replays (the current settings and the answer) on the user's
 * device, the rows where the current settings took new device memory and
 * the answer did not, and the splits of cached blocks before them; else the
 * first OOM of the current settings on the answer's minimum device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/history.h"
#include "tune/tune_internal.h"

/* ---- the diagnosis: what the answer fixes, in one sentence --------------------------- */

void tn_fmt_size(uint64_t b, char *out, size_t cap)
{
    if (b >= GIB && b % GIB == 0)
        snprintf(out, cap, "%llu GiB", (unsigned long long)(b / GIB));
    else if (b >= GIB)
        snprintf(out, cap, "%.2f GiB", (double)b / (double)GIB);
    else if (b >= MIB && b % MIB == 0)
        snprintf(out, cap, "%llu MiB", (unsigned long long)(b / MIB));
    else if (b >= MIB)
        snprintf(out, cap, "%.2f MiB", (double)b / (double)MIB);
    else if (b >= 1024)
        snprintf(out, cap, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(out, cap, "%llu bytes", (unsigned long long)b);
}

static void fmt_events(uint64_t lo, uint64_t hi, char *out, size_t cap)
{
    if (lo == hi)
        snprintf(out, cap, "event %llu", (unsigned long long)lo);
    else
        snprintf(out, cap, "events %llu–%llu", (unsigned long long)lo, (unsigned long long)hi);
}

/* What the answer's settings do differently from the current ones. */
static void mechanism(const char *version, const char *from, const char *to, char *out,
                      size_t cap)
{
    sublet_settings a, b;
    tn_settings_of(version, from, &a);
    tn_settings_of(version, to, &b);
    size_t n = 0;
    out[0] = '\0';
#define SAY(...)                                                                  \
    do {                                                                          \
        if (n < cap)                                                              \
            n += (size_t)snprintf(out + n, cap - n, "%s", n ? "; " : "");        \
        if (n < cap)                                                              \
            n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__);                \
    } while (0)
    if (b.policy == SUBLET_POLICY_STITCH && a.policy != SUBLET_POLICY_STITCH)
        SAY("policy:stitch backs every block with 2 MiB pages, so free pages anywhere serve "
            "any request");
    else if (b.expandable_segments && !a.expandable_segments)
        SAY("expandable_segments:True grows one segment per stream page by page, so freed "
            "pages serve later requests of any size");
    else if (!b.expandable_segments && a.expandable_segments)
        SAY("without expandable segments requests get whole segments of their own");
    if (b.max_split_size != a.max_split_size) {
        if (b.max_split_size == SUBLET_SIZE_UNLIMITED)
            SAY("without max_split_size_mb every cached block may be split");
        else
            SAY("max_split_size_mb:%llu keeps cached blocks of %llu MiB or more whole: only "
                "requests of that size take them",
                (unsigned long long)(b.max_split_size / MIB),
                (unsigned long long)(b.max_split_size / MIB));
    }
    if (b.max_non_split_rounding != a.max_non_split_rounding &&
        b.max_split_size != SUBLET_SIZE_UNLIMITED)
        SAY("max_non_split_rounding_mb:%llu lets an oversize request take a cached block up "
            "to %llu MiB larger",
            (unsigned long long)(b.max_non_split_rounding / MIB),
            (unsigned long long)(b.max_non_split_rounding / MIB));
    if (memcmp(a.roundup_power2_divisions, b.roundup_power2_divisions,
               sizeof a.roundup_power2_divisions) != 0) {
        int any = 0;
        for (int i = 0; i < SUBLET_ROUNDUP_BUCKETS; i++)
            any |= b.roundup_power2_divisions[i] > 1;
        if (any)
            SAY("roundup_power2_divisions rounds requests up to a few sizes per power of two, "
                "so freed blocks fit later requests of nearby sizes");
        else
            SAY("without roundup_power2_divisions requests are rounded to 512 bytes only");
    }
    if (b.garbage_collection_threshold > 0 && b.per_process_memory_fraction < 1.0 &&
        !(a.garbage_collection_threshold > 0 && a.per_process_memory_fraction < 1.0))
        SAY("garbage_collection_threshold:%g frees the least recently used cached segments "
            "once %g %% of the memory limit is reserved, instead of freeing the whole cache "
            "on a failed allocation",
            b.garbage_collection_threshold, b.garbage_collection_threshold * 100.0);
    if (!n)
        SAY("the settings differ only in options that did not matter here");
#undef SAY
}


/* A sorted set of uint64 (a plain array; the sets here hold live blocks and
 * segments, thousands at most). */
typedef struct uset {
    uint64_t *k, *v;
    size_t n, cap;
} uset;

static size_t uset_lb(const uset *s, uint64_t key)
{
    return tn_lower_bound(s->k, s->n, key);
}

static int uset_put(uset *s, uint64_t key, uint64_t val)
{
    size_t i = uset_lb(s, key);
    if (i < s->n && s->k[i] == key) {
        s->v[i] = val;
        return 1;
    }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 256;
        uint64_t *k = realloc(s->k, nc * sizeof *k);
        if (!k)
            return 0;
        s->k = k;
        uint64_t *v = realloc(s->v, nc * sizeof *v);
        if (!v)
            return 0;
        s->v = v;
        s->cap = nc;
    }
    memmove(s->k + i + 1, s->k + i, (s->n - i) * sizeof *s->k);
    memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
    s->k[i] = key;
    s->v[i] = val;
    s->n++;
    return 1;
}

static void uset_del(uset *s, uint64_t key)
{
    size_t i = uset_lb(s, key);
    if (i < s->n && s->k[i] == key) {
        memmove(s->k + i, s->k + i + 1, (s->n - i - 1) * sizeof *s->k);
        memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
        s->n--;
    }
}

static void uset_free(uset *s)
{
    free(s->k);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- a recorded replay, read as it goes ------------------------------------------------
 * The replay records with row indices as times (record_row_times) and its
 * history is taken after every row (sublet_history_take), so that the ring
 * holds one row's entries and nothing is kept per row of the trace: only
 * the rows that took new device memory, and for the current settings the
 * splits of cached blocks. */

/* New device memory (segments or mapped pages) taken at a row. */
typedef struct rowmem {
    uint64_t row, bytes;
} rowmem;

/* A large-pool split: an allocation served from a cached block larger than
 * it (the block starts where the allocation does, and ends at the next live
 * block or the segment's end). */
typedef struct split {
    uint64_t event, request, rounded, taken;
} split;

typedef struct watch {
    uint64_t n, npre; /* rows of the trace, of its prelude */
    /* the recorded segment_alloc rows driven so far, ascending (entry_event) */
    uint64_t *segrows;
    size_t nseg, segcap;
    rowmem *m; /* new memory by row, sorted and merged at the end */
    size_t nm, mcap;
    const sublet_settings *s; /* the splits under these settings; NULL: none looked for */
    uset segs, live;
    uint64_t fresh; /* a segment just created: the next alloc there is no split */
    split *sp;
    size_t nsp, spcap;
    int failed; /* out of host memory: the run says nothing */
    sublet_frag_stats frag; /* at the end of the run */
    int have_frag;
} watch;

static int is_segrow(const watch *w, uint64_t row)
{
    size_t i = tn_lower_bound(w->segrows, w->nseg, row);
    return i < w->nseg && w->segrows[i] == row;
}

/* The row an entry stands for: allocations carry the time of the recorded
 * segment_alloc row before them when there was one. */
static uint64_t entry_event(const watch *w, const sublet_trace_entry *e)
{
    uint64_t i = e->time_us;
    if (i < w->n && is_segrow(w, i) &&
        (e->action == SUBLET_ACT_ALLOC || e->action == SUBLET_ACT_SEGMENT_ALLOC ||
         e->action == SUBLET_ACT_SEGMENT_MAP))
        i++;
    return i;
}

static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return v;
    size_t nc = *cap ? *cap * 2 : 64;
    void *nv = realloc(v, nc * size);
    if (nv)
        *cap = nc;
    return nv;
}

static void watch_split(watch *w, const sublet_trace_entry *e)
{
    uint64_t a = e->addr;
    uint64_t rounded = sublet_round_size(w->s, e->size ? e->size : 1);
    int was_fresh = w->fresh == a;
    w->fresh = NONE;
    if (!was_fresh && rounded > MIB) {
        const uset *segs = &w->segs, *live = &w->live;
        size_t si = uset_lb(segs, a + 1);
        if (si > 0 && a - segs->k[si - 1] < segs->v[si - 1]) {
            uint64_t end = segs->k[si - 1] + segs->v[si - 1];
            size_t li = uset_lb(live, a + 1);
            if (li < live->n && live->k[li] < end)
                end = live->k[li];
            uint64_t taken = end > a ? end - a : 0;
            if (taken > rounded + MIB) {
                split *nv = grow(w->sp, &w->spcap, w->nsp, sizeof *w->sp);
                if (!nv) {
                    w->failed = 1;
                    return;
                }
                w->sp = nv;
                w->sp[w->nsp++] = (split){entry_event(w, e), e->size, rounded, taken};
            }
        }
    }
    w->failed |= !uset_put(&w->live, a, e->size);
}

static void watch_entry(watch *w, const sublet_trace_entry *e)
{
    if (e->action == SUBLET_ACT_SEGMENT_ALLOC || e->action == SUBLET_ACT_SEGMENT_MAP) {
        uint64_t r = entry_event(w, e);
        if (r < w->n) {
            if (w->nm && w->m[w->nm - 1].row == r) {
                w->m[w->nm - 1].bytes += e->size;
            } else {
                rowmem *nv = grow(w->m, &w->mcap, w->nm, sizeof *w->m);
                if (!nv) {
                    w->failed = 1;
                    return;
                }
                w->m = nv;
                w->m[w->nm++] = (rowmem){r, e->size};
            }
        }
    }
    if (!w->s)
        return;
    switch (e->action) {
    case SUBLET_ACT_SEGMENT_ALLOC:
        w->failed |= !uset_put(&w->segs, e->addr, e->size);
        w->fresh = e->addr;
        break;
    case SUBLET_ACT_SEGMENT_FREE:
        uset_del(&w->segs, e->addr);
        break;
    case SUBLET_ACT_FREE_COMPLETED:
        uset_del(&w->live, e->addr);
        break;
    case SUBLET_ACT_ALLOC:
        watch_split(w, e);
        break;
    default:
        break;
    }
}

static void watch_take(watch *w, sublet_allocator *a)
{
    sublet_trace_entry buf[256];
    size_t k;
    while ((k = sublet_history_take(a, buf, sizeof buf / sizeof *buf)) > 0)
        for (size_t i = 0; i < k; i++)
            watch_entry(w, &buf[i]);
}

/* Before a row is driven: a recorded segment_alloc row noted. */
static void watch_seg(void *user, sublet_allocator *a, uint64_t index,
                      const sublet_trace_event *ev)
{
    (void)a;
    watch *w = user;
    if (ev->kind != SUBLET_ACT_SEGMENT_ALLOC || index < w->npre)
        return;
    uint64_t *nv = grow(w->segrows, &w->segcap, w->nseg, sizeof *w->segrows);
    if (!nv) {
        w->failed = 1;
        return;
    }
    w->segrows = nv;
    w->segrows[w->nseg++] = index;
}

/* After a row is driven: its entries taken. */
static void watch_row(void *user, sublet_allocator *a, uint64_t index,
                      const sublet_trace_event *ev)
{
    (void)ev;
    watch *w = user;
    if (index >= w->npre) /* the prelude's own entries are not in the record */
        watch_take(w, a);
}

static int cmp_rowmem(const void *x, const void *y)
{
    const rowmem *p = x, *q = y;
    return (p->row > q->row) - (p->row < q->row);
}

static void watch_finish(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st)
{
    (void)last_event;
    (void)st;
    watch *w = user;
    if (!a)
        return;
    watch_take(w, a);
    if (sublet_frag_read(a, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &w->frag) == SUBLET_OK)
        w->have_frag = 1;
    /* rows in order, one entry a row (a release run's times go back to its
     * first row) */
    if (w->nm > 1)
        qsort(w->m, w->nm, sizeof *w->m, cmp_rowmem);
    size_t k = 0;
    for (size_t i = 0; i < w->nm; i++) {
        if (k && w->m[k - 1].row == w->m[i].row)
            w->m[k - 1].bytes += w->m[i].bytes;
        else
            w->m[k++] = w->m[i];
    }
    w->nm = k;
}

static void watch_free(watch *w)
{
    free(w->segrows);
    free(w->m);
    free(w->sp);
    uset_free(&w->segs);
    uset_free(&w->live);
    memset(w, 0, sizeof *w);
}

/* Replay f under conf on a cap-byte device, read as it goes into w (the
 * large-pool splits under settings s, when s).  1: the run and w hold. */
static int record_run(const tfacts *f, const char *conf, uint64_t cap, int prelude,
                      int stop_on_oom, const sublet_settings *s, watch *w,
                      sublet_replay_result *r)
{
    memset(w, 0, sizeof *w);
    w->n = f->rows;
    w->npre = f->npre;
    w->s = s;
    w->fresh = NONE;
    for (size_t i = 0; s && i < w->npre; i++) {
        if (f->pre[i].kind == SUBLET_TRACE_PRE_SEGMENT)
            w->failed |= !uset_put(&w->segs, f->pre[i].addr, f->pre[i].size);
        else
            w->failed |= !uset_put(&w->live, f->pre[i].addr, f->pre[i].size);
    }
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = conf;
    o.device_memory = cap;
    o.prelude = prelude;
    o.stop_on_oom = stop_on_oom;
    o.record = SUBLET_RECORD_ALL;
    o.record_context = SUBLET_CONTEXT_NONE;
    o.record_max_entries = 4 * w->n + 1024;
    o.record_row_times = 1;
    o.before_event = watch_seg;
    o.after_event = watch_row;
    o.observer_user = w;
    o.on_finish = watch_finish;
    o.finish_user = w;
    return tn_replay_options(f, &o, r, NULL, 0) == SUBLET_OK && !w->failed;
}

typedef struct pair {
    uint64_t a, b;
} pair;

static int cmp_pair(const void *x, const void *y)
{
    const pair *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

/* The most frequent pair (ties: the largest). */
static pair pair_mode(pair *v, size_t n)
{
    pair best = {0, 0};
    if (!n)
        return best;
    qsort(v, n, sizeof *v, cmp_pair);
    size_t bc = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j].a == v[i].a && v[j].b == v[i].b)
            j++;
        if (j - i >= bc) {
            bc = j - i;
            best = v[i];
        }
        i = j;
    }
    return best;
}


/* One diagnosis: both settings' recorded replays on the user's device, and
 * where the sentence goes. */
typedef struct diag {
    const tfacts *f;
    const char *from;
    int prelude;
    char mech[320]; /* what the change does (mechanism) */
    uint64_t n;     /* rows of the trace */
    const char *rfrom; /* `from` under the user's PyTorch version */
    sublet_settings fs; /* `from` parsed */
    sublet_replay_result rf, rt;
    int okf, okt;
    /* the rows where the current settings took more new memory than the
     * answer (bytes: the current settings'), in order */
    rowmem *more;
    sublet_trace_event *mev; /* the rows themselves */
    size_t nmore;
    split *sp; /* the current settings' splits, when looked for */
    size_t nsp;
    char *out;
    size_t cap;
} diag;

/* The rows where the current settings took new memory that the answer did not. */
typedef struct rows {
    uint64_t first, last, count;
} rows;

/* The culprits: splits, before a row where new memory was taken, of blocks
 * that could have held that row's request, by smaller ones (cp: block,
 * request; events cf..cl); and the new memory of those rows (xp: bytes,
 * request). */
typedef struct culprits {
    pair *cp, *xp;
    size_t cc, nx;
    uint64_t cf, cl;
} culprits;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A split counts when a later row (one of the rows where new memory was
 * taken, in order: the splits before row i are those ahead of the first
 * split at or after i) was an allocation it could have held: rounded <
 * need <= taken.  Each counts once; the rows' needs are gathered from the
 * last row back (a Fenwick tree of the needs present) and each split asks
 * for the smallest need above its rounded size among the rows at or after
 * its own first: O((splits + rows) log rows), where asking every row of
 * every split took rows x splits (minutes at 10^8 events). */
static void find_culprits(const diag *d, const sublet_settings *fs, const split *sp,
                          size_t nsp, culprits *c)
{
    c->cf = NONE;
    c->cl = 0;
    c->cc = c->nx = 0;
    size_t nm = d->nmore;
    if (!c->cp || !c->xp)
        return;
    uint64_t *need = malloc((nm ? nm : 1) * sizeof *need);  /* 0: not an allocation */
    size_t *pre = malloc((nm ? nm : 1) * sizeof *pre);      /* splits before row k */
    uint64_t *vals = malloc((nm ? nm : 1) * sizeof *vals);  /* the needs, sorted, distinct */
    uint32_t *fw = calloc(nm + 1, sizeof *fw);
    if (!need || !pre || !vals || !fw)
        goto done;
    size_t p = 0, nv = 0;
    for (size_t k = 0; k < nm; k++) {
        const sublet_trace_event *ev = &d->mev[k];
        c->xp[c->nx++] = (pair){d->more[k].bytes, ev->kind == SUBLET_ACT_ALLOC ? ev->size : 0};
        need[k] = ev->kind == SUBLET_ACT_ALLOC ? sublet_round_size(fs, ev->size ? ev->size : 1)
                                               : 0;
        if (need[k])
            vals[nv++] = need[k];
        while (p < nsp && sp[p].event < d->more[k].row)
            p++;
        pre[k] = p;
    }
    qsort(vals, nv, sizeof *vals, cmp_u64);
    size_t m = 0;
    for (size_t v = 0; v < nv; v++)
        if (!m || vals[m - 1] != vals[v])
            vals[m++] = vals[v];
    size_t top = 1; /* the highest power of two <= m, for the descent */
    while (top * 2 <= m)
        top *= 2;
    for (size_t k = nm; k-- > 0;) {
        if (need[k]) { /* present from row k on */
            size_t r = tn_lower_bound(vals, m, need[k]) + 1;
            for (; r <= m; r += r & (0 - r))
                fw[r]++;
        }
        for (size_t q = k ? pre[k - 1] : 0; q < pre[k]; q++) {
            /* the smallest need present above sp[q].rounded: the first rank
             * past those <= rounded whose count is not zero */
            size_t below = tn_lower_bound(vals, m, sp[q].rounded + 1); /* ranks <= rounded */
            uint64_t seen = 0;
            for (size_t r = below; r; r -= r & (0 - r))
                seen += fw[r];
            /* descend to the first rank whose prefix count exceeds `seen` */
            size_t pos = 0;
            uint64_t acc = 0;
            for (size_t step = top; step && m; step /= 2)
                if (pos + step <= m && acc + fw[pos + step] <= seen) {
                    pos += step;
                    acc += fw[pos];
                }
            if (pos >= m || vals[pos] > sp[q].taken) /* none, or too large for the block */
                continue;
            if (sp[q].event < c->cf)
                c->cf = sp[q].event;
            if (sp[q].event > c->cl)
                c->cl = sp[q].event;
            c->cp[c->cc++] = (pair){sp[q].taken, sp[q].request};
        }
    }
done:
    free(need);
    free(pre);
    free(vals);
    free(fw);
}

/* The sentence from the rows, the culprits and the two peaks. */
static void new_memory_sentence(diag *d, const rows *rw, culprits *c)
{
    char evs[96], evc[96], a1[32], a2[32], a3[32], a4[32], p1[32], p2[32], seg[160];
    const char *mech = d->mech;
    char *out = d->out;
    size_t cap = d->cap;
    fmt_events(rw->first, rw->last, evs, sizeof evs);
    tn_fmt_size(d->rf.peak_reserved_bytes, p1, sizeof p1);
    tn_fmt_size(d->rt.peak_reserved_bytes, p2, sizeof p2);
    pair xm = pair_mode(c->xp, c->nx);
    tn_fmt_size(xm.a, a3, sizeof a3);
    tn_fmt_size(xm.b, a4, sizeof a4);
    int k;
    if (rw->count == 1)
        k = snprintf(seg, sizeof seg, "a new %s segment at %s for a %s request", a3, evs, a4);
    else
        k = snprintf(seg, sizeof seg, "%llu new segments at %s (most often %s, for a %s request)",
                     (unsigned long long)rw->count, evs, a3, a4);
    if (k < 0)
        seg[0] = '\0';
    if (c->cc) {
        pair cm = pair_mode(c->cp, c->cc);
        tn_fmt_size(cm.a, a1, sizeof a1);
        tn_fmt_size(cm.b, a2, sizeof a2);
        fmt_events(c->cf, c->cl, evc, sizeof evc);
        if (c->cc == 1)
            k = snprintf(out, cap,
                         "a cached %s block split by a %s request at %s left no free "
                         "block large enough later, so the current settings took %s "
                         "(peak reserved %s; "
                         "%s with the answer): %s.",
                         a1, a2, evc, seg, p1, p2, mech);
        else
            k = snprintf(out, cap,
                         "%llu cached blocks split by smaller requests at %s (most "
                         "often a %s block by a %s request) left no free block large "
                         "enough later, so the current settings took %s (peak reserved "
                         "%s; %s with the "
                         "answer): %s.",
                         (unsigned long long)c->cc, evc, a1, a2, seg, p1, p2, mech);
    } else {
        k = snprintf(out, cap,
                     "the current settings took %s where the answer reused cached "
                     "memory (peak reserved "
                     "%s; %s with the answer): %s.",
                     seg, p1, p2, mech);
    }
    if (k < 0)
        out[0] = '\0';
}

/* The rows where the current settings' run (wf) took more new memory than
 * the answer's (wt), both lists in row order, and those rows read from the
 * trace (one pass).  0: out of memory, or the trace cannot be read again. */
static int more_rows(diag *d, const watch *wf, const watch *wt)
{
    d->more = malloc((wf->nm ? wf->nm : 1) * sizeof *d->more);
    if (!d->more)
        return 0;
    size_t j = 0;
    for (size_t i = 0; i < wf->nm; i++) {
        while (j < wt->nm && wt->m[j].row < wf->m[i].row)
            j++;
        uint64_t t = j < wt->nm && wt->m[j].row == wf->m[i].row ? wt->m[j].bytes : 0;
        if (wf->m[i].bytes > t)
            d->more[d->nmore++] = wf->m[i];
    }
    uint64_t *idx = malloc((d->nmore ? d->nmore : 1) * sizeof *idx);
    d->mev = malloc((d->nmore ? d->nmore : 1) * sizeof *d->mev);
    if (!idx || !d->mev) {
        free(idx);
        return 0;
    }
    for (size_t k = 0; k < d->nmore; k++)
        idx[k] = d->more[k].row;
    char err[256];
    sublet_status st = tn_rows_fetch(d->f, idx, d->nmore, d->mev, err, sizeof err);
    free(idx);
    return st == SUBLET_OK;
}

/* On the user's device: the new memory the current settings took where the
 * answer did not, and the splits behind it. */
static void diag_new_memory(diag *d)
{
    rows rw = {NONE, 0, d->nmore};
    if (d->nmore) {
        rw.first = d->more[0].row;
        rw.last = d->more[d->nmore - 1].row;
    }
    if (!rw.count || d->rf.peak_reserved_bytes <= d->rt.peak_reserved_bytes)
        return;
    culprits c;
    c.cp = malloc((d->nsp ? d->nsp : 1) * sizeof *c.cp);
    c.xp = malloc((rw.count ? rw.count : 1) * sizeof *c.xp);
    find_culprits(d, &d->fs, d->sp, d->nsp, &c);
    new_memory_sentence(d, &rw, &c);
    free(c.cp);
    free(c.xp);
}

/* No difference on the user's device: the difference is at the answer's
 * minimum capacity. */
static void diag_at_mincap(diag *d, uint64_t to_mincap)
{
    const char *mech = d->mech;
    char *out = d->out;
    size_t cap = d->cap;
    watch ho;
    sublet_replay_result ro;
    int oko = record_run(d->f, d->rfrom, to_mincap, d->prelude, 1, NULL, &ho, &ro);
    if (oko && ro.ooms && ro.first_oom_event < d->n) {
        uint64_t e = ro.first_oom_event;
        sublet_trace_event row;
        char dv[32], rq[32], fr[32], lg[32], sp[32];
        if (tn_rows_fetch(d->f, &e, 1, &row, rq, sizeof rq) != SUBLET_OK)
            goto done;
        tn_fmt_size(to_mincap, dv, sizeof dv);
        tn_fmt_size(row.size, rq, sizeof rq);
        tn_fmt_size(ho.frag.free_bytes, fr, sizeof fr);
        tn_fmt_size(ho.frag.largest_free_block, lg, sizeof lg);
        tn_fmt_size(ho.frag.inactive_split_bytes, sp, sizeof sp);
        if (ho.have_frag && ho.frag.free_bytes)
            snprintf(out, cap,
                     "on a %s device (the answer's minimum) the current settings run out at "
                     "event %llu, a %s "
                     "request, while %s sits cached in %llu free blocks (the largest %s; "
                     "%s of it inside split segments): %s.",
                     dv, (unsigned long long)e, rq, fr, (unsigned long long)ho.frag.free_blocks,
                     lg, sp, mech);
        else
            snprintf(out, cap,
                     "on a %s device (the answer's minimum) the current settings run out at "
                     "event %llu, a %s "
                     "request: %s.",
                     dv, (unsigned long long)e, rq, mech);
    } else if (oko && d->okf && d->okt) {
        uint64_t cf = d->rf.device_ops.segment_allocs + d->rf.device_ops.va_maps,
                 ct = d->rt.device_ops.segment_allocs + d->rt.device_ops.va_maps;
        if (cf > ct)
            snprintf(out, cap,
                     "no fragmentation to fix: the answer needs %llu device allocations "
                     "where the current settings need %llu (%s).",
                     (unsigned long long)ct, (unsigned long long)cf, mech);
    }
done:
    watch_free(&ho);
    sublet_replay_result_free(&ro);
}

/* One recorded run of tn_diagnose's two, for tn_parallel_for. */
typedef struct rec_job {
    const tfacts *f;
    const char *conf;
    uint64_t cap;
    int prelude;
    const sublet_settings *s;
    watch *w;
    sublet_replay_result *r;
    int ok;
} rec_job;

typedef struct pair_job {
    rec_job run[2];
} pair_job;

static void pair_fn(void *arg, size_t i)
{
    rec_job *j = &((pair_job *)arg)->run[i];
    j->ok = record_run(j->f, j->conf, j->cap, j->prelude, 0, j->s, j->w, j->r);
}

void tn_diagnose(const tfacts *f, const char *from, const char *to, uint64_t dev,
                 uint64_t to_mincap, int prelude, unsigned threads, char *out, size_t cap)
{
    out[0] = '\0';
    if (strcmp(from, to) == 0)
        return;
    diag d;
    memset(&d, 0, sizeof d);
    d.f = f;
    d.from = from;
    d.prelude = prelude;
    d.out = out;
    d.cap = cap;
    mechanism(f->version, from, to, d.mech, sizeof d.mech);
    d.n = f->rows;
    /* the replays under the user's PyTorch version */
    char vfrom[TN_CONF_V_MAX], vto[TN_CONF_V_MAX];
    d.rfrom = tn_conf_v(f->version, from, vfrom, sizeof vfrom);
    const char *rto = tn_conf_v(f->version, to, vto, sizeof vto);
    /* the current settings' splits of cached blocks are looked for where
     * blocks are split: the native policy, its prelude adopted */
    tn_settings_of(f->version, from, &d.fs);
    int virt = d.fs.expandable_segments || d.fs.policy == SUBLET_POLICY_STITCH;
    int adopt = prelude == SUBLET_PRELUDE_ADOPT || (prelude == SUBLET_PRELUDE_AUTO && !virt);
    watch wt, wf;
    /* both recorded runs at once (each reads the trace through a reader of
     * its own; only the current settings' keeps its splits) */
    pair_job pj = {{{f, rto, dev, prelude, NULL, &wt, &d.rt, 0},
                    {f, d.rfrom, dev, prelude, adopt && !virt ? &d.fs : NULL, &wf, &d.rf, 0}}};
    tn_parallel_for(threads, 2, pair_fn, &pj);
    d.okt = pj.run[0].ok;
    d.okf = pj.run[1].ok;
    if (d.okf && d.okt && more_rows(&d, &wf, &wt)) {
        d.sp = wf.sp;
        d.nsp = wf.nsp;
        diag_new_memory(&d);
    }
    free(d.more);
    free(d.mev);
    watch_free(&wt);
    watch_free(&wf);
    if (!out[0] && to_mincap)
        diag_at_mincap(&d, to_mincap);
    sublet_replay_result_free(&d.rf);
    sublet_replay_result_free(&d.rt);
}
