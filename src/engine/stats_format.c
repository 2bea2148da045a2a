/* sublet — statistics as text: flat torch.cuda.memory_stats() keys, JSON,
 * torch.cuda.memory_summary() and c10's format_size.
 *
 * Every key, row and title is generated from the X-macro lists in
 * sublet/stats.h; nothing here names a statistic by hand.  All writers have
 * snprintf semantics: the output is always NUL-terminated when cap > 0 and
 * the return value is the full length the text would have. */
#include "sublet/stats.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h" /* sl_text over the caller's buffer: snprintf semantics */

/* ---- descriptors generated from the X-macro lists ------------------------- */
typedef struct sf_array_desc {
    const char *key;
    const char *title;
    int is_bytes;
    size_t off; /* offset of the sublet_stat[SUBLET_POOL_KINDS] member */
} sf_array_desc;

typedef struct sf_single_desc {
    const char *key;
    const char *title;
    size_t off; /* offset of the sublet_stat member */
} sf_single_desc;

typedef struct sf_counter_desc {
    const char *key;
    size_t off; /* offset of the int64_t member */
} sf_counter_desc;

static const sf_array_desc k_arrays[] = {
#define SF_X_ARR(key, title, bytes) {#key, title, bytes, offsetof(sublet_stats, key)},
    SUBLET_STAT_ARRAYS(SF_X_ARR)
#undef SF_X_ARR
};

static const sf_single_desc k_singles[] = {
#define SF_X_ONE(key, title) {#key, title, offsetof(sublet_stats, key)},
    SUBLET_STAT_SINGLES(SF_X_ONE)
#undef SF_X_ONE
};

static const sf_counter_desc k_counters[] = {
#define SF_X_CNT(key) {#key, offsetof(sublet_stats, key)},
    SUBLET_STAT_COUNTERS(SF_X_CNT)
#undef SF_X_CNT
};

#define SF_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Pool names indexed by SUBLET_POOL_*. */
static const char *const k_pool_names[SUBLET_POOL_KINDS] = {
    [SUBLET_POOL_ALL] = "all",
    [SUBLET_POOL_SMALL] = "small_pool",
    [SUBLET_POOL_LARGE] = "large_pool",
};

enum { SF_METRICS = 4 };
static const char *const k_metric_names[SF_METRICS] = {"current", "peak", "allocated", "freed"};

static const char k_max_split_key[] = "max_split_size";

/* Number of flat keys: 12 per array, 4 per single, 1 per counter, plus
 * max_split_size (122 for the current lists). */
#define SF_FLAT_KEYS                                                  \
    (SF_COUNT(k_arrays) * SUBLET_POOL_KINDS * SF_METRICS +            \
     SF_COUNT(k_singles) * SF_METRICS + SF_COUNT(k_counters) + 1)

/* Longest flat key, "inactive_split_bytes.small_pool.allocated", is 41; a
 * per-pool key with two 20-digit ids, 94. */
#define SF_KEY_MAX 100

static const char k_by_pools_key[] = "reserved_bytes_by_private_pools";

static const sublet_stat *sf_array_at(const sublet_stats *s, const sf_array_desc *d)
{
    return (const sublet_stat *)(const void *)((const char *)s + d->off);
}

static const sublet_stat *sf_single_at(const sublet_stats *s, const sf_single_desc *d)
{
    return (const sublet_stat *)(const void *)((const char *)s + d->off);
}

static int64_t sf_counter_at(const sublet_stats *s, const sf_counter_desc *d)
{
    int64_t v;
    memcpy(&v, (const char *)s + d->off, sizeof v);
    return v;
}

static int64_t sf_metric(const sublet_stat *st, int m)
{
    switch (m) {
    case 0:
        return st->current;
    case 1:
        return st->peak;
    case 2:
        return st->allocated;
    default:
        return st->freed;
    }
}

/* ---- flat keys ------------------------------------------------------------ */
typedef struct sf_flat_entry {
    char key[SF_KEY_MAX];
    int64_t value;
} sf_flat_entry;

static int sf_entry_cmp(const void *a, const void *b)
{
    const sf_flat_entry *x = a;
    const sf_flat_entry *y = b;
    return strcmp(x->key, y->key);
}

/* Fills out[SF_FLAT_KEYS + 12 * npools] with every key and value, sorted
 * like Python's sorted() on str (code point order == strcmp order for
 * ASCII). */
static size_t sf_collect_sorted(const sublet_stats *s, const sublet_pool_reserved *pools,
                                size_t npools, sf_flat_entry *out)
{
    size_t n = 0;
    for (size_t i = 0; i < npools; i++)
        for (int p = 0; p < SUBLET_POOL_KINDS; p++)
            for (int m = 0; m < SF_METRICS; m++) {
                snprintf(out[n].key, sizeof out[n].key, "%s.%" PRIu64 "_%" PRIu64 ".%s.%s",
                         k_by_pools_key, pools[i].id[0], pools[i].id[1], k_pool_names[p],
                         k_metric_names[m]);
                out[n].value = sf_metric(&pools[i].reserved_bytes[p], m);
                n++;
            }
    for (size_t i = 0; i < SF_COUNT(k_arrays); i++) {
        const sublet_stat *arr = sf_array_at(s, &k_arrays[i]);
        for (int p = 0; p < SUBLET_POOL_KINDS; p++) {
            for (int m = 0; m < SF_METRICS; m++) {
                snprintf(out[n].key, sizeof out[n].key, "%s.%s.%s", k_arrays[i].key,
                         k_pool_names[p], k_metric_names[m]);
                out[n].value = sf_metric(&arr[p], m);
                n++;
            }
        }
    }
    for (size_t i = 0; i < SF_COUNT(k_singles); i++) {
        const sublet_stat *st = sf_single_at(s, &k_singles[i]);
        for (int m = 0; m < SF_METRICS; m++) {
            snprintf(out[n].key, sizeof out[n].key, "%s.%s", k_singles[i].key,
                     k_metric_names[m]);
            out[n].value = sf_metric(st, m);
            n++;
        }
    }
    for (size_t i = 0; i < SF_COUNT(k_counters); i++) {
        snprintf(out[n].key, sizeof out[n].key, "%s", k_counters[i].key);
        out[n].value = sf_counter_at(s, &k_counters[i]);
        n++;
    }
    snprintf(out[n].key, sizeof out[n].key, "%s", k_max_split_key);
    out[n].value = s->max_split_size;
    n++;
    qsort(out, n, sizeof out[0], sf_entry_cmp);
    return n;
}

/* The sorted entries, on the stack for the plain keys, else allocated
 * (NULL when that fails). */
static sf_flat_entry *sf_entries(const sublet_stats *s, const sublet_pool_reserved *pools,
                                 size_t npools, sf_flat_entry *local, size_t *n)
{
    sf_flat_entry *e = local;
    if (npools && !(e = malloc((SF_FLAT_KEYS + npools * SUBLET_POOL_KINDS * SF_METRICS) *
                               sizeof *e)))
        return NULL;
    *n = sf_collect_sorted(s, pools, npools, e);
    return e;
}

size_t sublet_stats_format_flat_pools(const sublet_stats *s, const sublet_pool_reserved *pools,
                                      size_t npools, char *buf, size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (!s || (npools && !pools))
        return 0;
    sf_flat_entry local[SF_FLAT_KEYS];
    size_t n = 0;
    sf_flat_entry *entries = sf_entries(s, pools, npools, local, &n);
    if (!entries)
        return 0;
    for (size_t i = 0; i < n; i++)
        sl_text_printf(&b, "%s %" PRId64 "\n", entries[i].key, entries[i].value);
    if (entries != local)
        free(entries);
    return b.len;
}

size_t sublet_stats_format_json_pools(const sublet_stats *s, const sublet_pool_reserved *pools,
                                      size_t npools, char *buf, size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (!s || (npools && !pools))
        return 0;
    sf_flat_entry local[SF_FLAT_KEYS];
    size_t n = 0;
    sf_flat_entry *entries = sf_entries(s, pools, npools, local, &n);
    if (!entries)
        return 0;
    sl_text_putn(&b, "{", 1);
    for (size_t i = 0; i < n; i++)
        sl_text_printf(&b, "%s\"%s\": %" PRId64, i ? ", " : "", entries[i].key, entries[i].value);
    sl_text_putn(&b, "}", 1);
    if (entries != local)
        free(entries);
    return b.len;
}

size_t sublet_stats_format_flat(const sublet_stats *s, char *buf, size_t cap)
{
    return sublet_stats_format_flat_pools(s, NULL, 0, buf, cap);
}

size_t sublet_stats_format_json(const sublet_stats *s, char *buf, size_t cap)
{
    return sublet_stats_format_json_pools(s, NULL, 0, buf, cap);
}

/* If the next dot-separated segment of *p equals word, consume it (and the
 * dot after it) and return 1.  *last is set when the segment ended the key. */
static int sf_take_segment(const char **p, const char *word, int *last)
{
    size_t n = strlen(word);
    if (strncmp(*p, word, n) != 0)
        return 0;
    if ((*p)[n] == '\0') {
        *last = 1;
        *p += n;
        return 1;
    }
    if ((*p)[n] == '.') {
        *last = 0;
        *p += n + 1;
        return 1;
    }
    return 0;
}

/* Parses "<metric>" as the final segment. */
static int sf_take_metric(const char *p, int *metric)
{
    for (int m = 0; m < SF_METRICS; m++) {
        if (strcmp(p, k_metric_names[m]) == 0) {
            *metric = m;
            return 1;
        }
    }
    return 0;
}

int sublet_stats_lookup(const sublet_stats *s, const char *key, int64_t *out)
{
    if (!s || !key || !out)
        return -1;
    int last = 0;
    for (size_t i = 0; i < SF_COUNT(k_arrays); i++) {
        const char *p = key;
        if (!sf_take_segment(&p, k_arrays[i].key, &last) || last)
            continue;
        for (int pool = 0; pool < SUBLET_POOL_KINDS; pool++) {
            const char *q = p;
            int m;
            if (sf_take_segment(&q, k_pool_names[pool], &last) && !last &&
                sf_take_metric(q, &m)) {
                *out = sf_metric(&sf_array_at(s, &k_arrays[i])[pool], m);
                return 0;
            }
        }
        return -1;
    }
    for (size_t i = 0; i < SF_COUNT(k_singles); i++) {
        const char *p = key;
        int m;
        if (!sf_take_segment(&p, k_singles[i].key, &last) || last)
            continue;
        if (!sf_take_metric(p, &m))
            return -1;
        *out = sf_metric(sf_single_at(s, &k_singles[i]), m);
        return 0;
    }
    for (size_t i = 0; i < SF_COUNT(k_counters); i++) {
        if (strcmp(key, k_counters[i].key) == 0) {
            *out = sf_counter_at(s, &k_counters[i]);
            return 0;
        }
    }
    if (strcmp(key, k_max_split_key) == 0) {
        *out = s->max_split_size;
        return 0;
    }
    return -1;
}

/* ---- memory_summary ------------------------------------------------------- */
enum { SF_LINE = 75, SF_NAME_W = 21 };

/* Python's floor division a // b for b > 0. */
static int64_t sf_floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if (a % b != 0 && a < 0)
        q--;
    return q;
}

/* torch/cuda/memory.py _format_size(sz, pref_sz): f"{sz:6d} {prefix}".
 * pref_sz starts as an int and becomes a float after the first division;
 * dividing by 1024 is exact in binary floating point, so a double mirrors it. */
static void sf_cell_size(sl_text *b, int64_t v, int64_t ref)
{
    static const char *const units[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double pref = (double)ref;
    size_t u = 0;
    while (u + 1 < SF_COUNT(units) && !(pref < 768.0 * 1024.0)) {
        u++;
        v = sf_floordiv(v, 1024);
        pref /= 1024.0;
    }
    sl_text_printf(b, "%6" PRId64 " %s", v, units[u]);
}

/* torch/cuda/memory.py _format_count(cnt, pref_cnt): f"{cnt:7d} {prefix} ". */
static void sf_cell_count(sl_text *b, int64_t v, int64_t ref)
{
    static const char *const units[] = {" ", "K", "M"};
    double pref = (double)ref;
    size_t u = 0;
    while (u + 1 < SF_COUNT(units) && !(pref < 750.0 * 1000.0)) {
        u++;
        v = sf_floordiv(v, 1000);
        pref /= 1000.0;
    }
    sl_text_printf(b, "%7" PRId64 " %s ", v, units[u]);
}

static void sf_line_begin(sl_text *b)
{
    sl_text_putn(b, "|", 1);
}

static void sf_line_end(sl_text *b)
{
    sl_text_putn(b, "|\n", 2);
}

static void sf_rule(sl_text *b, char c)
{
    sf_line_begin(b);
    sl_text_repeat(b, c, SF_LINE);
    sf_line_end(b);
}

/* One row: " {name:<21} | c | c | c | c " with each cell formatted against
 * the matching reference value. */
static void sf_row(sl_text *b, const char *name, const sublet_stat *st,
                   const sublet_stat *ref, int is_bytes)
{
    sf_line_begin(b);
    sl_text_printf(b, " %-*s ", SF_NAME_W, name);
    for (int m = 0; m < SF_METRICS; m++) {
        sl_text_putn(b, "| ", 2);
        if (is_bytes)
            sf_cell_size(b, sf_metric(st, m), sf_metric(ref, m));
        else
            sf_cell_count(b, sf_metric(st, m), sf_metric(ref, m));
        sl_text_putn(b, " ", 1);
    }
    sf_line_end(b);
}

size_t sublet_stats_format_summary(const sublet_stats *s, int device, int abbreviated,
                                   char *buf, size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (!s)
        return 0;

    sf_rule(&b, '=');
    /* " {_:16} PyTorch CUDA memory summary, device ID {device:<17d} " */
    sf_line_begin(&b);
    sl_text_printf(&b, " %16s PyTorch CUDA memory summary, device ID %-17d ", "", device);
    sf_line_end(&b);
    sf_rule(&b, '-');
    /* "  {_:9} CUDA OOMs: {num_ooms:<12d} | {_:6} cudaMalloc retries:
     *  {num_alloc_retries:<8d}  " */
    sf_line_begin(&b);
    sl_text_printf(&b, "  %9s CUDA OOMs: %-12" PRId64 " | %6s cudaMalloc retries: %-8" PRId64 "  ",
                   "", s->num_ooms, "", s->num_alloc_retries);
    sf_line_end(&b);
    sf_rule(&b, '=');
    sf_line_begin(&b);
    sl_text_puts(&b, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");
    sf_line_end(&b);

    for (size_t i = 0; i < SF_COUNT(k_arrays); i++) {
        const sublet_stat *arr = sf_array_at(s, &k_arrays[i]);
        const sublet_stat *all = &arr[SUBLET_POOL_ALL];
        sf_rule(&b, '-');
        sf_row(&b, k_arrays[i].title, all, all, k_arrays[i].is_bytes);
        if (!abbreviated) {
            sf_row(&b, "      from large pool", &arr[SUBLET_POOL_LARGE], all,
                   k_arrays[i].is_bytes);
            sf_row(&b, "      from small pool", &arr[SUBLET_POOL_SMALL], all,
                   k_arrays[i].is_bytes);
        }
    }
    for (size_t i = 0; i < SF_COUNT(k_singles); i++) {
        const sublet_stat *st = sf_single_at(s, &k_singles[i]);
        sf_rule(&b, '-');
        sf_row(&b, k_singles[i].title, st, st, 0);
    }
    sf_rule(&b, '=');
    return b.len;
}

/* ---- c10 format_size ------------------------------------------------------ */
size_t sublet_format_size(uint64_t n, char *buf, size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (n <= 1024u)
        sl_text_printf(&b, "%" PRIu64 " bytes", n);
    else if (n <= 1048576u)
        sl_text_printf(&b, "%.2f KiB", (double)n / 1024.0);
    else if (n <= 1073741824u)
        sl_text_printf(&b, "%.2f MiB", (double)n / 1048576.0);
    else
        sl_text_printf(&b, "%.2f GiB", (double)n / 1073741824.0);
    return b.len;
}
