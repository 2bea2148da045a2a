/* sublet views — the tuning section of the report page (report_tune.c),
 * which report.c places in the page. */
#ifndef SL_VIEWS_REPORT_TUNE_H
#define SL_VIEWS_REPORT_TUNE_H

#include "sublet/tune.h"
#include "views/view_common.h"

/* The section's HTML: both answers with what they fix, the evidence table,
 * the Pareto trade-offs (a chart, canvas id "c-tune", and the tables) and the
 * warm-up plan.  o: the options the tuning ran with. */
void sl_report_tune_section(sl_text *b, const sublet_tune_result *r, const sublet_tune_options *o);
/* After the page's own script: the section's data and its chart's script
 * (it counts itself into data-rendered like the page's charts). */
void sl_report_tune_script(sl_text *b, const sublet_tune_result *r);

#endif
