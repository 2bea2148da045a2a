/* sublet CLI — the pieces of `sublet report` (report.c) that its sections in
 * other files share: the page's text buffer and its escapes, and the tuning
 * section (report_tune.c). */
#ifndef SUBLET_REPORT_H
#define SUBLET_REPORT_H

#include <stddef.h>

#include "sublet/tune.h"

/* A growable text buffer; oom is set (and further output dropped) when
 * growing fails. */
typedef struct tbuf {
    char *p;
    size_t n, cap;
    int oom;
} tbuf;

void tb_putn(tbuf *b, const char *s, size_t n);
void tb_puts(tbuf *b, const char *s);
void tb_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal that is also safe inside <script>. */
void tb_json(tbuf *b, const char *s);
/* HTML text, escaped. */
void tb_html(tbuf *b, const char *s);

/* ---- the tuning section (report_tune.c) ---------------------------------------------------- */
/* The section's HTML: both answers with what they fix, the evidence table,
 * the Pareto trade-offs (a chart, canvas id "c-tune", and the tables) and the
 * warm-up plan.  o: the options the tuning ran with. */
void report_tune_section(tbuf *b, const sublet_tune_result *r, const sublet_tune_options *o);
/* After the page's own script: the section's data and its chart's script
 * (it counts itself into data-rendered like the page's charts). */
void report_tune_script(tbuf *b, const sublet_tune_result *r);

#endif
