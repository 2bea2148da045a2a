/* sublet — the block slab: sl_block records in chunks, 64-byte aligned, with
 * a free list.  See slab.h. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define SLAB_CHUNK 512

sl_block *sl_block_new(sl_slab *s)
{
    if (!s->free_list) {
        if (s->nchunks == s->chunks_cap) {
            size_t nc = s->chunks_cap ? s->chunks_cap * 2 : 16;
            void **c = realloc(s->chunks, nc * sizeof *c);
            if (!c)
                return NULL;
            s->chunks = c;
            s->chunks_cap = nc;
        }
        sl_block *chunk = aligned_alloc(_Alignof(sl_block), SLAB_CHUNK * sizeof *chunk);
        if (!chunk)
            return NULL;
        s->chunks[s->nchunks++] = chunk;
        /* pushed in reverse, so blocks are handed out in address order */
        for (size_t i = SLAB_CHUNK; i-- > 0;) {
            chunk[i].next = s->free_list;
            s->free_list = &chunk[i];
        }
    }
    sl_block *b = s->free_list;
    s->free_list = b->next;
    /* Field by field, not memset: gcc's generic tuning zeroed the block
     * (192 bytes then) with `rep stos`, whose start-up showed in a replay's
     * profile (perf: ~80 % of this function's time).  A new field needs its line
     * here; the assertion below is the reminder. */
    b->addr = b->size = 0;
    b->parent = b->left = b->right = NULL;
    b->red = b->allocated = b->in_free = b->shadow = b->oversize = false;
    b->mapped = true;
    b->event_count = 0;
    b->stream = 0;
    b->prev = b->next = NULL;
    b->seg = NULL;
    b->pool = NULL;
    b->requested = b->gc_count_base = 0;
    b->stack = 0;
    b->nuses = 0;
    b->uses_cap = 1;
    b->use1 = 0;
    return b;
}
#if UINTPTR_MAX == UINT64_MAX
/* (use1 stays the last field, engine.h: a field added before it moves it) */
_Static_assert(offsetof(sl_block, use1) == 120 && sizeof(sl_block) == 128,
               "sl_block changed: sl_block_new sets every field");
#endif

void sl_block_delete(sl_slab *s, sl_block *b)
{
    sl_uses_free(b);
    b->next = s->free_list;
    s->free_list = b;
}

void sl_slab_fini(sl_slab *s)
{
    for (size_t i = 0; i < s->nchunks; i++)
        free(s->chunks[i]);
    free(s->chunks);
    memset(s, 0, sizeof *s);
}
