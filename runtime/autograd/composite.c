/*
 * composite.c - ops built from other ops whose history is one node of
 * their own rather than their pieces' (PyTorch's SplitBackward0): they
 * run the pieces with grad mode off, then record a custom node. Here, in
 * autograd, because they need it; the ops of ops_api.c do not.
 */
#include <string.h>

#include "ember/alloc.h"
#include "ember/autograd.h"
#include "ember/ops.h"

/* split's one autograd node (PyTorch's SplitBackward0): the pieces'
 * gradients side by side, one cat, where a node per slice would put each
 * into zeros of the whole and sum them. */
static em_status split_backward(void *ctx, em_tensor *const *gout, int n_out, em_tensor **gin, int n_in,
                                const bool *needs) {
    (void)n_in;
    if (!needs[0]) return EM_OK;
    gin[0] = em_cat(gout, n_out, *(const int64_t *)ctx);
    return gin[0] ? EM_OK : em_last_status();
}

em_status em_split(em_tensor *a, int64_t dim, const int64_t *sizes, int n, bool with_sizes, em_tensor **out) {
    int d;
    if (!a || em_wrap_dim("split", dim, a->ndim, &d) != EM_OK) return em_last_status();
    if (n < 1) return em_error(EM_ERR_VALUE, "split: expected at least one piece");
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) return em_error(EM_ERR_VALUE, "split: piece %d has a negative size %lld", i, (long long)sizes[i]);
        total += sizes[i];
    }
    if (total != a->shape[d])
        return em_error(EM_ERR_VALUE, "split: sections summing to %lld do not cover dim %d of size %lld",
                        (long long)total, d, (long long)a->shape[d]);
    bool grad = em_grad_enabled() && em_requires_grad(a);
    bool was = em_set_grad_enabled(false); /* (the node below is the pieces' history) */
    em_status st = EM_OK;
    int made = 0;
    for (int64_t start = 0; made < n; start += sizes[made++])
        if (!(out[made] = em_slice(a, d, start, start + sizes[made], 1))) {
            st = em_last_status();
            break;
        }
    em_set_grad_enabled(was);
    int64_t *ctx = st == EM_OK && grad ? em_malloc(sizeof *ctx) : NULL;
    if (st == EM_OK && grad && !ctx) st = em_error(EM_ERR_NOMEM, "split: out of memory");
    if (ctx) {
        *ctx = d;
        if ((st = em_autograd_custom(with_sizes ? "SplitWithSizesBackward0" : "SplitBackward0", &a, 1, out, n, split_backward, ctx, em_free)) != EM_OK)
            em_free(ctx);
    }
    if (st != EM_OK)
        for (int i = 0; i < made; i++) {
            em_tensor_release(out[i]);
            out[i] = NULL;
        }
    return st;
}

/* A copy between devices: its gradient is copied back (ToCopyBackward0). */
static em_status to_device_backward(void *ctx, em_tensor *const *gout, int n_out, em_tensor **gin, int n_in,
                                    const bool *needs) {
    (void)n_out;
    (void)n_in;
    if (!needs[0] || !gout[0]) return EM_OK;
    gin[0] = em_to_device(gout[0], *(const em_device *)ctx);
    return gin[0] ? EM_OK : em_last_status();
}

em_tensor *em_to_device_recorded(em_tensor *t, em_device d) {
    if (!t) return NULL;
    bool grad = em_grad_enabled() && em_requires_grad(t);
    em_tensor *r = em_to_device(t, d);
    if (!r || !grad || r == t) return r;
    em_device *ctx = em_malloc(sizeof *ctx);
    em_status st = ctx ? EM_OK : em_error(EM_ERR_NOMEM, "to(): out of memory");
    if (ctx) {
        *ctx = t->device;
        if ((st = em_autograd_custom("ToCopyBackward0", &t, 1, &r, 1, to_device_backward, ctx, em_free)) != EM_OK)
            em_free(ctx);
    }
    if (st != EM_OK) {
        em_tensor_release(r);
        return NULL;
    }
    return r;
}
