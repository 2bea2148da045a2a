/* sublet — backend helpers shared by every backend. */
#include <stddef.h>

#include "sublet/backend.h"

void sublet_backend_destroy(sublet_backend *b)
{
    if (b && b->ops && b->ops->destroy)
        b->ops->destroy(b);
}
