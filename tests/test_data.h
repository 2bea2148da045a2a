/* Where the tests find their inputs: tests/data (or $SUBLET_TESTDATA), and
 * the shared traces of $SUBLET_SHARED/traces when that folder is there (a
 * user's checkout has none: the tests that need it skip). */
#ifndef SUBLET_TEST_DATA_H
#define SUBLET_TEST_DATA_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static inline const char *testdata_dir(void)
{
    const char *d = getenv("SUBLET_TESTDATA");
    return (d && *d) ? d : "tests/data";
}

/* $SUBLET_SHARED/traces/<sub> when it is a folder, else NULL.  The answer
 * lives in a static buffer until the next call. */
static inline const char *shared_dir(const char *sub)
{
    static char path[2048]; /* shorter than the callers' buffers for dir/name */
    const char *d = getenv("SUBLET_SHARED");
    if (!d || !*d)
        return NULL;
    snprintf(path, sizeof path, "%s/traces/%s", d, sub);
    struct stat sb;
    return (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) ? path : NULL;
}

static inline const char *shared_traces_dir(void) { return shared_dir("pytorch_snapshot"); }

static inline int test_data_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir ending in one of the nsufs suffixes, sorted, at most cap
 * of them, into names (each malloc'd: the caller frees them); how many.
 * 0 when dir cannot be opened. */
static inline size_t list_dir(const char *dir, const char *const *sufs, size_t nsufs,
                              char **names, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    for (struct dirent *de; n < cap && (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        for (size_t k = 0; k < nsufs; k++) {
            size_t sl = strlen(sufs[k]);
            if (len > sl && strcmp(de->d_name + len - sl, sufs[k]) == 0) {
                if ((names[n] = strdup(de->d_name)) != NULL)
                    n++;
                break;
            }
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, test_data_cmp_str);
    return n;
}

#endif
