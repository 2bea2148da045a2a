/* sublet — status names, and the messages every reporting call writes. */
#include "sublet/error.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/errmsg.h"

void sl_vmsg(char *err, size_t cap, const char *fmt, va_list ap)
{
    if (err && cap)
        vsnprintf(err, cap, fmt, ap);
}

void sl_msg(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_vmsg(err, cap, fmt, ap);
    va_end(ap);
}

sublet_status sl_fail(char *err, size_t cap, sublet_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_vmsg(err, cap, fmt, ap);
    va_end(ap);
    return st;
}

const char *sublet_status_name(sublet_status s)
{
    switch (s) {
#define SUBLET_X_NAME(name, value, text) \
    case name:                           \
        return #name;
        SUBLET_STATUS_LIST(SUBLET_X_NAME)
#undef SUBLET_X_NAME
    }
    return "SUBLET_ERR_UNKNOWN";
}

const char *sublet_status_text(sublet_status s)
{
    switch (s) {
#define SUBLET_X_TEXT(name, value, text) \
    case name:                           \
        return text;
        SUBLET_STATUS_LIST(SUBLET_X_TEXT)
#undef SUBLET_X_TEXT
    }
    return "unknown status";
}
