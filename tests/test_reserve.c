/* sublet — pre-allocation: sublet_reserve() (sublet/sublet.h) and the warm-up
 * plan option `warmup:[pool:size*count,...]` (sublet/config.h): the sizes a
 * pool accepts, the statistics and trace events of a reservation, a reserved
 * segment serving later requests without a device call, the OOM path, the
 * expandable-segment form, policy:stitch refused, the option's parsing (good
 * and bad strings, all or nothing), the plan applied at creation, on
 * sublet_settings_apply (only what is missing) and from SUBLET_ALLOC_CONF,
 * and reservations racing allocations on several threads.  sublet_check()
 * runs after every operation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/config.h"
#include "support/harness.h"

#define SIM_CAP (8 * GiB)

typedef struct rec {
    int n;
    sublet_action act[64];
    uint64_t addr[64], size[64];
    sublet_stream stream[64];
} rec;

static void on_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    rec *r = user;
    if (act != SUBLET_ACT_SEGMENT_ALLOC && act != SUBLET_ACT_SEGMENT_MAP &&
        act != SUBLET_ACT_SEGMENT_FREE && act != SUBLET_ACT_OOM)
        return;
    if (r->n < 64) {
        r->act[r->n] = act;
        r->addr[r->n] = addr;
        r->size[r->n] = size;
        r->stream[r->n] = stream;
    }
    r->n++;
}

static int ooms_observed;
static void on_oom(void *user, int device, uint64_t size, uint64_t limit, uint64_t dev_free)
{
    (void)user, (void)device, (void)size, (void)limit, (void)dev_free;
    ooms_observed++;
}

/* sublet_reserve, then sublet_check */
static sublet_status reserve(sublet_allocator *a, uint64_t size, sublet_stream s, int pool)
{
    sublet_status st = sublet_reserve(a, size, s, pool);
    CHECK(a);
    return st;
}

/* ---- the sizes a pool accepts ---------------------------------------------------------- */

static void test_reserve_sizes(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "");
    sublet_stats before, after;
    sublet_stats_read(e.a, &before);
    static const struct {
        uint64_t size;
        int pool;
    } bad[] = {
        {MiB, SUBLET_POOL_SMALL},       {4 * MiB, SUBLET_POOL_SMALL},
        {2 * MiB, SUBLET_POOL_LARGE},   {4 * MiB, SUBLET_POOL_LARGE},
        {11 * MiB, SUBLET_POOL_LARGE},  {21 * MiB, SUBLET_POOL_LARGE},
        {0, SUBLET_POOL_LARGE},         {(uint64_t)1 << 60, SUBLET_POOL_LARGE},
        {20 * MiB, 0},                  {20 * MiB, 3},
        {20 * MiB, SUBLET_POOL_ALL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (reserve(e.a, bad[i].size, 0, bad[i].pool) != SUBLET_ERR_INVALID_ARGUMENT)
            fail_msg("size %llu in pool %d was accepted", (unsigned long long)bad[i].size,
                     bad[i].pool);
        char why[192] = "";
        sublet_settings s;
        sublet_settings_get(e.a, &s);
        assert_int_equal(sublet_warmup_check(&s, bad[i].pool, bad[i].size, why, sizeof why),
                         SUBLET_ERR_INVALID_ARGUMENT);
        assert_true(why[0] != '\0');
    }
    assert_int_equal(sublet_reserve(NULL, 20 * MiB, 0, SUBLET_POOL_LARGE),
                     SUBLET_ERR_INVALID_ARGUMENT);
    sublet_stats_read(e.a, &after);
    h_stats_equal(&before, &after); /* refusals change nothing */

    /* what the pools create: 2 MiB small; large_segment_size, or 2 MiB steps from 10 MiB */
    assert_int_equal(reserve(e.a, 2 * MiB, 0, SUBLET_POOL_SMALL), SUBLET_OK);
    assert_int_equal(reserve(e.a, 10 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(reserve(e.a, 20 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(reserve(e.a, 22 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(h_nsegments(e.a), 4);
    h_env_fini(&e);

    /* large_segment_size_mb:11: an 11 MiB large segment is one the pool makes */
    h_env_init(&e, H_SIM, SIM_CAP, "large_segment_size_mb:11");
    assert_int_equal(reserve(e.a, 11 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(reserve(e.a, 13 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_ERR_INVALID_ARGUMENT);
    h_env_fini(&e);

    h_env_init(&e, H_SIM, SIM_CAP, "policy:stitch");
    assert_int_equal(reserve(e.a, 20 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_ERR_UNSUPPORTED);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
}

/* ---- statistics, events, reuse --------------------------------------------------------- */

static void test_reserve_serves_later_requests(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "max_split_size_mb:256");
    rec r = {0};
    sublet_trace_set(e.a, on_trace, &r);

    assert_int_equal(reserve(e.a, 512 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(h_stat(e.a, "segment.large_pool.current"), 1);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 512 * MiB);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.peak"), 512 * MiB);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"), 0);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 1);
    assert_int_equal(h_stat(e.a, "oversize_segments.current"), 1); /* >= max_split_size */
    assert_int_equal(r.n, 1);
    assert_int_equal(r.act[0], SUBLET_ACT_SEGMENT_ALLOC);
    assert_int_equal(r.size[0], 512 * MiB);
    assert_int_equal(r.stream[0], 0);
    uint64_t seg = r.addr[0];

    /* a 512 MiB request takes it: no device call */
    void *p = h_malloc(e.a, 512 * MiB, 0);
    assert_int_equal(h_addr(p), seg);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 1);
    assert_int_equal(r.n, 1);
    h_free(e.a, p);

    /* small pool: one 2 MiB segment serves many small requests */
    assert_int_equal(reserve(e.a, 2 * MiB, 0, SUBLET_POOL_SMALL), SUBLET_OK);
    assert_int_equal(h_stat(e.a, "segment.small_pool.current"), 1);
    void *s1 = h_malloc(e.a, 1000, 0), *s2 = h_malloc(e.a, 300 * KiB, 0);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 2);
    assert_int_equal(h_segment_of(e.a, h_addr(s1)).addr, r.addr[1]);
    assert_int_equal(h_segment_of(e.a, h_addr(s2)).addr, r.addr[1]);
    h_free(e.a, s1);
    h_free(e.a, s2);

    /* a reservation is for its stream: another stream's request does not take it */
    assert_int_equal(reserve(e.a, 20 * MiB, 7, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(r.stream[2], 7);
    void *q0 = h_malloc(e.a, 15 * MiB, 0);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 4);
    void *q7 = h_malloc(e.a, 15 * MiB, 7);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 4);
    assert_int_equal(h_segment_of(e.a, h_addr(q7)).addr, r.addr[2]);
    h_free(e.a, q0);
    h_free(e.a, q7);

    /* cached like any segment: empty_cache returns it */
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    assert_int_equal(h_stat(e.a, "num_device_free"), 4);
    h_env_fini(&e);
}

/* ---- the OOM path ----------------------------------------------------------------------- */

static void test_reserve_oom(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, GiB, "");
    rec r = {0};
    sublet_trace_set(e.a, on_trace, &r);
    ooms_observed = 0;
    sublet_oom_observer_set(e.a, on_oom, NULL);
    void *p = h_malloc(e.a, 600 * MiB, 0);
    h_free(e.a, p); /* 600 MiB cached */
    sublet_stats before, after;
    sublet_stats_read(e.a, &before);
    r.n = 0;
    assert_int_equal(reserve(e.a, 512 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_ERR_OOM);
    sublet_stats_read(e.a, &after);
    h_stats_equal(&before, &after); /* the cache was not freed to make room */
    assert_int_equal(r.n, 0);       /* nothing emitted, not even an oom event */
    assert_int_equal(ooms_observed, 0);
    char msg[2048];
    sublet_oom_message(e.a, msg, sizeof msg);
    assert_non_null(strstr(msg, "sublet_reserve: cannot reserve 512.00 MiB in the large pool"));

    /* the memory fraction */
    h_empty_cache(e.a);
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.5), SUBLET_OK);
    assert_int_equal(reserve(e.a, 514 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_ERR_OOM);
    sublet_oom_message(e.a, msg, sizeof msg);
    assert_non_null(strstr(msg, "the memory fraction allows 512.00 MiB more"));
    assert_int_equal(reserve(e.a, 512 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(h_stat(e.a, "num_ooms"), 0);
    h_env_fini(&e);
}

/* ---- expandable segments: pages mapped ahead -------------------------------------------- */

static void test_reserve_expandable(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "expandable_segments:True");
    rec r = {0};
    sublet_trace_set(e.a, on_trace, &r);
    assert_int_equal(reserve(e.a, 30 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(reserve(e.a, 3 * MiB, 0, SUBLET_POOL_SMALL), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(reserve(e.a, 60 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 60 * MiB);
    assert_int_equal(h_stat(e.a, "segment.all.current"), 0); /* pages, not segments */
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 1);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.act[0], SUBLET_ACT_SEGMENT_MAP);
    assert_int_equal(r.size[0], 60 * MiB);
    /* additive: 40 MiB more at the growable end, one run of 100 MiB */
    assert_int_equal(reserve(e.a, 40 * MiB, 0, SUBLET_POOL_LARGE), SUBLET_OK);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 100 * MiB);
    assert_int_equal(r.addr[1], r.addr[0] + 60 * MiB);
    /* requests use the mapped pages without mapping */
    void *p = h_malloc(e.a, 90 * MiB, 0);
    assert_int_equal(h_addr(p), r.addr[0]);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 2);
    void *q = h_malloc(e.a, 10 * MiB, 0);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 2);
    h_free(e.a, p);
    h_free(e.a, q);
    assert_int_equal(reserve(e.a, 4 * MiB, 0, SUBLET_POOL_SMALL), SUBLET_OK);
    assert_int_equal(h_stat(e.a, "reserved_bytes.small_pool.current"), 4 * MiB);
    void *s = h_malloc(e.a, 3 * MiB / 2, 0); /* large pool: > 1 MiB */
    void *t = h_malloc(e.a, 100 * KiB, 0);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 3);
    h_free(e.a, s);
    h_free(e.a, t);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
}

/* ---- the option ------------------------------------------------------------------------- */

static void test_warmup_parse(void **state)
{
    (void)state;
    sublet_settings s;
    sublet_settings_default(&s);
    char err[512];
    assert_int_equal(sublet_settings_parse(&s, "max_split_size_mb:512, warmup : [ large : "
                                               "512 MiB * 2 , small:2MiB*4,large:20971520]",
                                           err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(s.nwarmup, 3);
    assert_int_equal(s.warmup[0].pool, SUBLET_POOL_LARGE);
    assert_int_equal(s.warmup[0].size, 512 * MiB);
    assert_int_equal(s.warmup[0].count, 2);
    assert_int_equal(s.warmup[1].pool, SUBLET_POOL_SMALL);
    assert_int_equal(s.warmup[1].size, 2 * MiB);
    assert_int_equal(s.warmup[1].count, 4);
    assert_int_equal(s.warmup[2].size, 20 * MiB);
    assert_int_equal(s.warmup[2].count, 1);
    assert_int_equal(s.max_split_size, 512 * MiB);

    /* the text form, and back */
    char text[256];
    size_t n = sublet_warmup_format(s.warmup, s.nwarmup, text, sizeof text);
    assert_string_equal(text, "warmup:[large:512MiB*2,small:2MiB*4,large:20MiB]");
    assert_int_equal(n, strlen(text));
    assert_int_equal(sublet_warmup_format(s.warmup, s.nwarmup, NULL, 0), n);
    char cut[10];
    sublet_warmup_format(s.warmup, s.nwarmup, cut, sizeof cut);
    assert_string_equal(cut, "warmup:[l");
    sublet_settings back;
    sublet_settings_default(&back);
    assert_int_equal(sublet_settings_parse(&back, text, err, sizeof err), SUBLET_OK);
    assert_int_equal(back.nwarmup, 3);
    assert_memory_equal(back.warmup, s.warmup, 3 * sizeof s.warmup[0]);

    /* reset on every parse, as max_split_size: no warmup named, no plan */
    assert_int_equal(sublet_settings_parse(&s, "garbage_collection_threshold:0.8", err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(s.nwarmup, 0);
    assert_int_equal(sublet_settings_parse(&s, "warmup:[large:20MiB],warmup:[]", err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(s.nwarmup, 0);
    /* expandable: sizes are page multiples, checked against the final settings */
    assert_int_equal(sublet_settings_parse(&s, "warmup:[large:100MiB,small:6MiB],"
                                               "expandable_segments:True",
                                           err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(s.nwarmup, 2);
    assert_true(s.expandable_segments);
    /* 64 entries is the most */
    char many[4096] = "warmup:[";
    for (int i = 0; i < SUBLET_WARMUP_MAX; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%slarge:%dMiB", i ? "," : "",
                 20 + 2 * i);
    strcat(many, "]");
    sublet_settings_default(&s);
    assert_int_equal(sublet_settings_parse(&s, many, err, sizeof err), SUBLET_OK);
    assert_int_equal(s.nwarmup, SUBLET_WARMUP_MAX);
    many[strlen(many) - 1] = '\0';
    strcat(many, ",small:2MiB]");
    sublet_settings keep = s;
    assert_int_equal(sublet_settings_parse(&s, many, err, sizeof err), SUBLET_ERR_CONFIG);
    assert_non_null(strstr(err, "more than 64 entries"));
    assert_memory_equal(&s, &keep, sizeof s);
}

static void test_warmup_parse_bad(void **state)
{
    (void)state;
    static const struct {
        const char *conf, *says;
    } bad[] = {
        {"warmup:large:20MiB", "expected a list"},
        {"warmup:[medium:20MiB]", "entry 1: pool 'medium' is not small or large"},
        {"warmup:[large]", "entry 1: expected large:SIZE"},
        {"warmup:[large:]", "entry 1: expected large:SIZE"},
        {"warmup:[large:abc]", "entry 1: 'abc' is not a size"},
        {"warmup:[large:20MiB*0]", "the count after '*'"},
        {"warmup:[large:20MiB*x]", "the count after '*'"},
        {"warmup:[large:20MiB*]", "the count after '*'"},
        {"warmup:[large:20MiB,small:4MiB]", "entry 2 (small:4194304 bytes): a small-pool "
                                            "segment is 2 MiB"},
        {"warmup:[large:4MiB]", "a large-pool segment is large_segment_size (20 MiB)"},
        {"warmup:[large:21MiB]", "multiple of 2 MiB of at least 10 MiB"},
        {"warmup:[large:20MB]", "entry 1 (large:20000000 bytes)"},
        {"warmup:[large:30MiB],expandable_segments:True", "multiple of that"},
        {"policy:stitch,warmup:[large:20MiB]", "policy:stitch"},
        {"warmup:[large:512GiB*4294967295]", "does not fit in 64 bits"},
        {"warmup:[large:20MiB large:40MiB]", "is not a size"},
        {"warmup:[large:20MiB;large:40MiB]", "is not a size"},
        {"warmup:[large:20MiB", "expected ]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sublet_settings s, keep;
        sublet_settings_default(&s);
        assert_int_equal(sublet_settings_parse(&s, "warmup:[small:2MiB]", NULL, 0), SUBLET_OK);
        keep = s;
        char err[512] = "";
        sublet_status st = sublet_settings_parse(&s, bad[i].conf, err, sizeof err);
        if (st != SUBLET_ERR_CONFIG || !strstr(err, bad[i].says))
            fail_msg("'%s': status %s, message '%s' (want '%s')", bad[i].conf,
                     sublet_status_name(st), err, bad[i].says);
        assert_memory_equal(&s, &keep, sizeof s); /* refused whole */
    }
}

/* ---- the plan applied ---------------------------------------------------------------------- */

static void test_warmup_at_creation(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "warmup:[large:512MiB*2,large:20MiB*3,small:2MiB*4]");
    assert_int_equal(h_nsegments(e.a), 9);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 1084 * MiB);
    assert_int_equal(h_stat(e.a, "reserved_bytes.small_pool.current"), 8 * MiB);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 9);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"), 0);
    /* what the plan was made for runs without a device call */
    void *p[12];
    int k = 0;
    p[k++] = h_malloc(e.a, 512 * MiB, 0);
    p[k++] = h_malloc(e.a, 500 * MiB, 0);
    for (int i = 0; i < 3; i++)
        p[k++] = h_malloc(e.a, 18 * MiB, 0);
    for (int i = 0; i < 4; i++)
        p[k++] = h_malloc(e.a, 2 * MiB - 4096, 0); /* small pool, one segment each */
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 9);
    for (int i = 0; i < k; i++)
        h_free(e.a, p[i]);
    h_env_fini(&e);

    /* a plan that does not fit: no allocator, nothing left on the device */
    sublet_backend *sim;
    assert_int_equal(sublet_sim_create(GiB, &sim), SUBLET_OK);
    sublet_options o = {.backend = sim, .conf = "warmup:[large:512MiB*3]"};
    sublet_allocator *a = (sublet_allocator *)&o; /* must be reset */
    char err[512] = "";
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_ERR_OOM);
    assert_null(a);
    assert_non_null(strstr(err, "warmup: the plan needs 1.50 GiB more"));
    assert_int_equal(sublet_sim_used(sim), 0);
    /* within the fraction or not at all */
    o.conf = "per_process_memory_fraction:0.5,warmup:[large:300MiB*2]";
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_ERR_OOM);
    assert_non_null(strstr(err, "within the memory fraction"));
    assert_int_equal(sublet_sim_used(sim), 0);
    /* a bad plan is a configuration error naming it */
    o.conf = "warmup:[large:3MiB]";
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_ERR_CONFIG);
    assert_non_null(strstr(err, "warmup: entry 1"));
    sublet_backend_destroy(sim);

    /* from the environment */
    const char *old = getenv("SUBLET_ALLOC_CONF");
    char *saved = old ? strdup(old) : NULL;
    setenv("SUBLET_ALLOC_CONF", "warmup:[large:20MiB*2]", 1);
    assert_int_equal(sublet_sim_create(SIM_CAP, &sim), SUBLET_OK);
    sublet_options eo = {.backend = sim, .conf = NULL};
    assert_int_equal(sublet_allocator_create(&eo, &a, err, sizeof err), SUBLET_OK);
    assert_int_equal(h_nsegments(a), 2);
    CHECK(a);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(sim);
    if (saved) {
        setenv("SUBLET_ALLOC_CONF", saved, 1);
        free(saved);
    } else {
        unsetenv("SUBLET_ALLOC_CONF");
    }
}

static void test_warmup_settings_apply(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 2 * GiB, "");
    char err[512];
    assert_int_equal(sublet_settings_apply(e.a, "warmup:[large:20MiB*2]", err, sizeof err),
                     SUBLET_OK);
    CHECK(e.a);
    assert_int_equal(h_nsegments(e.a), 2);
    /* the same again: it is held, nothing more */
    assert_int_equal(sublet_settings_apply(e.a, "warmup:[large:20MiB*2]", err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(h_nsegments(e.a), 2);
    /* a segment in use counts as held */
    void *p = h_malloc(e.a, 20 * MiB, 0);
    assert_int_equal(sublet_settings_apply(e.a, "warmup:[large:20MiB*3,large:20MiB]", err,
                                           sizeof err),
                     SUBLET_OK);
    CHECK(e.a);
    assert_int_equal(h_nsegments(e.a), 4);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 4);
    /* a string without a plan releases nothing */
    assert_int_equal(sublet_settings_apply(e.a, "max_split_size_mb:256", err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(h_nsegments(e.a), 4);
    sublet_settings s;
    sublet_settings_get(e.a, &s);
    assert_int_equal(s.nwarmup, 0);
    /* too much: refused, the settings and the segments as they were */
    assert_int_equal(sublet_settings_apply(e.a, "warmup:[large:1024MiB*2]", err, sizeof err),
                     SUBLET_ERR_OOM);
    assert_non_null(strstr(err, "warmup: the plan needs 2.00 GiB more"));
    CHECK(e.a);
    sublet_settings now;
    sublet_settings_get(e.a, &now);
    assert_memory_equal(&now, &s, sizeof s);
    assert_int_equal(h_nsegments(e.a), 4);
    h_free(e.a, p);
    h_env_fini(&e);

    /* expandable: pages already mapped count */
    h_env_init(&e, H_SIM, SIM_CAP, "expandable_segments:True,warmup:[large:100MiB,small:4MiB]");
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 100 * MiB);
    assert_int_equal(h_stat(e.a, "reserved_bytes.small_pool.current"), 4 * MiB);
    assert_int_equal(sublet_settings_apply(e.a, "expandable_segments:True,warmup:[large:100MiB,"
                                                "small:4MiB]",
                                           err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 104 * MiB);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 2);
    assert_int_equal(sublet_settings_apply(e.a, "expandable_segments:True,warmup:[large:40MiB*4]",
                                           err, sizeof err),
                     SUBLET_OK);
    CHECK(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 160 * MiB);
    h_env_fini(&e);
}

/* ---- threads ---------------------------------------------------------------------------------- */

typedef struct worker {
    sublet_allocator *a;
    sublet_stream stream;
    int failures;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 40; i++) {
        if (sublet_reserve(w->a, 20 * MiB, w->stream, SUBLET_POOL_LARGE) != SUBLET_OK)
            w->failures++;
        void *p = NULL;
        if (sublet_malloc(w->a, 12 * MiB, w->stream, &p) != SUBLET_OK || !p)
            w->failures++;
        if (sublet_free(w->a, p) != SUBLET_OK)
            w->failures++;
        if (i % 10 == 9 && sublet_empty_cache(w->a) != SUBLET_OK)
            w->failures++;
    }
    return NULL;
}

static void test_reserve_threads(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 64 * GiB, "");
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){e.a, (sublet_stream)i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    CHECK(e.a);
    h_env_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_sizes),
        cmocka_unit_test(test_reserve_serves_later_requests),
        cmocka_unit_test(test_reserve_oom),
        cmocka_unit_test(test_reserve_expandable),
        cmocka_unit_test(test_warmup_parse),
        cmocka_unit_test(test_warmup_parse_bad),
        cmocka_unit_test(test_warmup_at_creation),
        cmocka_unit_test(test_warmup_settings_apply),
        cmocka_unit_test(test_reserve_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
