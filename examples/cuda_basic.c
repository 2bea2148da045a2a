/* sublet example: allocate through sublet on a real GPU and print the
 * memory summary.
 *
 *   cuda_basic [DEVICE]
 *
 * Exit status 0 on success, 77 when there is no CUDA driver or device (the
 * message says which; 1 instead with SUBLET_REQUIRE_GPU=1), 1 on an error. */
#include <stdio.h>
#include <stdlib.h>

#include "sublet/backend_cuda.h"
#include "sublet/sublet.h"

int main(int argc, char **argv)
{
    int device = argc > 1 ? atoi(argv[1]) : 0;
    char err[512];
    sublet_backend *gpu = NULL;
    sublet_status st = sublet_cuda_create(device, &gpu, err, sizeof err);
    if (st == SUBLET_ERR_UNSUPPORTED) {
        const char *req = getenv("SUBLET_REQUIRE_GPU"); /* scripts/gpu-check */
        printf("cuda_basic: skipped: %s\n", err);
        return req && req[0] == '1' ? 1 : 77;
    }
    if (st != SUBLET_OK) {
        fprintf(stderr, "cuda_basic: %s: %s\n", sublet_status_name(st), err);
        return 1;
    }
    char name[128];
    sublet_cuda_device_name(gpu, name, sizeof name);
    printf("device %d: %s (driver %d, VMM %s)\n", device, name, sublet_cuda_driver_version(),
           sublet_cuda_has_vmm(gpu) ? "yes" : "no");

    /* conf "" = PyTorch's defaults; NULL would read PYTORCH_CUDA_ALLOC_CONF. */
    sublet_options o = {.backend = gpu, .device = device, .conf = ""};
    sublet_allocator *a = NULL;
    st = sublet_allocator_create(&o, &a, err, sizeof err);
    if (st != SUBLET_OK) {
        fprintf(stderr, "cuda_basic: allocator: %s\n", err);
        sublet_backend_destroy(gpu);
        return 1;
    }

    /* A few tensors' worth: small blocks share one 2 MiB segment, large
     * ones get 20 MiB segments or their own. */
    static const uint64_t sizes[] = {512, 4096, 1 << 20, 3 << 20, 25 << 20, 100 << 20};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    int rc = 0;
    for (int i = 0; i < N; i++) {
        st = sublet_malloc(a, sizes[i], 0, &p[i]);
        if (st != SUBLET_OK) {
            char msg[1024];
            sublet_oom_message(a, msg, sizeof msg);
            fprintf(stderr, "cuda_basic: malloc(%llu): %s %s\n", (unsigned long long)sizes[i],
                    sublet_status_name(st), msg);
            p[i] = NULL;
            rc = 1;
        }
    }
    /* Free half, then allocate again: the cache serves it without the driver. */
    for (int i = 0; i < N; i += 2)
        sublet_free(a, p[i]);
    void *again = NULL;
    if (sublet_malloc(a, 4096, 0, &again) == SUBLET_OK)
        sublet_free(a, again);
    for (int i = 1; i < N; i += 2)
        sublet_free(a, p[i]);

    static char summary[16384];
    sublet_summary(a, 0, summary, sizeof summary);
    fputs(summary, stdout);

    uint64_t fr = 0, tot = 0;
    if (gpu->ops->mem_info(gpu, &fr, &tot) == SUBLET_OK)
        printf("driver: %llu bytes free of %llu\n", (unsigned long long)fr,
               (unsigned long long)tot);

    char msg[512];
    if (sublet_check(a, msg, sizeof msg) != SUBLET_OK) {
        fprintf(stderr, "cuda_basic: invariant violated: %s\n", msg);
        rc = 1;
    }
    st = sublet_empty_cache(a);
    if (st != SUBLET_OK) {
        sublet_cuda_last_error(gpu, msg, sizeof msg);
        fprintf(stderr, "cuda_basic: empty_cache: %s (%s)\n", sublet_status_name(st), msg);
        rc = 1;
    }
    sublet_allocator_destroy(a);
    sublet_backend_destroy(gpu);
    return rc;
}
