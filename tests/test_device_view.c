/* The device view (sublet_device_view_read): what the driver sees beside
 * what the allocator holds, in the summary (SUBLET_SUMMARY_DEVICE) and as
 * flat keys.  A test backend wraps the sim and plays the driver of a shared
 * device: other processes hold `foreign` bytes, this process holds
 * `context` bytes outside the allocator (its CUDA context), and it may or
 * may not be able to tell this process's share (process_mem). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/forward.h"
#include "support/harness.h"

typedef struct shared_dev {
    h_fwd fwd; /* first: forwards to the sim */
    sublet_backend *sim;
    uint64_t foreign; /* other processes */
    uint64_t context; /* this process, outside the allocator */
    int knows_process;
    int mem_info_fails;
} shared_dev;

/* The driver's free memory: the sim's, less what the others and the context hold. */
static sublet_status sd_mem_info(sublet_backend *b, uint64_t *fr, uint64_t *tot)
{
    shared_dev *d = (shared_dev *)b;
    if (d->mem_info_fails)
        return SUBLET_ERR_BACKEND;
    sublet_status st = d->sim->ops->mem_info(d->sim, fr, tot);
    uint64_t held = d->foreign + d->context;
    *fr = *fr > held ? *fr - held : 0;
    return st;
}
static sublet_status sd_process_mem(sublet_backend *b, uint64_t *used)
{
    shared_dev *d = (shared_dev *)b;
    if (!d->knows_process)
        return SUBLET_ERR_UNSUPPORTED;
    *used = sublet_sim_used(d->sim) + d->context;
    return SUBLET_OK;
}
static void sd_init(shared_dev *d, uint64_t capacity)
{
    memset(d, 0, sizeof *d);
    assert_int_equal(sublet_sim_create(capacity, &d->sim), SUBLET_OK);
    /* the sim's segments and events, no event epoch and no VMM: a plain driver */
    h_fwd_init(&d->fwd, d->sim, "shared");
    d->fwd.ops.event_epoch = NULL;
    d->fwd.ops.event_completions = NULL;
    d->fwd.ops.va_reserve = NULL;
    d->fwd.ops.va_release = NULL;
    d->fwd.ops.va_map = NULL;
    d->fwd.ops.va_unmap = NULL;
    d->fwd.ops.va_map_alias = NULL;
    d->fwd.ops.mem_info = sd_mem_info;
    d->fwd.ops.process_mem = sd_process_mem;
    d->knows_process = 1;
}

static sublet_allocator *sd_allocator(shared_dev *d)
{
    sublet_options o = {.backend = &d->fwd.base, .device = 3, .conf = ""};
    sublet_allocator *a = NULL;
    assert_int_equal(sublet_allocator_create(&o, &a, NULL, 0), SUBLET_OK);
    return a;
}

static void sd_fini(shared_dev *d, sublet_allocator *a)
{
    CHECK(a);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(d->sim);
}

/* Every figure, by hand: 1 GiB device, 100 MiB of other processes, 300 MiB
 * of this process's context, the allocator holding a 20 MiB and a 2 MiB
 * segment with 9 MiB + 1 KiB live. */
static void test_figures_on_a_shared_device(void **state)
{
    (void)state;
    shared_dev d;
    sd_init(&d, 1 * GiB);
    d.foreign = 100 * MiB;
    d.context = 300 * MiB;
    sublet_allocator *a = sd_allocator(&d);
    void *big = h_malloc(a, 9 * MiB, 0);
    void *small = h_malloc(a, 1000, 0);
    sublet_device_view v;
    assert_int_equal(sublet_device_view_read(a, &v), SUBLET_OK);
    uint64_t reserved = 22 * MiB, active = 9 * MiB + 1024;
    assert_int_equal(v.total_bytes, 1 * GiB);
    assert_int_equal(v.free_bytes, 1 * GiB - reserved - 400 * MiB);
    assert_int_equal(v.used_bytes, reserved + 400 * MiB);
    assert_int_equal(v.reserved_bytes, reserved);
    assert_int_equal(v.cached_bytes, reserved - active);
    assert_int_equal(v.outside_bytes, 400 * MiB);
    assert_true(v.has_process);
    assert_int_equal(v.process_bytes, reserved + 300 * MiB);
    assert_int_equal(v.process_other_bytes, 300 * MiB);
    assert_int_equal(v.others_bytes, 100 * MiB);
    assert_string_equal(v.name, "shared backend");

    /* flat keys: one per figure, the values above */
    char flat[1024];
    size_t n = sublet_device_view_format_flat(&v, flat, sizeof flat);
    assert_int_equal(n, strlen(flat));
    assert_int_equal(sublet_device_view_format_flat(&v, NULL, 0), n);
    char want[128];
    snprintf(want, sizeof want, "device_others_bytes %llu\n", (unsigned long long)(100 * MiB));
    assert_non_null(strstr(flat, want));
    snprintf(want, sizeof want, "device_cached_bytes %llu\n",
             (unsigned long long)(reserved - active));
    assert_non_null(strstr(flat, want));
    int lines = 0;
    for (const char *p = flat; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 9);

    /* the summary: PyTorch's table, then the device view, on request only */
    size_t plain = sublet_summary(a, 0, NULL, 0);
    size_t with = sublet_summary(a, SUBLET_SUMMARY_DEVICE, NULL, 0);
    assert_true(with > plain);
    char *text = malloc(with + 1);
    assert_non_null(text);
    assert_int_equal(sublet_summary(a, SUBLET_SUMMARY_DEVICE, text, with + 1), with);
    assert_non_null(strstr(text, "PyTorch CUDA memory summary, device ID 3"));
    const char *view = strstr(text, "Device view (driver), device 3 (shared backend):");
    assert_non_null(view);
    assert_non_null(strstr(view, "used by other processes:"));
    assert_non_null(strstr(view, "100.00 MiB"));
    assert_non_null(strstr(view, "reserved by sublet:"));
    assert_non_null(strstr(view, "22.00 MiB"));
    assert_null(strstr(view, "not known to the backend"));
    free(text);
    /* a truncated buffer gets a terminated prefix and the full length */
    char cut[64];
    assert_int_equal(sublet_summary(a, SUBLET_SUMMARY_DEVICE, cut, sizeof cut), with);
    assert_int_equal(strlen(cut), sizeof cut - 1);

    h_free(a, big);
    h_free(a, small);
    h_empty_cache(a);
    assert_int_equal(sublet_device_view_read(a, &v), SUBLET_OK);
    assert_int_equal(v.reserved_bytes, 0);
    assert_int_equal(v.cached_bytes, 0);
    assert_int_equal(v.process_bytes, 300 * MiB);
    assert_int_equal(v.used_bytes, 400 * MiB);
    sd_fini(&d, a);
}

/* A backend that cannot tell this process's share: the three per-process
 * figures are absent, outside_bytes is the only figure for the rest. */
static void test_without_the_process_share(void **state)
{
    (void)state;
    shared_dev d;
    sd_init(&d, 1 * GiB);
    d.foreign = 64 * MiB;
    d.knows_process = 0;
    sublet_allocator *a = sd_allocator(&d);
    void *p = h_malloc(a, 4 * MiB, 0);
    sublet_device_view v;
    assert_int_equal(sublet_device_view_read(a, &v), SUBLET_OK);
    assert_false(v.has_process);
    assert_int_equal(v.process_bytes, 0);
    assert_int_equal(v.others_bytes, 0);
    assert_int_equal(v.outside_bytes, 64 * MiB);
    char flat[1024];
    sublet_device_view_format_flat(&v, flat, sizeof flat);
    assert_null(strstr(flat, "device_process_bytes"));
    assert_null(strstr(flat, "device_others_bytes"));
    assert_non_null(strstr(flat, "device_outside_bytes"));
    char text[2048];
    sublet_device_view_format_text(&v, 0, text, sizeof text);
    assert_non_null(strstr(text, "not known to the backend"));
    assert_null(strstr(text, "used by other processes"));
    h_free(a, p);
    sd_fini(&d, a);
}

/* No memory information: an error, a zeroed view, and a summary without
 * the section (nothing else changes). */
static void test_backend_errors(void **state)
{
    (void)state;
    shared_dev d;
    sd_init(&d, 256 * MiB);
    sublet_allocator *a = sd_allocator(&d);
    d.mem_info_fails = 1;
    sublet_device_view v;
    memset(&v, 0xab, sizeof v);
    assert_int_equal(sublet_device_view_read(a, &v), SUBLET_ERR_BACKEND);
    assert_int_equal(v.total_bytes, 0);
    assert_int_equal(v.name[0], '\0');
    assert_int_equal(sublet_summary(a, SUBLET_SUMMARY_DEVICE, NULL, 0),
                     sublet_summary(a, 0, NULL, 0));
    d.mem_info_fails = 0;
    d.fwd.ops.mem_info = NULL;
    assert_int_equal(sublet_device_view_read(a, &v), SUBLET_ERR_UNSUPPORTED);
    d.fwd.ops.mem_info = sd_mem_info;
    assert_int_equal(sublet_device_view_read(NULL, &v), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_device_view_read(a, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    sd_fini(&d, a);
}

/* The stock backends: the sim and host are the process's alone, the fault
 * wrapper forwards. */
static void test_stock_backends(void **state)
{
    (void)state;
    const int kinds[] = {H_SIM, H_HOST, H_SIM_FAULT};
    const char *names[] = {"sim backend", "host backend", "fault backend"};
    for (size_t k = 0; k < 3; k++) {
        h_env e;
        h_env_init(&e, kinds[k], 64 * MiB, "");
        void *p = h_malloc(e.a, 3 * MiB, 0);
        sublet_device_view v;
        assert_int_equal(sublet_device_view_read(e.a, &v), SUBLET_OK);
        assert_string_equal(v.name, names[k]);
        assert_int_equal(v.total_bytes, 64 * MiB);
        assert_int_equal(v.reserved_bytes, 20 * MiB);
        assert_int_equal(v.used_bytes, 20 * MiB);
        assert_true(v.has_process);
        assert_int_equal(v.process_bytes, 20 * MiB);
        assert_int_equal(v.process_other_bytes, 0);
        assert_int_equal(v.others_bytes, 0);
        assert_int_equal(v.outside_bytes, 0);
        assert_int_equal(v.cached_bytes, 20 * MiB - 3 * MiB);
        h_free(e.a, p);
        h_env_fini(&e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures_on_a_shared_device),
        cmocka_unit_test(test_without_the_process_share),
        cmocka_unit_test(test_backend_errors),
        cmocka_unit_test(test_stock_backends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
