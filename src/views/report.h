/* sublet views — the pieces of the report page (report.c) that its sections in
 * other files share: the page's text buffer and its escapes, and the tuning
 * section (report_tune.c). */
#ifndef SL_VIEWS_REPORT_H
#define SL_VIEWS_REPORT_H

#include <stddef.h>

#include "sublet/tune.h"

/* A growable text buffer; oom is set (and further output dropped) when
 * growing fails. */
typedef struct sl_tbuf {
    char *p;
    size_t n, cap;
    int oom;
} sl_tbuf;

void sl_tb_putn(sl_tbuf *b, const char *s, size_t n);
void sl_tb_puts(sl_tbuf *b, const char *s);
void sl_tb_printf(sl_tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal that is also safe inside <script>. */
void sl_tb_json(sl_tbuf *b, const char *s);
/* HTML text, escaped. */
void sl_tb_html(sl_tbuf *b, const char *s);

/* ---- the tuning section (report_tune.c) ---------------------------------------------------- */
/* The section's HTML: both answers with what they fix, the evidence table,
 * the Pareto trade-offs (a chart, canvas id "c-tune", and the tables) and the
 * warm-up plan.  o: the options the tuning ran with. */
void sl_report_tune_section(sl_tbuf *b, const sublet_tune_result *r, const sublet_tune_options *o);
/* After the page's own script: the section's data and its chart's script
 * (it counts itself into data-rendered like the page's charts). */
void sl_report_tune_script(sl_tbuf *b, const sublet_tune_result *r);

#endif
