/* sublet — error messages into a caller's buffer (internal).
 *
 * Every API that reports a reason takes (char *err, size_t err_cap); these
 * two write it with snprintf semantics and do nothing for a NULL or empty
 * buffer, so no caller has to check. */
#ifndef SUBLET_ERRMSG_H
#define SUBLET_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>

#include "sublet/error.h"

#if defined(__GNUC__)
#define SL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SL_PRINTF(f, a)
#endif

/* Write the message. */
void sl_vmsg(char *err, size_t cap, const char *fmt, va_list ap) SL_PRINTF(3, 0);
void sl_msg(char *err, size_t cap, const char *fmt, ...) SL_PRINTF(3, 4);
/* Write the message and return st: `return sl_fail(err, cap, SUBLET_ERR_X, ...);`. */
sublet_status sl_fail(char *err, size_t cap, sublet_status st, const char *fmt, ...)
    SL_PRINTF(4, 5);

#endif
