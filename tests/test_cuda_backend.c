/* sublet — tests of the cuda backend (label "gpu").
 *
 * Without a CUDA driver or device (this project's machines), creating the
 * backend must fail with SUBLET_ERR_UNSUPPORTED and a clear message; the
 * device tests then call skip() and the program exits 77, which ctest reports
 * as skipped.  SUBLET_REQUIRE_GPU=1 (scripts/gpu-check) turns that into a
 * failure.
 *
 * With a device (a real GPU, or the fake driver of tests/cli_cuda_fake.sh,
 * which sets SUBLET_FAKE_CUDA=1), the same tests run for real: segments,
 * events, memory info, VMM, errors with the driver's names, and an
 * allocator on top.  Checks that only the fake can make (counters of live
 * driver objects, OOM in the middle of a map) run only under it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/backend_cuda.h"
#include "sublet/sublet.h"

#define MiB (UINT64_C(1) << 20)
#define CU_EVENT_DISABLE_TIMING_X 0x2 /* cuda.h: CU_EVENT_DISABLE_TIMING */

static int have_device;
static int fake; /* the fake driver of tests/fake/fake_libcuda.c */
static char why[512];

static sublet_backend *gpu(void)
{
    sublet_backend *b = NULL;
    char err[512];
    sublet_status st = sublet_cuda_create(0, &b, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("sublet_cuda_create(0): %s: %s", sublet_status_name(st), err);
    assert_non_null(b);
    return b;
}

#define NEED_DEVICE()                                                                         \
    do {                                                                                      \
        if (!have_device) {                                                                   \
            print_message("skipped: %s\n", why);                                              \
            skip();                                                                           \
        }                                                                                     \
    } while (0)

static void last_error_has(sublet_backend *b, const char *needle)
{
    char msg[512];
    sublet_cuda_last_error(b, msg, sizeof msg);
    if (!strstr(msg, needle))
        fail_msg("last error \"%s\" lacks \"%s\"", msg, needle);
}

typedef unsigned long long (*counter_fn)(void);

/* A counter of the fake driver (0 under a real one: callers check `fake`). */
static unsigned long long fake_counter(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *p = dlsym(h, name);
    assert_non_null(p);
    counter_fn f;
    memcpy(&f, &p, sizeof f);
    unsigned long long v = f();
    dlclose(h);
    return v;
}

/* ---- always ---------------------------------------------------------------------------- */

static void test_create_arguments(void **state)
{
    (void)state;
    char err[256];
    sublet_backend *b = (sublet_backend *)1;
    assert_int_equal(sublet_cuda_create(0, NULL, err, sizeof err), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_status st = sublet_cuda_create(-1, &b, err, sizeof err);
    assert_true(st == SUBLET_ERR_INVALID_ARGUMENT || st == SUBLET_ERR_UNSUPPORTED);
    /* No such device: unsupported, with "no CUDA ..." */
    b = NULL;
    st = sublet_cuda_create(4096, &b, err, sizeof err);
    assert_int_equal(st, SUBLET_ERR_UNSUPPORTED);
    assert_null(b);
    assert_non_null(strstr(err, "no CUDA"));
    /* Not a cuda backend. */
    assert_false(sublet_is_cuda(NULL));
    char buf[8];
    assert_int_equal(sublet_cuda_last_error(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
}

static void test_no_device_message(void **state)
{
    (void)state;
    if (have_device) {
        int n = 0;
        assert_int_equal(sublet_cuda_device_count(&n, NULL, 0), SUBLET_OK);
        assert_true(n >= 1);
        return;
    }
    /* The message must say what is missing. */
    assert_true(strstr(why, "no CUDA driver (libcuda.so.1) found") != NULL ||
                strstr(why, "no CUDA device") != NULL ||
                strstr(why, "no CUDA support in this build") != NULL ||
                strstr(why, "CUDA driver") != NULL);
    int n = -1;
    sublet_status st = sublet_cuda_device_count(&n, NULL, 0);
    assert_int_equal(n, 0);
    assert_true(st == SUBLET_OK || st == SUBLET_ERR_UNSUPPORTED);
    print_message("no GPU here: %s\n", why);
}

/* ---- with a device ----------------------------------------------------------------------- */

static void test_segments(void **state)
{
    (void)state;
    NEED_DEVICE();
    sublet_backend *b = gpu();
    assert_true(sublet_is_cuda(b));
    assert_string_equal(b->name, "cuda");
    char name[128];
    assert_true(sublet_cuda_device_name(b, name, sizeof name) > 0);
    assert_true(sublet_cuda_driver_version() > 0);

    uint64_t fr0 = 0, tot = 0;
    assert_int_equal(b->ops->mem_info(b, &fr0, &tot), SUBLET_OK);
    assert_true(tot > 0 && fr0 <= tot);

    uint64_t a1 = 0, a2 = 0;
    assert_int_equal(b->ops->segment_alloc(b, 2 * MiB, 0, &a1), SUBLET_OK);
    assert_int_equal(b->ops->segment_alloc(b, 20 * MiB, 0, &a2), SUBLET_OK);
    assert_true(a1 != 0 && a2 != 0 && a1 != a2);
    if (fake) {
        uint64_t fr1 = 0;
        assert_int_equal(b->ops->mem_info(b, &fr1, &tot), SUBLET_OK);
        assert_int_equal(fr0 - fr1, 22 * MiB);
        assert_int_equal(fake_counter("fake_cuda_live_allocs"), 2);
    }
    assert_int_equal(b->ops->segment_free(b, a1, 2 * MiB), SUBLET_OK);
    assert_int_equal(b->ops->segment_free(b, a2, 20 * MiB), SUBLET_OK);
    if (fake)
        assert_int_equal(fake_counter("fake_cuda_live_allocs"), 0);

    /* Errors: the driver's names, never an abort. */
    uint64_t big = 0;
    assert_int_equal(b->ops->segment_alloc(b, tot * 4, 0, &big), SUBLET_ERR_DEVICE_OOM);
    last_error_has(b, "CUDA_ERROR_OUT_OF_MEMORY");
    last_error_has(b, "cuMemAlloc");
    assert_int_equal(b->ops->segment_free(b, a2, 20 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    last_error_has(b, "CUDA_ERROR_INVALID_VALUE");
    assert_int_equal(b->ops->segment_alloc(b, 0, 0, &big), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_backend_destroy(b);
}

static void test_events(void **state)
{
    (void)state;
    NEED_DEVICE();
    sublet_backend *b = gpu();
    sublet_event *ev = NULL;
    int done = -1;
    assert_int_equal(b->ops->event_create(b, &ev), SUBLET_OK);
    if (fake)
        assert_int_equal(fake_counter("fake_cuda_last_event_flags"), CU_EVENT_DISABLE_TIMING_X);
    assert_int_equal(b->ops->event_query(b, ev, &done), SUBLET_OK);
    assert_int_equal(done, 1); /* never recorded */
    assert_int_equal(b->ops->event_record(b, ev, 0), SUBLET_OK);
    assert_int_equal(b->ops->event_query(b, ev, &done), SUBLET_OK);
    if (fake)
        assert_int_equal(done, 0); /* CUDA_ERROR_NOT_READY is "not done", not an error */
    assert_int_equal(b->ops->event_synchronize(b, ev), SUBLET_OK);
    assert_int_equal(b->ops->event_query(b, ev, &done), SUBLET_OK);
    assert_int_equal(done, 1);
    /* The per-thread default stream is a valid stream handle too. */
    assert_int_equal(b->ops->event_record(b, ev, 0x2), SUBLET_OK);
    assert_int_equal(b->ops->event_synchronize(b, ev), SUBLET_OK);
    /* An event of another backend is refused. */
    sublet_backend *sim = NULL;
    sublet_event *sev = NULL;
    assert_int_equal(sublet_sim_create(MiB, &sim), SUBLET_OK);
    assert_int_equal(sim->ops->event_create(sim, &sev), SUBLET_OK);
    assert_int_equal(b->ops->event_query(b, sev, &done), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sim->ops->event_destroy(sim, sev), SUBLET_OK);
    sublet_backend_destroy(sim);
    assert_int_equal(b->ops->event_destroy(b, ev), SUBLET_OK);
    if (fake)
        assert_int_equal(fake_counter("fake_cuda_live_events"), 0);
    sublet_backend_destroy(b);
}

typedef struct thread_arg {
    sublet_backend *b;
    sublet_status st;
} thread_arg;

static void *other_thread(void *p)
{
    thread_arg *t = p;
    uint64_t a = 0, fr, tot;
    sublet_event *ev = NULL;
    t->st = t->b->ops->segment_alloc(t->b, 4 * MiB, 0, &a);
    if (t->st == SUBLET_OK)
        t->st = t->b->ops->segment_free(t->b, a, 4 * MiB);
    if (t->st == SUBLET_OK)
        t->st = t->b->ops->mem_info(t->b, &fr, &tot);
    if (t->st == SUBLET_OK)
        t->st = t->b->ops->event_create(t->b, &ev);
    if (t->st == SUBLET_OK)
        t->st = t->b->ops->event_record(t->b, ev, 0);
    if (ev)
        (void)t->b->ops->event_destroy(t->b, ev);
    return NULL;
}

static void test_thread_without_context(void **state)
{
    (void)state;
    NEED_DEVICE();
    /* A fresh thread has no current context: the backend makes its own
     * current for each call (the fake driver refuses calls without one). */
    thread_arg t = {.b = gpu()};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(t.st, SUBLET_OK);
    sublet_backend_destroy(t.b);
}

static void test_vmm(void **state)
{
    (void)state;
    NEED_DEVICE();
    sublet_backend *b = gpu();
    if (!sublet_cuda_has_vmm(b)) {
        assert_null(b->ops->va_map);
        sublet_backend_destroy(b);
        print_message("skipped: the device has no VMM support\n");
        skip();
    }
    const uint64_t g = sublet_cuda_granularity(b);
    assert_true(g >= 4096 && (g & (g - 1)) == 0);
    uint64_t base = 0;
    assert_int_equal(b->ops->va_reserve(b, 8 * g, 0, &base), SUBLET_OK);
    assert_true(base % g == 0);
    assert_int_equal(b->ops->va_map(b, base, 4 * g), SUBLET_OK);
    if (fake) {
        assert_int_equal(fake_counter("fake_cuda_live_mappings"), 4); /* one per page */
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 4);
    }
    /* Overlap, misalignment, outside the reservation: refused. */
    assert_int_equal(b->ops->va_map(b, base + 3 * g, 2 * g), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, base + 5 * g + 1, g), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, base + 7 * g, 2 * g), SUBLET_ERR_INVALID_ARGUMENT);
    /* Unmap a page in the middle of a mapped range (a sub-range of one map). */
    unsigned long long syncs = fake ? fake_counter("fake_cuda_syncs") : 0;
    assert_int_equal(b->ops->va_unmap(b, base + g, g), SUBLET_OK);
    if (fake)
        assert_true(fake_counter("fake_cuda_syncs") > syncs); /* synchronised first */
    assert_int_equal(b->ops->va_unmap(b, base + g, g), SUBLET_ERR_INVALID_ARGUMENT);
    /* Map it again, then unmap across the old boundaries. */
    assert_int_equal(b->ops->va_map(b, base + g, g), SUBLET_OK);
    assert_int_equal(b->ops->va_release(b, base, 8 * g), SUBLET_ERR_BUSY);
    assert_int_equal(b->ops->va_unmap(b, base, 3 * g), SUBLET_OK);
    assert_int_equal(b->ops->va_unmap(b, base + 3 * g, g), SUBLET_OK);
    if (fake) {
        assert_int_equal(fake_counter("fake_cuda_live_mappings"), 0);
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 0);
    }
    assert_int_equal(b->ops->va_release(b, base, 4 * g), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_release(b, base, 8 * g), SUBLET_OK);
    assert_int_equal(b->ops->va_release(b, base, 8 * g), SUBLET_ERR_INVALID_ARGUMENT);
    /* A size that is not a multiple of the granularity is rounded up. */
    assert_int_equal(b->ops->va_reserve(b, g + 1, 0, &base), SUBLET_OK);
    assert_int_equal(b->ops->va_map(b, base, 2 * g), SUBLET_OK);
    /* Destroy with a mapping still there: released quietly. */
    sublet_backend_destroy(b);
    if (fake)
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 0);
}

static void test_vmm_oom_undoes(void **state)
{
    (void)state;
    NEED_DEVICE();
    if (!fake) {
        print_message("skipped: needs the fake driver (an OOM in the middle of a map)\n");
        skip();
    }
    sublet_backend *b = gpu();
    if (!sublet_cuda_has_vmm(b)) {
        sublet_backend_destroy(b);
        skip();
    }
    const uint64_t g = sublet_cuda_granularity(b);
    uint64_t fr = 0, tot = 0;
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    uint64_t pages = fr / g;
    uint64_t base = 0;
    assert_int_equal(b->ops->va_reserve(b, (pages + 4) * g, 0, &base), SUBLET_OK);
    assert_int_equal(b->ops->va_map(b, base, (pages - 2) * g), SUBLET_OK);
    unsigned long long handles = fake_counter("fake_cuda_live_handles");
    /* 4 more pages do not fit: the 2 created in this call are given back. */
    assert_int_equal(b->ops->va_map(b, base + (pages - 2) * g, 4 * g), SUBLET_ERR_DEVICE_OOM);
    last_error_has(b, "CUDA_ERROR_OUT_OF_MEMORY");
    last_error_has(b, "cuMemCreate");
    assert_int_equal(fake_counter("fake_cuda_live_handles"), handles);
    assert_int_equal(b->ops->va_map(b, base + (pages - 2) * g, 2 * g), SUBLET_OK);
    assert_int_equal(b->ops->va_unmap(b, base, pages * g), SUBLET_OK);
    assert_int_equal(b->ops->va_release(b, base, (pages + 4) * g), SUBLET_OK);
    sublet_backend_destroy(b);
}

/* va_map_alias: the granules mapped at one address mapped a second time
 * (cuMemRetainAllocationHandle + cuMemMap); the memory stays while either
 * view maps it and goes with the last one. */
static void test_vmm_alias(void **state)
{
    (void)state;
    NEED_DEVICE();
    sublet_backend *b = gpu();
    if (!sublet_cuda_has_vmm(b)) {
        assert_null(b->ops->va_map);
        sublet_backend_destroy(b);
        skip();
    }
    assert_non_null(b->ops->va_map_alias);
    const uint64_t g = sublet_cuda_granularity(b);
    uint64_t base = 0, fr0 = 0, fr1 = 0, tot = 0;
    assert_int_equal(b->ops->va_reserve(b, 8 * g, 0, &base), SUBLET_OK);
    assert_int_equal(b->ops->va_map(b, base, 2 * g), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr0, &tot), SUBLET_OK);
    unsigned long long creates = fake ? fake_counter("fake_cuda_memcreates") : 0;
    assert_int_equal(b->ops->va_map_alias(b, base + 4 * g, base, 2 * g), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr1, &tot), SUBLET_OK);
    if (fake) {
        assert_int_equal(fr1, fr0); /* no new memory */
        assert_int_equal(fake_counter("fake_cuda_memcreates"), creates);
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 2);
        assert_int_equal(fake_counter("fake_cuda_live_mappings"), 4);
    }
    /* refused: a destination already mapped, a source not (all) mapped,
     * misaligned, outside a reservation */
    assert_int_equal(b->ops->va_map_alias(b, base + 4 * g, base, g), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map_alias(b, base + 6 * g, base + g, 2 * g),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map_alias(b, base + 6 * g + 1, base, g),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map_alias(b, base + 7 * g, base, 2 * g),
                     SUBLET_ERR_INVALID_ARGUMENT);
    /* the first view goes: the memory stays behind the second */
    assert_int_equal(b->ops->va_unmap(b, base, 2 * g), SUBLET_OK);
    if (fake) {
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 2);
        assert_int_equal(fake_counter("fake_cuda_live_mappings"), 2);
    }
    /* an alias of an alias, then both go */
    assert_int_equal(b->ops->va_map_alias(b, base, base + 5 * g, g), SUBLET_OK);
    assert_int_equal(b->ops->va_unmap(b, base + 4 * g, 2 * g), SUBLET_OK);
    assert_int_equal(b->ops->va_unmap(b, base, g), SUBLET_OK);
    if (fake) {
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 0);
        assert_int_equal(fake_counter("fake_cuda_live_mappings"), 0);
    }
    assert_int_equal(b->ops->va_release(b, base, 8 * g), SUBLET_OK);
    sublet_backend_destroy(b);
}

/* ---- an allocator on the GPU ---------------------------------------------------------------- */

static int64_t stat_of(sublet_allocator *a, const char *key)
{
    sublet_stats s;
    memset(&s, 0, sizeof s);
    sublet_stats_read(a, &s);
    int64_t v = 0;
    assert_int_equal(sublet_stats_lookup(&s, key, &v), 0);
    return v;
}

static void check(sublet_allocator *a)
{
    char msg[512];
    if (sublet_check(a, msg, sizeof msg) != SUBLET_OK)
        fail_msg("%s", msg);
}

static void test_allocator(void **state)
{
    (void)state;
    NEED_DEVICE();
    sublet_backend *b = gpu();
    sublet_options o = {.backend = b, .device = 0, .conf = ""};
    sublet_allocator *a = NULL;
    char err[256];
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_OK);
    void *p[6];
    static const uint64_t sizes[6] = {1, 512, 1 << 20, (1 << 20) + 1, 10 << 20, 30 << 20};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(sublet_malloc(a, sizes[i], 0, &p[i]), SUBLET_OK);
        assert_non_null(p[i]);
    }
    check(a);
    assert_true(stat_of(a, "num_device_alloc") >= 3);
    /* Cross-stream use: the free waits for an event on the other stream. */
    assert_int_equal(sublet_record_stream(a, p[4], 0x2), SUBLET_OK);
    for (int i = 0; i < 6; i++)
        assert_int_equal(sublet_free(a, p[i]), SUBLET_OK);
    for (int tries = 0; stat_of(a, "active_bytes.all.current") != 0 && tries < 1000; tries++)
        assert_int_equal(sublet_process_events(a), SUBLET_OK);
    assert_int_equal(stat_of(a, "active_bytes.all.current"), 0);
    check(a);
    assert_int_equal(sublet_empty_cache(a), SUBLET_OK);
    assert_int_equal(stat_of(a, "reserved_bytes.all.current"), 0);
    if (fake)
        assert_int_equal(fake_counter("fake_cuda_live_allocs"), 0);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(b);
    if (fake)
        assert_int_equal(fake_counter("fake_cuda_live_events"), 0);
}

static void test_allocator_expandable(void **state)
{
    (void)state;
    NEED_DEVICE();
    sublet_backend *b = gpu();
    if (!sublet_cuda_has_vmm(b)) {
        sublet_backend_destroy(b);
        skip();
    }
    sublet_options o = {.backend = b, .device = 0, .conf = "expandable_segments:True"};
    sublet_allocator *a = NULL;
    char err[256];
    sublet_status st = sublet_allocator_create(&o, &a, err, sizeof err);
    if (st != SUBLET_OK) {
        sublet_backend_destroy(b);
        print_message("skipped: expandable segments refused: %s\n", err);
        skip();
    }
    void *p = NULL, *q = NULL, *r = NULL;
    assert_int_equal(sublet_malloc(a, 30 << 20, 0, &p), SUBLET_OK);
    assert_int_equal(sublet_malloc(a, 50 << 20, 0, &q), SUBLET_OK);
    assert_int_equal(sublet_malloc(a, 4096, 0, &r), SUBLET_OK);
    check(a);
    assert_int_equal(sublet_free(a, p), SUBLET_OK);
    assert_int_equal(sublet_free(a, q), SUBLET_OK);
    assert_int_equal(sublet_free(a, r), SUBLET_OK);
    assert_int_equal(sublet_empty_cache(a), SUBLET_OK);
    check(a);
    assert_int_equal(stat_of(a, "reserved_bytes.all.current"), 0);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(b);
    if (fake) {
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 0);
        assert_int_equal(fake_counter("fake_cuda_live_mappings"), 0);
    }
}

/* policy:stitch on the driver: a device limited (memory fraction) to four
 * pages, all mapped and partly live; a 1.5 MiB request is stitched from the
 * free tail of one page and the free head of another (two alias maps, no
 * new memory); empty_cache gives everything back. */
static void test_allocator_stitch(void **state)
{
    (void)state;
    NEED_DEVICE();
    sublet_backend *b = gpu();
    if (!sublet_cuda_has_vmm(b) || sublet_cuda_granularity(b) != 2 * MiB) {
        sublet_backend_destroy(b);
        print_message("skipped: needs VMM with 2 MiB granules\n");
        skip();
    }
    uint64_t fr = 0, tot = 0;
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    char conf[96];
    snprintf(conf, sizeof conf, "policy:stitch,per_process_memory_fraction:%.9f",
             (double)(9 * MiB) / (double)tot);
    sublet_options o = {.backend = b, .device = 0, .conf = conf};
    sublet_allocator *a = NULL;
    char err[256];
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_OK);
    static const uint64_t sizes[5] = {1 * MiB, 1 * MiB, 2 * MiB, 1 * MiB, 3 * MiB};
    void *p[5], *q = NULL;
    for (int i = 0; i < 5; i++)
        assert_int_equal(sublet_malloc(a, sizes[i], 0, &p[i]), SUBLET_OK);
    assert_int_equal(sublet_free(a, p[1]), SUBLET_OK);
    assert_int_equal(sublet_free(a, p[3]), SUBLET_OK);
    check(a);
    assert_int_equal(stat_of(a, "reserved_bytes.all.current"), 8 * MiB);
    unsigned long long creates = fake ? fake_counter("fake_cuda_memcreates") : 0;
    assert_int_equal(sublet_malloc(a, 1536 << 10, 0, &q), SUBLET_OK);
    check(a);
    assert_int_equal(stat_of(a, "reserved_bytes.all.current"), 8 * MiB);
    assert_int_equal(stat_of(a, "num_ooms"), 0);
    if (fake) {
        assert_int_equal(fake_counter("fake_cuda_memcreates"), creates);
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 4);
        assert_int_equal(fake_counter("fake_cuda_live_mappings"), 6);
    }
    assert_int_equal(sublet_free(a, q), SUBLET_OK);
    assert_int_equal(sublet_free(a, p[0]), SUBLET_OK);
    assert_int_equal(sublet_free(a, p[2]), SUBLET_OK);
    assert_int_equal(sublet_free(a, p[4]), SUBLET_OK);
    assert_int_equal(sublet_empty_cache(a), SUBLET_OK);
    check(a);
    assert_int_equal(stat_of(a, "reserved_bytes.all.current"), 0);
    if (fake) {
        assert_int_equal(fake_counter("fake_cuda_live_handles"), 0);
        assert_int_equal(fake_counter("fake_cuda_live_mappings"), 0);
    }
    sublet_allocator_destroy(a);
    sublet_backend_destroy(b);
}

typedef struct worker {
    sublet_allocator *a;
    int failures;
} worker;

static void *work(void *p)
{
    worker *w = p;
    void *v[8];
    for (int it = 0; it < 200; it++) {
        for (int i = 0; i < 8; i++)
            if (sublet_malloc(w->a, (uint64_t)(i + 1) * 100000 + (uint64_t)it, 0, &v[i]) !=
                SUBLET_OK)
                v[i] = NULL, w->failures++;
        for (int i = 0; i < 8; i++)
            if (v[i] && sublet_free(w->a, v[i]) != SUBLET_OK)
                w->failures++;
    }
    return NULL;
}

static void test_allocator_threads(void **state)
{
    (void)state;
    NEED_DEVICE();
    sublet_backend *b = gpu();
    sublet_options o = {.backend = b, .device = 0, .conf = ""};
    sublet_allocator *a = NULL;
    assert_int_equal(sublet_allocator_create(&o, &a, NULL, 0), SUBLET_OK);
    worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){.a = a};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
    check(a);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(b);
}

int main(void)
{
    sublet_backend *probe = NULL;
    sublet_status st = sublet_cuda_create(0, &probe, why, sizeof why);
    have_device = st == SUBLET_OK;
    if (probe)
        sublet_backend_destroy(probe);
    const char *f = getenv("SUBLET_FAKE_CUDA");
    fake = have_device && f && strcmp(f, "1") == 0;
    if (!have_device) {
        const char *req = getenv("SUBLET_REQUIRE_GPU");
        if (st != SUBLET_ERR_UNSUPPORTED || (req && strcmp(req, "1") == 0)) {
            fprintf(stderr, "test_cuda_backend: no usable GPU: %s: %s\n", sublet_status_name(st),
                    why);
            return 1;
        }
        printf("test_cuda_backend: GPU tests skipped: %s\n", why);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_arguments),
        cmocka_unit_test(test_no_device_message),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_thread_without_context),
        cmocka_unit_test(test_vmm),
        cmocka_unit_test(test_vmm_oom_undoes),
        cmocka_unit_test(test_vmm_alias),
        cmocka_unit_test(test_allocator),
        cmocka_unit_test(test_allocator_expandable),
        cmocka_unit_test(test_allocator_stitch),
        cmocka_unit_test(test_allocator_threads),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (failed)
        return 1;
    return have_device ? 0 : 77;
}
