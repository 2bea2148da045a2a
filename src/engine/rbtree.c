/* sublet — red-black trees threaded through the blocks: insertion, removal
 * and the in-order steps.  See rbtree.h. */
#include "engine/rbtree.h"

static void rot_right(sl_block **root, sl_block *n)
{
    sl_block *l = n->left;
    sl_rb_replace_child(root, n->parent, n, l);
    n->left = l->right;
    if (n->left)
        n->left->parent = n;
    l->right = n;
    n->parent = l;
}

static void rot_left(sl_block **root, sl_block *n)
{
    sl_block *r = n->right;
    sl_rb_replace_child(root, n->parent, n, r);
    n->right = r->left;
    if (n->right)
        n->right->parent = n;
    r->left = n;
    n->parent = r;
}

/* Hang the red leaf b at *link under parent, then restore the colours: a
 * red parent with a red uncle is recoloured and the walk goes up two levels;
 * otherwise at most two rotations end it.  Amortised O(1) per insert, also
 * when inserts and removals alternate at the same place (an AVL tree then
 * climbs to the root every time: the split and merge of a cached pair did
 * exactly that). */
static void attach(sl_block **root, sl_block *parent, sl_block **link, sl_block *b)
{
    *link = b;
    b->parent = parent;
    b->left = b->right = NULL;
    b->red = true;
    sl_block *p;
    while ((p = b->parent) && p->red) {
        sl_block *g = p->parent; /* a red node is never the root */
        if (p == g->left) {
            sl_block *u = g->right;
            if (sl_rb_is_red(u)) {
                p->red = u->red = false;
                g->red = true;
                b = g;
                continue;
            }
            if (b == p->right) {
                rot_left(root, p);
                p = b;
            }
            p->red = false;
            g->red = true;
            rot_right(root, g);
        } else {
            sl_block *u = g->left;
            if (sl_rb_is_red(u)) {
                p->red = u->red = false;
                g->red = true;
                b = g;
                continue;
            }
            if (b == p->left) {
                rot_right(root, p);
                p = b;
            }
            p->red = false;
            g->red = true;
            rot_left(root, g);
        }
        break;
    }
    (*root)->red = false;
}

sl_block *sl_rb_insert(sl_block **root, sl_block *b)
{
    sl_block *parent = NULL, *pred = NULL, **link = root;
    while (*link) {
        parent = *link;
        bool right = !sl_rb_less(b, parent);
        pred = right ? parent : pred;
        link = &parent->kid[right];
    }
    attach(root, parent, link, b);
    return pred;
}

void sl_rb_insert_before(sl_block **root, sl_block *m, sl_block *b)
{
    sl_block *parent = m, **link = &m->left;
    while (*link) {
        parent = *link;
        link = &parent->right;
    }
    attach(root, parent, link, b);
}

/* After a black node left the subtree of `parent` on x's side (x may be
 * NULL): that side is one black short.  Recolouring moves the deficit up;
 * at most three rotations end it. */
static void remove_fixup(sl_block **root, sl_block *x, sl_block *parent)
{
    while (parent && !sl_rb_is_red(x)) {
        if (x == parent->left) {
            sl_block *w = parent->right; /* not NULL: that side has a black more */
            if (w->red) {
                w->red = false;
                parent->red = true;
                rot_left(root, parent);
                w = parent->right;
            }
            if (!sl_rb_is_red(w->left) && !sl_rb_is_red(w->right)) {
                w->red = true;
                x = parent;
                parent = x->parent;
                continue;
            }
            if (!sl_rb_is_red(w->right)) {
                w->left->red = false;
                w->red = true;
                rot_right(root, w);
                w = parent->right;
            }
            w->red = parent->red;
            parent->red = false;
            w->right->red = false;
            rot_left(root, parent);
        } else {
            sl_block *w = parent->left;
            if (w->red) {
                w->red = false;
                parent->red = true;
                rot_right(root, parent);
                w = parent->left;
            }
            if (!sl_rb_is_red(w->left) && !sl_rb_is_red(w->right)) {
                w->red = true;
                x = parent;
                parent = x->parent;
                continue;
            }
            if (!sl_rb_is_red(w->left)) {
                w->right->red = false;
                w->red = true;
                rot_left(root, w);
                w = parent->left;
            }
            w->red = parent->red;
            parent->red = false;
            w->left->red = false;
            rot_right(root, parent);
        }
        x = *root;
        break;
    }
    if (x)
        x->red = false;
}

void sl_rb_remove(sl_block **root, sl_block *b)
{
    sl_block *child, *parent;
    bool removed_red;
    if (b->left && b->right) {
        /* the successor s takes b's place and colour; s's old place loses
         * s's colour */
        sl_block *s = b->right;
        while (s->left)
            s = s->left;
        child = s->right;
        removed_red = s->red;
        if (s->parent == b) {
            parent = s;
        } else {
            parent = s->parent;
            parent->left = child;
            if (child)
                child->parent = parent;
            s->right = b->right;
            s->right->parent = s;
        }
        s->left = b->left;
        s->left->parent = s;
        s->red = b->red;
        sl_rb_replace_child(root, b->parent, b, s);
    } else {
        child = b->left ? b->left : b->right;
        parent = b->parent;
        removed_red = b->red;
        sl_rb_replace_child(root, parent, b, child);
    }
    b->parent = b->left = b->right = NULL;
    if (!removed_red)
        remove_fixup(root, child, parent);
}

sl_block *sl_rb_next(sl_block *n)
{
    if (n->right) {
        for (n = n->right; n->left;)
            n = n->left;
        return n;
    }
    while (n->parent && n->parent->right == n)
        n = n->parent;
    return n->parent;
}

sl_block *sl_rb_prev(sl_block *n)
{
    if (n->left) {
        for (n = n->left; n->right;)
            n = n->right;
        return n;
    }
    while (n->parent && n->parent->left == n)
        n = n->parent;
    return n->parent;
}
