/* sublet views — the ground every view stands on (view_common.c, not
 * public): the document being written, as a FILE* into memory or a growable
 * text buffer; the checks every entry point starts with; the OOMs a replay
 * reported; the number formats of the texts.  It depends on no other file of
 * the views. */
#ifndef SL_VIEWS_COMMON_H
#define SL_VIEWS_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/text.h"
#include "sublet/views.h"

/* A document written through a FILE* into memory (open_memstream). */
typedef struct sl_doc {
    FILE *f;
    char *p;
    size_t n;
} sl_doc;

/* The entry points of the documents: *out = NULL and err emptied, then
 * SUBLET_ERR_INVALID_ARGUMENT when out, the source (a trace or a stream), o
 * or v is NULL. */
sublet_status sl_view_begin(const void *src, const void *o, const void *v, char **out, char *err,
                            size_t cap);
/* The same for a whole-trace entry point (sublet_frag_json and the like,
 * each its _stream form over the trace), which then opens the trace as a
 * stream, *ts, which the caller closes (SUBLET_ERR_NO_MEMORY if it cannot). */
sublet_status sl_view_trace_open(const sublet_trace *t, const void *o, const void *v, char **out,
                                 char *err, size_t cap, sublet_trace_stream **ts);

/* Open: SUBLET_OK or SUBLET_ERR_NO_MEMORY. */
sublet_status sl_doc_open(sl_doc *d);
/* Close; the text in *out (NULL when it failed: SUBLET_ERR_NO_MEMORY). */
sublet_status sl_doc_close(sl_doc *d, char **out);

/* The page's text goes into the one text buffer of the layers (base/text.h,
 * growable); these two write escaped text into it. */
/* A JSON string literal that is also safe inside <script>. */
void sl_tb_json(sl_text *b, const char *s);
/* HTML text, escaped. */
void sl_tb_html(sl_text *b, const char *s);

/* The OOMs a replay reported (its on_oom), in order, with their messages
 * copied: `sublet replay`'s text and the replay document list them.  A
 * message that cannot be kept sets nomem (and is left out). */
typedef struct sl_oom_rec {
    uint64_t event, line, size;
    sublet_stream stream;
    char *message;
} sl_oom_rec;
typedef struct sl_oom_list {
    sl_oom_rec *v;
    size_t n, cap;
    int nomem;
} sl_oom_list;
void sl_oom_list_push(sl_oom_list *l, uint64_t event, uint64_t line, uint64_t size,
                      sublet_stream stream, const char *message);
void sl_oom_list_free(sl_oom_list *l);

/* n bytes as MiB, exact when whole ("6 MiB", else "6.5 MiB"); returns buf. */
const char *sl_fmt_mib(uint64_t n, char *buf, size_t cap);
/* A modelled cost in microseconds as "12 \xc2\xb5s", "3.4 ms" or "1.25 s"; returns buf. */
const char *sl_fmt_us(double us, char *buf, size_t cap);

#endif
