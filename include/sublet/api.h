/* sublet — SUBLET_API, the mark of every public function.  libsublet.so is
 * built with hidden visibility (-fvisibility=hidden): a function is exported
 * only when its declaration in include/sublet/ carries this mark, so the
 * library's internal functions (sl_*, pv_*, tn_*, ...) stay inside it.
 * tests/cli_exports.sh checks that the exports are exactly the functions
 * declared here. */
#ifndef SUBLET_API_H
#define SUBLET_API_H

#if defined(__GNUC__) || defined(__clang__)
#define SUBLET_API __attribute__((visibility("default")))
#else
#define SUBLET_API
#endif

#endif
