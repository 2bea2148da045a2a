/* sublet CLI — helpers the subcommands share: reading inputs of any format,
 * option parsing, and replaying a trace with recording on to get the
 * replayed allocator's snapshot. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sublet/history.h"

void cli_trace_free(sublet_trace *t)
{
    if (!t)
        return;
    sublet_trace_extras_release(t);
    sublet_trace_free(t);
}

int cli_parse_prelude(const char *s, int *mode)
{
    if (!s)
        return -1;
    if (strcmp(s, "auto") == 0)
        *mode = SUBLET_PRELUDE_AUTO;
    else if (strcmp(s, "adopt") == 0)
        *mode = SUBLET_PRELUDE_ADOPT;
    else if (strcmp(s, "allocate") == 0)
        *mode = SUBLET_PRELUDE_ALLOCATE;
    else
        return -1;
    return 0;
}

int cli_parse_index(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - 1 - d) / 10) /* UINT64_MAX means "all" */
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *matched)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    *matched = 0;
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=') {
        *matched = 1;
        return a + n + 1;
    }
    if (a[n] != '\0')
        return NULL;
    *matched = 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

/* ---- replay with recording ------------------------------------------------------------ */

typedef struct snap_ctx {
    sublet_snapshot *snap;
    sublet_status st;
    uint64_t dropped;
} snap_ctx;

static void take_at_finish(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st)
{
    (void)last_event;
    (void)st;
    snap_ctx *c = user;
    if (!a) {
        c->st = SUBLET_ERR_INVALID_ARGUMENT;
        return;
    }
    c->dropped = sublet_history_dropped(a);
    c->st = sublet_snapshot_take(a, &c->snap);
}

void cli_record_options(const sublet_trace *t, sublet_replay_options *o)
{
    o->record = SUBLET_RECORD_ALL;
    /* PyTorch's default context "all" when the trace has stacks to give */
    o->record_context = sublet_trace_stack_count(t) ? SUBLET_CONTEXT_ALL : SUBLET_CONTEXT_NONE;
    /* room for every event: nothing falls out of the ring buffer */
    size_t n = sublet_trace_count(t);
    o->record_max_entries = n + n / 4 + 1024;
    /* an allocated prelude is the engine's own doing: keep it, so that the
     * snapshot's trace runs from an empty allocator and replays soundly */
    o->record_prelude = 1;
}

sublet_status cli_replay_snapshot(const sublet_trace *t, sublet_replay_options *o,
                                  sublet_replay_result *r, sublet_snapshot **snap, char *err,
                                  size_t cap)
{
    *snap = NULL;
    snap_ctx c = {NULL, SUBLET_OK, 0};
    cli_record_options(t, o);
    o->on_finish = take_at_finish;
    o->finish_user = &c;
    sublet_status st = sublet_replay_run(t, o, r, err, cap);
    o->on_finish = NULL;
    o->finish_user = NULL;
    if (c.st != SUBLET_OK) {
        if (st == SUBLET_OK)
            snprintf(err, cap, "cannot take the snapshot: %s", sublet_status_text(c.st));
        sublet_snapshot_free(c.snap);
        return st != SUBLET_OK ? st : c.st;
    }
    *snap = c.snap;
    return st;
}
