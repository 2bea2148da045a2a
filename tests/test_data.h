/* Where the tests find their inputs: tests/data (or $SUBLET_TESTDATA), and
 * the shared traces of $SUBLET_SHARED/traces when that folder is there (a
 * user's checkout has none: the tests that need it skip). */
#ifndef SUBLET_TEST_DATA_H
#define SUBLET_TEST_DATA_H

#include <stdio.h>
#include <stdlib.h>
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

#endif
