/* sublet — status names. */
#include "sublet/error.h"

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
