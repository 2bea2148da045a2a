/* sublet — allocator settings: defaults, the PYTORCH_CUDA_ALLOC_CONF parser,
 * and human size parsing.  The size rules themselves (round_size,
 * get_allocation_size) are in rules.c.
 *
 * The parser follows current PyTorch main (c10/core/AllocatorConfig.{h,cpp}
 * and c10/cuda/CUDAAllocatorConfig.cpp):
 *   - the tokenizer makes ',' ':' '[' ']' single-character tokens, drops all
 *     whitespace (also inside words) and keeps everything else as words;
 *   - `large_segment_size_mb` is applied in a first pass, then
 *     max_non_split_rounding is reset to the large segment size, then every
 *     other entry is applied in order in a second pass;
 *   - max_split_size, the 16 roundup buckets, garbage_collection_threshold and
 *     max_non_split_rounding are reset on every parse; other options keep
 *     their previous values unless named again.
 * Deliberate differences from PyTorch, all of them stricter:
 *   - separators are checked (PyTorch main only index-checks them) and a
 *     missing one gives the legacy text "Error parsing CachingAllocator
 *     settings, expected {c}";
 *   - numbers must be whole tokens ("20MB" is refused, std::stoull would read
 *     20); integers are decimal digits only, so negatives are refused instead
 *     of wrapping; an integer that does not fit in 64 bits, or a MiB value
 *     whose byte count does not, is refused (PyTorch clamps the latter);
 *   - floats are parsed locale-independently and must be finite.
 * The whole string is applied to a copy; *s changes only on success.
 *
 * pytorch_version:X (sublet's) selects an older release's rules where PyTorch
 * changed them (docs/versions.md): it is applied first, wherever it stands
 * (found with the newest tokenizer, then read again, and required to be the
 * same, with the tokenizer of the release it selects), and before 2.9 the
 * parser follows PyTorch 2.6's CUDAAllocatorConfig.cpp
 * (only ' ' is dropped; `>:v` fills from the last listed bucket itself;
 * max_split_size_mb and max_non_split_rounding_mb must be > 20 and
 * max_non_split_rounding is not reset; the options 2.6 lacks are unknown;
 * its error texts). */
#include "sublet/config.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "engine/rules.h"
#include "sublet/stats.h" /* SUBLET_POOL_SMALL / LARGE */

#define MiB SL_MIB
#define PINNED_MAX_REGISTER_THREADS 128u
/* Longer configuration strings are refused outright. */
#define CONF_MAX_LEN ((size_t)64 * 1024)
/* Tokens quoted in error messages are cut to this many characters. */
#define SHOW_MAX 64

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

/* ---- small helpers ---------------------------------------------------------- */

static unsigned ilog2_u64(uint64_t v) /* v > 0 */
{
#if defined(__GNUC__) || defined(__clang__)
    return 63u - (unsigned)__builtin_clzll(v);
#else
    unsigned r = 0;
    while (v >>= 1)
        r++;
    return r;
#endif
}

static int is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

/* Does `v` (a pytorch_version) follow release `since` or a later one? */
static int since_ver(uint32_t v, uint32_t since)
{
    return v == SUBLET_PYTORCH_NEWEST || since == 0 || v >= since;
}
/* Before 2.9: PyTorch 2.6's parser (the all-in-one CUDAAllocatorConfig). */
#define V29 SUBLET_PYTORCH_VERSION(2, 9)
/* The newest options (large_segment_size_mb, throw_on_cudamalloc_oom, ...):
 * after 2.9; the release is not verified, taken as 2.10. */
#define V210 SUBLET_PYTORCH_NEWEST_AS

/* Decimal digits only, the whole string, no overflow. */
static int parse_u64(const char *p, uint64_t *out)
{
    uint64_t v = 0;
    if (*p == '\0')
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Locale-independent [+-]digits[.digits][(e|E)[+-]digits]; the whole string;
 * finite results only.  Up to 19 significant digits are kept; for ordinary
 * inputs (mantissa < 2^53, decimal exponent within ±22) the result is
 * correctly rounded, i.e. equal to strtod's in the "C" locale. */
static int parse_double(const char *p, double *out)
{
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    int neg = 0, seen = 0, sig = 0;
    long exp10 = 0;
    uint64_t mant = 0;
    if (*p == '+' || *p == '-')
        neg = (*p++ == '-');
    for (; *p >= '0' && *p <= '9'; p++) {
        seen = 1;
        if (sig < 19) {
            mant = mant * 10 + (uint64_t)(*p - '0');
            sig += mant != 0;
        } else {
            exp10++;
        }
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            seen = 1;
            if (sig < 19) {
                mant = mant * 10 + (uint64_t)(*p - '0');
                sig += mant != 0;
                exp10--;
            }
        }
    }
    if (!seen)
        return -1;
    if (*p == 'e' || *p == 'E') {
        int eneg = 0, edig = 0;
        long e = 0;
        p++;
        if (*p == '+' || *p == '-')
            eneg = (*p++ == '-');
        for (; *p >= '0' && *p <= '9'; p++, edig = 1)
            if (e < 100000)
                e = e * 10 + (*p - '0');
        if (!edig)
            return -1;
        exp10 += eneg ? -e : e;
    }
    if (*p != '\0')
        return -1;
    double v;
    if (mant == 0) {
        v = 0.0;
    } else if (mant < ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
        v = exp10 >= 0 ? (double)mant * pow10[exp10] : (double)mant / pow10[-exp10];
    } else if (exp10 > 400) {
        return -1; /* certainly not finite */
    } else {
        v = (double)mant;
        for (; exp10 > 0 && isfinite(v); exp10--)
            v *= 10.0;
        for (; exp10 < 0 && v != 0.0; exp10++)
            v /= 10.0;
    }
    if (!isfinite(v))
        return -1;
    *out = (neg && v != 0.0) ? -v : v; /* "-0" is stored as +0.0 */
    return 0;
}

/* ---- tokens ----------------------------------------------------------------- */

typedef struct token {
    const char *s; /* NUL-terminated; punctuation points at a static string */
    char punct;    /* ',' ':' '[' ']' or 0 for a word */
} token;

typedef struct pctx {
    token *t;
    size_t n;
    sublet_settings *s; /* the working copy */
    int legacy;         /* s->pytorch_version before 2.9 */
    char *err;
    size_t err_cap;
} pctx;

static sublet_status PRINTF_LIKE(2, 3) fail(pctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_vmsg(c->err, c->err_cap, fmt, ap);
    va_end(ap);
    return SUBLET_ERR_CONFIG;
}

/* A token as quoted in a message: printable ASCII, at most SHOW_MAX chars. */
typedef struct shown {
    char s[SHOW_MAX + 4];
} shown;

static shown show(const char *text)
{
    shown r;
    size_t i = 0;
    for (; text[i] && i < SHOW_MAX; i++) {
        unsigned char ch = (unsigned char)text[i];
        r.s[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (text[i]) {
        memcpy(r.s + i, "...", 3);
        i += 3;
    }
    r.s[i] = '\0';
    return r;
}

/* Split `conf` (length len) into tokens.  Words are copied, whitespace-free and
 * NUL-terminated, into one buffer; both arrays are freed by the caller. */
static int tokenize(const char *conf, size_t len, int legacy, token **tok_out, char **buf_out,
                    size_t *n_out)
{
    static const char *const punct_text[] = {",", ":", "[", "]"};
    token *t = malloc((len + 1) * sizeof *t);
    char *buf = malloc(2 * len + 2);
    size_t n = 0, b = 0, word_start = 0;
    if (!t || !buf) {
        free(t);
        free(buf);
        return -1;
    }
    for (size_t i = 0; i <= len; i++) {
        char ch = i < len ? conf[i] : '\0';
        const char *pc = ch ? strchr(",:[]", ch) : NULL;
        if (pc || ch == '\0') {
            if (b > word_start) { /* close the pending word */
                buf[b++] = '\0';
                t[n].s = buf + word_start;
                t[n++].punct = 0;
                word_start = b;
            }
            if (pc) {
                t[n].s = punct_text[pc - ",:[]"];
                t[n++].punct = ch;
            }
        } else if (legacy ? ch != ' ' : !isspace((unsigned char)ch)) {
            buf[b++] = ch;
        }
    }
    *tok_out = t;
    *buf_out = buf;
    *n_out = n;
    return 0;
}

static int is_punct(const pctx *c, size_t i, char p) { return i < c->n && c->t[i].punct == p; }

/* ---- the option table ------------------------------------------------------ */

typedef enum opt_kind {
    OPT_BOOL,    /* True | False                        -> bool            */
    OPT_MIB,     /* integer MiB                         -> uint64_t bytes  */
    OPT_U64,     /* integer                             -> uint64_t        */
    OPT_U32,     /* integer                             -> uint32_t        */
    OPT_DOUBLE,  /* float                               -> double          */
    OPT_ENUM,    /* one of `choices`                    -> its index, int  */
    OPT_POLICY,  /* one of `choices`                    -> sublet_policy   */
    OPT_ROUNDUP, /* integer or [k:v,...,>:v]            -> 16 buckets      */
    OPT_WARMUP,  /* [pool:size*count,...]               -> warm-up plan    */
    OPT_VERSION, /* a PyTorch release "2.6"             -> uint32_t 206    */
    OPT_IGNORE,  /* anything, list or word: accepted and ignored           */
} opt_kind;

typedef struct opt_desc opt_desc;
/* A validator sees the parsed value (u for integers/enum index, d for floats)
 * and returns SUBLET_OK or fail(...) with PyTorch's text. */
typedef sublet_status (*opt_check)(pctx *c, const opt_desc *o, const char *key, uint64_t u,
                                   double d);

struct opt_desc {
    const char *name;
    const char *alias; /* or NULL */
    opt_kind kind;
    size_t off;                 /* field offset in sublet_settings */
    int early;                  /* 2: applied before all; 1: in the first pass */
    const char *const *choices; /* OPT_ENUM / OPT_POLICY, NULL-terminated */
    opt_check check;            /* or NULL */
    uint32_t since;             /* the first PyTorch release with it; 0: all */
};

static sublet_status check_min_large_segment(pctx *c, const opt_desc *o, const char *key,
                                             uint64_t u, double d)
{
    uint64_t min_mb = c->s->large_segment_size / MiB;
    (void)key;
    (void)d;
    if (c->legacy) /* 2.6: strictly above kLargeBuffer */
        return u > SL_LARGE_BUFFER / MiB
                   ? SUBLET_OK
                   : fail(c, "CachingAllocator option %s too small, must be > %llu", o->name,
                          (unsigned long long)(SL_LARGE_BUFFER / MiB));
    if (u < min_mb)
        return fail(c, "CachingAllocator option %s too small, must be >= %llu", o->name,
                    (unsigned long long)min_mb);
    return SUBLET_OK;
}

static sublet_status check_large_segment(pctx *c, const opt_desc *o, const char *key, uint64_t u,
                                         double d)
{
    (void)o, (void)key, (void)d;
    if (u <= SL_MIN_LARGE_ALLOC / MiB)
        return fail(c, "CachingAllocator option large_segment_size_mb must be > %llu MB",
                    (unsigned long long)(SL_MIN_LARGE_ALLOC / MiB));
    return SUBLET_OK;
}

static sublet_status check_gc(pctx *c, const opt_desc *o, const char *key, uint64_t u, double d)
{
    (void)o, (void)key, (void)u;
    if (c->legacy && !(d > 0.0))
        return fail(c, "garbage_collect_threshold too small, set it 0.0~1.0");
    if (c->legacy && !(d < 1.0))
        return fail(c, "garbage_collect_threshold too big, set it 0.0~1.0");
    if (!(d > 0.0 && d < 1.0))
        return fail(c, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
    return SUBLET_OK;
}

static sublet_status check_fraction(pctx *c, const opt_desc *o, const char *key, uint64_t u,
                                    double d)
{
    (void)o, (void)key, (void)u;
    if (!(d >= 0.0 && d <= 1.0))
        return fail(c, "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
    return SUBLET_OK;
}

static sublet_status check_threads(pctx *c, const opt_desc *o, const char *key, uint64_t u,
                                   double d)
{
    (void)o, (void)key, (void)d;
    if (c->legacy && !is_pow2(u))
        return fail(c, "Number of register threads has to be power of 2 ");
    if (c->legacy && u > PINNED_MAX_REGISTER_THREADS)
        return fail(c, "Number of register threads should be less than or equal to %u",
                    PINNED_MAX_REGISTER_THREADS);
    if (!is_pow2(u))
        return fail(c, "Number of register threads has to be power of 2, got %llu",
                    (unsigned long long)u);
    if (u > PINNED_MAX_REGISTER_THREADS)
        return fail(c, "Number of register threads should be less than or equal to %u, got %llu",
                    PINNED_MAX_REGISTER_THREADS, (unsigned long long)u);
    return SUBLET_OK;
}

static sublet_status check_reserve(pctx *c, const opt_desc *o, const char *key, uint64_t u,
                                   double d)
{
    (void)o, (void)key, (void)d;
    if (u == 0)
        return fail(c, "Pinned reserve segment size has to be greater than 0");
    return SUBLET_OK;
}

static sublet_status check_backend(pctx *c, const opt_desc *o, const char *key, uint64_t u,
                                   double d)
{
    (void)o, (void)key, (void)d;
    if (u == UINT64_MAX)
        return fail(c, "Unknown allocator backend, options are native and cudaMallocAsync");
    return SUBLET_OK;
}

static sublet_status check_memory_fraction(pctx *c, const opt_desc *o, const char *key,
                                           uint64_t u, double d)
{
    (void)o, (void)key, (void)u;
    if (!(d >= 0.0 && d <= 1.0)) /* torch.cuda.set_per_process_memory_fraction's range */
        return fail(c, "Invalid fraction value: %g. Allowed range: 0~1", d);
    return SUBLET_OK;
}

static const char *const backend_choices[] = {"native", "cudaMallocAsync", NULL};
static const char *const policy_choices[] = {"native", "stitch", NULL};

#define F(field) offsetof(sublet_settings, field)
static const opt_desc options[] = {
    {"pytorch_version", NULL, OPT_VERSION, F(pytorch_version), 2, NULL, NULL, 0},
    {"large_segment_size_mb", NULL, OPT_MIB, F(large_segment_size), 1, NULL, check_large_segment,
     V210},
    {"max_split_size_mb", NULL, OPT_MIB, F(max_split_size), 0, NULL, check_min_large_segment, 0},
    {"max_non_split_rounding_mb", NULL, OPT_MIB, F(max_non_split_rounding), 0, NULL,
     check_min_large_segment, 0},
    {"garbage_collection_threshold", NULL, OPT_DOUBLE, F(garbage_collection_threshold), 0, NULL,
     check_gc, 0},
    {"roundup_power2_divisions", NULL, OPT_ROUNDUP, F(roundup_power2_divisions), 0, NULL, NULL, 0},
    {"expandable_segments", NULL, OPT_BOOL, F(expandable_segments), 0, NULL, NULL, 0},
    {"pinned_use_background_threads", NULL, OPT_BOOL, F(pinned_use_background_threads), 0, NULL,
     NULL, 0},
    {"backend", NULL, OPT_ENUM, F(backend_async), 0, backend_choices, check_backend, 0},
    {"release_lock_on_cudamalloc", "release_lock_on_hipmalloc", OPT_BOOL,
     F(release_lock_on_cudamalloc), 0, NULL, NULL, 0},
    {"pinned_use_cuda_host_register", "pinned_use_hip_host_register", OPT_BOOL,
     F(pinned_use_cuda_host_register), 0, NULL, NULL, 0},
    {"pinned_num_register_threads", NULL, OPT_U32, F(pinned_num_register_threads), 0, NULL,
     check_threads, 0},
    {"pinned_reserve_segment_size_mb", NULL, OPT_U64, F(pinned_reserve_segment_size_mb), 0, NULL,
     check_reserve, SUBLET_PYTORCH_VERSION(2, 8)},
    {"graph_capture_record_stream_reuse", NULL, OPT_BOOL, F(graph_capture_record_stream_reuse), 0,
     NULL, NULL, V29},
    {"per_process_memory_fraction", NULL, OPT_DOUBLE, F(per_process_memory_fraction), 0, NULL,
     check_fraction, V29},
    {"pinned_free_catch_all", NULL, OPT_BOOL, F(pinned_free_catch_all), 0, NULL, NULL, V210},
    {"throw_on_cudamalloc_oom", NULL, OPT_BOOL, F(throw_on_cudamalloc_oom), 0, NULL, NULL, V210},
    {"expandable_segments_reserve", NULL, OPT_IGNORE, 0, 0, NULL, NULL, V210},
    {"expandable_segments_reserve_by_class", NULL, OPT_IGNORE, 0, 0, NULL, NULL, V210},
    {"policy", NULL, OPT_POLICY, F(policy), 0, policy_choices, NULL, 0},
    {"warmup", NULL, OPT_WARMUP, F(warmup), 0, NULL, NULL, 0},
    {"memory_fraction", NULL, OPT_DOUBLE, F(memory_fraction), 0, NULL, check_memory_fraction, 0},
};
#undef F
#define N_OPTIONS (sizeof options / sizeof options[0])

/* The option named by `key` in release `version`, or NULL. */
static const opt_desc *find_option(const token *key, uint32_t version)
{
    if (key->punct)
        return NULL;
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strcmp(key->s, options[i].name) == 0 ||
            (options[i].alias && strcmp(key->s, options[i].alias) == 0))
            return since_ver(version, options[i].since) ? &options[i] : NULL;
    return NULL;
}

/* "2.6", "2.10", "2.6.0" (the patch level is ignored) or "newest". */
static sublet_status version_value(pctx *c, const char *key, const token *vt, uint32_t *out)
{
    uint64_t major = 0, minor = 0, patch = 0;
    char w[32];
    if (!vt->punct && strcmp(vt->s, "newest") == 0) {
        *out = SUBLET_PYTORCH_NEWEST;
        return SUBLET_OK;
    }
    size_t n = vt->punct ? sizeof w : strlen(vt->s);
    char *dot1 = NULL, *dot2 = NULL;
    if (n < sizeof w) {
        memcpy(w, vt->s, n + 1);
        dot1 = strchr(w, '.');
    }
    if (dot1) {
        *dot1 = '\0';
        dot2 = strchr(dot1 + 1, '.');
        if (dot2)
            *dot2 = '\0';
    }
    if (!dot1 || parse_u64(w, &major) != 0 || parse_u64(dot1 + 1, &minor) != 0 ||
        (dot2 && parse_u64(dot2 + 1, &patch) != 0) || major > 99 || minor > 99)
        return fail(c, "Invalid value '%s' for %s: expected a PyTorch release such as 2.6 or "
                       "'newest'",
                    show(vt->s).s, show(key).s);
    uint32_t v = SUBLET_PYTORCH_VERSION(major, minor);
    if (v < SUBLET_PYTORCH_OLDEST)
        return fail(c, "%s %s: sublet follows PyTorch 2.6 and later", show(key).s,
                    show(vt->s).s);
    *out = v;
    return SUBLET_OK;
}

static int takes_list(const opt_desc *o)
{
    return o == NULL || o->kind == OPT_ROUNDUP || o->kind == OPT_WARMUP || o->kind == OPT_IGNORE;
}

/* Integer value of token i for option `key`, with the error texts. */
static sublet_status int_value(pctx *c, const char *key, size_t i, uint64_t *u)
{
    if (parse_u64(c->t[i].s, u) != 0)
        return fail(c, "Invalid value '%s' for %s: expected a non-negative integer",
                    show(c->t[i].s).s, show(key).s);
    return SUBLET_OK;
}

/* roundup_power2_divisions: a single power of two for every bucket, or the
 * list [k:v,...,>:v] of docs/rules.md §5.3 (current main fill rules).  The list spans
 * tokens v (the '[') to end (its ']'). */
static sublet_status apply_roundup(pctx *c, const char *key, size_t v, size_t end)
{
    uint32_t *b = c->s->roundup_power2_divisions;
    uint64_t val;
    sublet_status st;
    if (!is_punct(c, v, '[')) {
        if ((st = int_value(c, key, v, &val)) != SUBLET_OK)
            return st;
        if (!is_pow2(val))
            return fail(c, c->legacy ? "For roundups, the divisons has to be power of 2 "
                                     : "For roundups, the divisions has to be power of 2");
        if (val > UINT32_MAX)
            return fail(c, "Invalid value '%s' for %s: too large", show(c->t[v].s).s, key);
        for (size_t k = 0; k < SUBLET_ROUNDUP_BUCKETS; k++)
            b[k] = (uint32_t)val;
        return SUBLET_OK;
    }
    int first = 1;
    size_t last = 0, j = v + 1;
    while (j < end) {
        size_t kt = j;
        if (!is_punct(c, j + 1, ':') || j + 1 >= end)
            return fail(c, "Error parsing CachingAllocator settings, expected :");
        if (j + 2 >= end)
            return fail(c, "Error parsing CachingAllocator settings, expected a value for %s",
                        key);
        if ((st = int_value(c, key, j + 2, &val)) != SUBLET_OK)
            return st;
        if (val != 0 && !is_pow2(val))
            return fail(c, c->legacy ? "For roundups, the divisons has to be power of 2 or 0 to "
                                       "disable roundup "
                                     : "For roundups, the divisions has to be power of 2 or 0 "
                                       "to disable roundup");
        if (val > UINT32_MAX)
            return fail(c, "Invalid value '%s' for %s: too large", show(c->t[j + 2].s).s, key);
        if (!c->t[kt].punct && strcmp(c->t[kt].s, ">") == 0) {
            /* 2.6-2.8 fill from the last listed bucket itself, 2.9+ after it */
            for (size_t k = c->legacy ? last : last + 1; k < SUBLET_ROUNDUP_BUCKETS; k++)
                b[k] = (uint32_t)val;
        } else {
            uint64_t boundary;
            if (c->t[kt].punct || parse_u64(c->t[kt].s, &boundary) != 0)
                return fail(c, "Invalid value '%s' for %s: expected a power-of-two size in MiB "
                               "or '>'",
                            show(c->t[kt].s).s, key);
            if (!is_pow2(boundary))
                return fail(c, c->legacy ? "For roundups, the intervals have to be power of 2 "
                                         : "For roundups, the intervals have to be power of 2");
            size_t idx = ilog2_u64(boundary);
            if (idx > SUBLET_ROUNDUP_BUCKETS - 1)
                idx = SUBLET_ROUNDUP_BUCKETS - 1;
            if (first) {
                for (size_t k = 0; k < idx; k++)
                    b[k] = (uint32_t)val;
                first = 0;
            }
            b[idx] = (uint32_t)val;
            last = idx;
        }
        j += 3;
        if (j < end) {
            if (!is_punct(c, j, ','))
                return fail(c, "Error parsing CachingAllocator settings, expected ,");
            j++; /* a trailing ',' before ']' is accepted, as in PyTorch */
        }
    }
    return SUBLET_OK;
}

/* warmup:[pool:size[*count],...] (sublet's): pool is small or large, size
 * a sublet_parse_size size ("512MiB", "2097152"), count >= 1 (default 1).
 * Entries are checked against the final settings after the whole string
 * (check_warmup): expandable_segments may come later in it. */
static sublet_status apply_warmup(pctx *c, const char *key, size_t v, size_t end)
{
    if (!is_punct(c, v, '['))
        return fail(c, "Invalid value '%s' for %s: expected a list [pool:size*count,...] such "
                       "as [large:512MiB*2,small:2MiB*4]",
                    show(c->t[v].s).s, key);
    sublet_settings *s = c->s;
    s->nwarmup = 0;
    memset(s->warmup, 0, sizeof s->warmup);
    for (size_t j = v + 1; j < end;) {
        size_t entry = s->nwarmup + 1;
        if (s->nwarmup == SUBLET_WARMUP_MAX)
            return fail(c, "warmup: more than %d entries", SUBLET_WARMUP_MAX);
        const token *pt = &c->t[j];
        int pool = !pt->punct && strcmp(pt->s, "small") == 0   ? SUBLET_POOL_SMALL
                   : !pt->punct && strcmp(pt->s, "large") == 0 ? SUBLET_POOL_LARGE
                                                                : 0;
        if (!pool)
            return fail(c, "warmup: entry %zu: pool '%s' is not small or large", entry,
                        show(pt->s).s);
        if (j + 2 >= end || !is_punct(c, j + 1, ':') || c->t[j + 2].punct)
            return fail(c, "warmup: entry %zu: expected %s:SIZE or %s:SIZE*COUNT", entry,
                        pt->s, pt->s);
        const char *w = c->t[j + 2].s, *star = strchr(w, '*');
        char num[64];
        size_t nl = star ? (size_t)(star - w) : strlen(w);
        uint64_t size = 0, count = 1;
        if (nl < sizeof num) {
            memcpy(num, w, nl);
            num[nl] = '\0';
        }
        if (nl >= sizeof num || sublet_parse_size(num, &size) != 0 || size == 0)
            return fail(c, "warmup: entry %zu: '%s' is not a size such as 512MiB", entry,
                        show(w).s);
        if (star && (parse_u64(star + 1, &count) != 0 || count == 0 || count > UINT32_MAX))
            return fail(c, "warmup: entry %zu: '%s': the count after '*' must be a whole "
                           "number from 1 to %u",
                        entry, show(w).s, UINT32_MAX);
        s->warmup[s->nwarmup++] = (sublet_warmup_entry){pool, (uint32_t)count, size};
        j += 3;
        if (j < end) {
            if (!is_punct(c, j, ','))
                return fail(c, "Error parsing CachingAllocator settings, expected ,");
            j++;
        }
    }
    return SUBLET_OK;
}

/* The plan against the final settings: every size one its pool can hold,
 * and a total that fits in 64 bits. */
static sublet_status check_warmup(pctx *c)
{
    const sublet_settings *s = c->s;
    uint64_t total = 0;
    for (uint32_t i = 0; i < s->nwarmup; i++) {
        const sublet_warmup_entry *e = &s->warmup[i];
        char why[192];
        if (sublet_warmup_check(s, e->pool, e->size, why, sizeof why) != SUBLET_OK)
            return fail(c, "warmup: entry %u (%s:%llu bytes): %s", i + 1,
                        e->pool == SUBLET_POOL_SMALL ? "small" : "large",
                        (unsigned long long)e->size, why);
        if (e->size > (UINT64_MAX - total) / e->count)
            return fail(c, "warmup: the plan's total does not fit in 64 bits");
        total += e->size * e->count;
    }
    return SUBLET_OK;
}

/* Apply one entry: key token `k`, value tokens v..end. */
static sublet_status apply_option(pctx *c, const opt_desc *o, size_t k, size_t v, size_t end)
{
    const char *key = c->t[k].s;
    const token *vt = &c->t[v];
    char *field = (char *)c->s + o->off;
    uint64_t u = 0;
    double d = 0.0;
    sublet_status st;

    switch (o->kind) {
    case OPT_BOOL:
        if (!vt->punct && strcmp(vt->s, "True") == 0)
            u = 1;
        else if (c->legacy && (vt->punct || strcmp(vt->s, "False") != 0))
            return fail(c, "Expected a single True/False argument for %s", o->name);
        else if (vt->punct || strcmp(vt->s, "False") != 0)
            return fail(c, "Expected 'True' or 'False' at index %zu in ConfigTokenizer but got '%s'",
                        v, show(vt->s).s);
        break;
    case OPT_MIB:
    case OPT_U64:
    case OPT_U32:
        if ((st = int_value(c, key, v, &u)) != SUBLET_OK)
            return st;
        break;
    case OPT_DOUBLE:
        if (vt->punct || parse_double(vt->s, &d) != 0)
            return fail(c, "Invalid value '%s' for %s: expected a number", show(vt->s).s,
                        show(key).s);
        break;
    case OPT_ENUM:
    case OPT_POLICY:
        u = UINT64_MAX;
        for (uint64_t i = 0; !vt->punct && o->choices[i]; i++)
            if (strcmp(vt->s, o->choices[i]) == 0)
                u = i;
        if (u == UINT64_MAX && !o->check)
            return fail(c, "Unknown sublet %s '%s', options are native and stitch", o->name,
                        show(vt->s).s);
        break;
    case OPT_ROUNDUP:
        return apply_roundup(c, key, v, end);
    case OPT_WARMUP:
        return apply_warmup(c, key, v, end);
    case OPT_VERSION: {
        uint32_t ver = SUBLET_PYTORCH_NEWEST;
        if ((st = version_value(c, key, vt, &ver)) != SUBLET_OK)
            return st;
        c->s->pytorch_version = ver;
        return SUBLET_OK;
    }
    case OPT_IGNORE:
        return SUBLET_OK;
    }
    if (o->check && (st = o->check(c, o, key, u, d)) != SUBLET_OK)
        return st;

    switch (o->kind) {
    case OPT_BOOL: {
        bool bv = u != 0;
        memcpy(field, &bv, sizeof bv);
        break;
    }
    case OPT_MIB:
        if (u > UINT64_MAX / MiB)
            return fail(c, "Invalid value '%s' for %s: too large", show(vt->s).s, show(key).s);
        u *= MiB;
        memcpy(field, &u, sizeof u);
        break;
    case OPT_U64:
        memcpy(field, &u, sizeof u);
        break;
    case OPT_U32: {
        if (u > UINT32_MAX)
            return fail(c, "Invalid value '%s' for %s: too large", show(vt->s).s, show(key).s);
        uint32_t v32 = (uint32_t)u;
        memcpy(field, &v32, sizeof v32);
        break;
    }
    case OPT_DOUBLE:
        memcpy(field, &d, sizeof d);
        break;
    case OPT_ENUM: {
        int iv = (int)u;
        memcpy(field, &iv, sizeof iv);
        break;
    }
    case OPT_POLICY:
        c->s->policy = (sublet_policy)u;
        break;
    default:
        break;
    }
    return SUBLET_OK;
}

/* One walk over the entries.  Pass 0 applies only pytorch_version, pass 1 only
 * the `early` options; both stop quietly at anything malformed (pass 2 reports
 * it, in string order); pass 2 reports every problem and applies all other
 * options. */
static sublet_status walk(pctx *c, int pass)
{
    size_t i = 0;
    uint32_t ver = pass == 0 ? SUBLET_PYTORCH_NEWEST : c->s->pytorch_version;
    while (i < c->n) {
        const opt_desc *o = find_option(&c->t[i], ver);
        if (!o && pass == 2)
            return c->legacy ? fail(c, "Unrecognized CachingAllocator option: %s",
                                    show(c->t[i].s).s)
                             : fail(c, "Unrecognized key '%s' in CUDA allocator config.",
                                    show(c->t[i].s).s);
        if (!is_punct(c, i + 1, ':'))
            return pass < 2 ? SUBLET_OK
                             : fail(c, "Error parsing CachingAllocator settings, expected :");
        size_t v = i + 2, end = v;
        if (v >= c->n)
            return pass < 2 ? SUBLET_OK
                             : fail(c,
                                    "Error parsing CachingAllocator settings, expected a value "
                                    "for %s",
                                    show(c->t[i].s).s);
        if (is_punct(c, v, '[') && takes_list(o)) {
            while (end < c->n && !is_punct(c, end, ']'))
                end++;
            if (end >= c->n)
                return pass < 2 ? SUBLET_OK
                                 : fail(c, "Error parsing CachingAllocator settings, expected ]");
        }
        if (o && o->early == 2 - pass) {
            sublet_status st = apply_option(c, o, i, v, end);
            if (st != SUBLET_OK)
                return st;
        }
        i = end + 1;
        if (i < c->n) {
            if (!is_punct(c, i, ','))
                return pass < 2 ? SUBLET_OK
                                : fail(c, "Error parsing CachingAllocator settings, expected ,");
            i++; /* a trailing ',' is accepted, as in PyTorch */
        }
    }
    return SUBLET_OK;
}

/* The release a legacy string selects (`ver`, read with the newest tokenizer)
 * must read the same under that release's own tokenizer, which keeps every
 * whitespace character but ' ' in its word (PyTorch 2.6's lexArgs):
 * "pytorch_version:\r2.8" is refused here, as 2.8 would refuse "\r40" as a
 * value, instead of selecting 2.8 once and being refused on a second parse.
 * `base` is the release of the settings parsed on. */
static sublet_status legacy_version_same(pctx *c, uint32_t base, uint32_t ver)
{
    c->s->pytorch_version = base;
    sublet_status st = walk(c, 0);
    if (st != SUBLET_OK)
        return st;
    if (c->s->pytorch_version != ver)
        return fail(c, "Error parsing CachingAllocator settings: pytorch_version reads "
                       "differently under release %u.%u's tokenizer (it keeps whitespace "
                       "other than ' ')",
                    (unsigned)(ver / 100), (unsigned)(ver % 100));
    return SUBLET_OK;
}

/* ---- public API -------------------------------------------------------------- */

void sublet_settings_default(sublet_settings *s)
{
    if (!s)
        return;
    memset(s, 0, sizeof *s);
    s->max_split_size = SUBLET_SIZE_UNLIMITED;
    s->max_non_split_rounding = SL_LARGE_BUFFER;
    s->garbage_collection_threshold = 0.0;
    s->pinned_num_register_threads = 1;
    s->per_process_memory_fraction = 1.0;
    s->large_segment_size = SL_LARGE_BUFFER;
    s->backend_async = 0;
    s->policy = SUBLET_POLICY_NATIVE;
    s->pytorch_version = SUBLET_PYTORCH_NEWEST;
    s->memory_fraction = -1.0;
    s->raw[0] = '\0';
}

/* A NULL `conf` is treated as "" (reset only). */
sublet_status sublet_settings_parse(sublet_settings *s, const char *conf, char *err,
                                    size_t err_cap)
{
    sublet_settings work;
    pctx c = {NULL, 0, &work, 0, err, err_cap};
    char *buf = NULL;
    size_t len = 0;
    sublet_status st;

    if (err && err_cap > 0)
        err[0] = '\0';
    if (!s) {
        return sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT,
                       "sublet_settings_parse: settings pointer is NULL");
    }
    if (!conf)
        conf = "";
    while (len <= CONF_MAX_LEN && conf[len])
        len++;
    if (len > CONF_MAX_LEN)
        return fail(&c, "CachingAllocator settings string too long (more than %zu bytes)",
                    CONF_MAX_LEN);

    memcpy(&work, s, sizeof work);
    /* pytorch_version first: it decides the tokenizer and every rule below.
     * It is found with the newest tokenizer whatever the settings' release, so
     * that the string means the same on any settings (a parse is idempotent). */
    if (tokenize(conf, len, 0, &c.t, &buf, &c.n) != 0)
        goto no_memory;
    st = walk(&c, 0);
    if (st == SUBLET_OK && !since_ver(work.pytorch_version, V29)) { /* tokenize again */
        uint32_t ver = work.pytorch_version;
        c.legacy = 1;
        free(c.t);
        free(buf);
        c.t = NULL;
        buf = NULL;
        if (tokenize(conf, len, 1, &c.t, &buf, &c.n) != 0)
            goto no_memory;
        st = legacy_version_same(&c, s->pytorch_version, ver);
    }
    if (st != SUBLET_OK) {
        free(c.t);
        free(buf);
        return st;
    }
    /* Reset on every parse (§5.2). */
    work.max_split_size = SUBLET_SIZE_UNLIMITED;
    memset(work.roundup_power2_divisions, 0, sizeof work.roundup_power2_divisions);
    work.garbage_collection_threshold = 0.0;
    work.nwarmup = 0;
    memset(work.warmup, 0, sizeof work.warmup);

    st = walk(&c, 1);
    if (st == SUBLET_OK) {
        if (!c.legacy) /* 2.6 kept it across parses */
            work.max_non_split_rounding = work.large_segment_size;
        st = walk(&c, 2);
    }
    if (st == SUBLET_OK)
        st = check_warmup(&c);
    free(c.t);
    free(buf);
    if (st != SUBLET_OK)
        return st;

    /* Keep the raw string, cut to fit. */
    size_t keep = len < SUBLET_CONF_RAW_MAX - 1 ? len : SUBLET_CONF_RAW_MAX - 1;
    memset(work.raw, 0, sizeof work.raw);
    memcpy(work.raw, conf, keep);
    memcpy(s, &work, sizeof *s);
    return SUBLET_OK;
no_memory:
    return sl_fail(err, err_cap, SUBLET_ERR_NO_MEMORY,
                   "out of host memory while parsing allocator settings");
}

sublet_status sublet_warmup_check(const sublet_settings *s, int pool_kind, uint64_t size,
                                  char *why, size_t why_cap)
{
    const char *pool = pool_kind == SUBLET_POOL_SMALL ? "small" : "large";
    char msg[192] = "";
    sublet_status st = SUBLET_ERR_INVALID_ARGUMENT;
    uint64_t lss = s ? s->large_segment_size : SL_LARGE_BUFFER;
    if (!s || (pool_kind != SUBLET_POOL_SMALL && pool_kind != SUBLET_POOL_LARGE)) {
        snprintf(msg, sizeof msg, "the pool must be small (%d) or large (%d)", SUBLET_POOL_SMALL,
                 SUBLET_POOL_LARGE);
    } else if (s->policy == SUBLET_POLICY_STITCH) {
        st = SUBLET_ERR_UNSUPPORTED;
        snprintf(msg, sizeof msg, "policy:stitch maps pages where it stitches them: reserving "
                                  "ahead is not supported");
    } else if (size == 0 || size >= ((uint64_t)1 << 60)) {
        snprintf(msg, sizeof msg, "the size must be from 1 byte to 1 EiB");
    } else if (s->expandable_segments) {
        uint64_t page = pool_kind == SUBLET_POOL_SMALL ? SL_SMALL_BUFFER : lss;
        if (size % page == 0)
            return SUBLET_OK;
        snprintf(msg, sizeof msg, "with expandable segments the %s pool maps pages of %llu MiB: "
                                  "the size must be a multiple of that",
                 pool, (unsigned long long)(page / MiB));
    } else if (pool_kind == SUBLET_POOL_SMALL) {
        if (size == SL_SMALL_BUFFER)
            return SUBLET_OK;
        snprintf(msg, sizeof msg, "a small-pool segment is 2 MiB (kSmallBuffer)");
    } else {
        if (size == lss || (size % SL_ROUND_LARGE == 0 && size >= SL_MIN_LARGE_ALLOC))
            return SUBLET_OK;
        snprintf(msg, sizeof msg, "a large-pool segment is large_segment_size (%llu MiB) or a "
                                  "multiple of 2 MiB of at least 10 MiB",
                 (unsigned long long)(lss / MiB));
    }
    return sl_fail(why, why_cap, st, "%s", msg);
}

size_t sublet_warmup_format(const sublet_warmup_entry *plan, size_t n, char *buf, size_t cap)
{
    size_t len = 0;
#define PUT(...)                                                                        \
    do {                                                                                \
        int k_ = snprintf(buf && len < cap ? buf + len : NULL, buf && len < cap ? cap - len : 0, \
                          __VA_ARGS__);                                                 \
        if (k_ > 0)                                                                     \
            len += (size_t)k_;                                                          \
    } while (0)
    if (buf && cap)
        buf[0] = '\0';
    PUT("warmup:[");
    for (size_t i = 0; plan && i < n; i++) {
        const sublet_warmup_entry *e = &plan[i];
        const char *pool = e->pool == SUBLET_POOL_SMALL ? "small" : "large";
        if (e->size % MiB == 0)
            PUT("%s%s:%lluMiB", i ? "," : "", pool, (unsigned long long)(e->size / MiB));
        else
            PUT("%s%s:%llu", i ? "," : "", pool, (unsigned long long)e->size);
        if (e->count != 1)
            PUT("*%u", e->count);
    }
    PUT("]");
#undef PUT
    return len;
}

const char *sublet_settings_env(const char **which_out)
{
    return sublet_settings_env_for(SUBLET_PYTORCH_NEWEST, which_out);
}

bool sublet_settings_since(const sublet_settings *s, uint32_t version)
{
    return s && since_ver(s->pytorch_version, version);
}

const char *sublet_settings_env_for(uint32_t pytorch_version, const char **which_out)
{
    static const char *const vars[] = {"SUBLET_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF",
                                       "PYTORCH_ALLOC_CONF"};
    /* PYTORCH_ALLOC_CONF is read from 2.9 on */
    size_t nvars = since_ver(pytorch_version, V29) ? 3 : 2;
    for (size_t i = 0; i < nvars; i++) {
        const char *v = getenv(vars[i]);
        if (v) { /* set-but-empty counts as set */
            if (which_out)
                *which_out = vars[i];
            return v;
        }
    }
    if (which_out)
        *which_out = NULL;
    return NULL;
}

/* "<number>[<unit>]" with optional whitespace around the number and before the
 * unit.  The number is decimal with an optional fraction; the result is
 * floor(number × unit), computed exactly in integers. */
int sublet_parse_size(const char *text, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", (uint64_t)1 << 10},
        {"kib", (uint64_t)1 << 10},
        {"m", (uint64_t)1 << 20},
        {"mib", (uint64_t)1 << 20},
        {"g", (uint64_t)1 << 30},
        {"gib", (uint64_t)1 << 30},
        {"t", (uint64_t)1 << 40},
        {"tib", (uint64_t)1 << 40},
        {"kb", 1000ull},
        {"mb", 1000000ull},
        {"gb", 1000000000ull},
        {"tb", 1000000000000ull},
    };
    const char *p = text, *int_start, *frac_start = NULL, *frac_end = NULL;
    char unit[4];
    size_t ul = 0;
    uint64_t mult = 0, ip = 0, fp = 0;

    if (!text || !out)
        return -1;
    while (isspace((unsigned char)*p))
        p++;
    int_start = p;
    while (*p >= '0' && *p <= '9')
        p++;
    const char *int_end = p;
    if (*p == '.') {
        frac_start = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        frac_end = p;
    }
    if (int_end == int_start && (!frac_start || frac_end == frac_start))
        return -1; /* no digits at all */
    while (isspace((unsigned char)*p))
        p++;
    while (isalpha((unsigned char)*p)) {
        if (ul == sizeof unit - 1)
            return -1;
        unit[ul++] = (char)tolower((unsigned char)*p++);
    }
    unit[ul] = '\0';
    while (isspace((unsigned char)*p))
        p++;
    if (*p != '\0')
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(unit, units[i].unit) == 0)
            mult = units[i].mult;
    if (mult == 0)
        return -1;
    for (const char *q = int_start; q < int_end; q++) {
        unsigned dg = (unsigned)(*q - '0');
        if (ip > (UINT64_MAX - dg) / 10)
            return -1;
        ip = ip * 10 + dg;
    }
    /* floor(0.d1..dk × mult) by long division from the last digit:
     * Y_i = floor((d_i × mult + Y_{i+1}) / 10) is exact, and stays below
     * 10 × mult, far from overflow. */
    if (frac_start)
        for (const char *q = frac_end; q > frac_start; q--)
            fp = ((uint64_t)(q[-1] - '0') * mult + fp) / 10;
    if (ip > UINT64_MAX / mult || ip * mult > UINT64_MAX - fp)
        return -1;
    *out = ip * mult + fp;
    return 0;
}
