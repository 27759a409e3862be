/*
 * iter.c - the strided-iteration helper every elementwise kernel uses.
 *
 * Operands are broadcast to the result's shape (stride 0 where a dim is
 * broadcast), dims of size 1 are dropped and neighbouring dims merged where
 * every operand is contiguous across them. The remaining index space is cut
 * into linear ranges for the thread pool; each range is walked as runs along
 * the innermost dim, and each run is one call of the inner loop, which has
 * fast paths for contiguous and broadcast-scalar operands.
 */
#include "../kernels.h"
#include "ember/parallel.h"

void em_iter_init(em_iter *it, em_tensor *out, em_tensor *const *ins, int n_in) {
    int n_ops = 1 + n_in;
    for (int k = 0; k < n_ops; k++) {
        em_tensor *t = k == 0 ? out : ins[k - 1];
        int64_t item = (int64_t)em_dtype_size(t->dtype);
        em_broadcast_strides(t->shape, t->strides, t->ndim, out->ndim, it->strides[k]);
        for (int d = 0; d < out->ndim; d++) it->strides[k][d] *= item; /* bytes */
        it->data[k] = em_tensor_data(t);
    }
    for (int d = 0; d < out->ndim; d++) it->shape[d] = out->shape[d];
    it->n_ops = n_ops;
    it->ndim = em_coalesce_dims(it->shape, out->ndim, it->strides, n_ops);
    it->numel = out->numel;
}

typedef struct {
    const em_iter *it;
    em_loop_fn loop;
} run_ctx;

static void run_range(void *arg, int64_t begin, int64_t end) {
    const run_ctx *c = arg;
    const em_iter *it = c->it;
    int nd = it->ndim, last = nd - 1, n_ops = it->n_ops;
    int64_t idx[EM_MAX_DIMS], inner_stride[EM_ITER_MAX_OPS];
    char *ptrs[EM_ITER_MAX_OPS];
    for (int k = 0; k < n_ops; k++) {
        ptrs[k] = it->data[k];
        inner_stride[k] = it->strides[k][last];
    }
    int64_t rem = begin;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
        for (int k = 0; k < n_ops; k++) ptrs[k] += idx[d] * it->strides[k][d];
    }
    int64_t inner = it->shape[last];
    for (int64_t pos = begin; pos < end;) {
        int64_t count = inner - idx[last];
        if (count > end - pos) count = end - pos;
        c->loop(ptrs, inner_stride, count);
        pos += count;
        idx[last] += count;
        for (int k = 0; k < n_ops; k++) ptrs[k] += count * inner_stride[k];
        for (int d = last; d > 0 && idx[d] == it->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            for (int k = 0; k < n_ops; k++)
                ptrs[k] += it->strides[k][d - 1] - it->shape[d] * it->strides[k][d];
        }
    }
}

/* ---- transposed operands: tiles ----
 * When an operand walks the innermost dim with a large stride but the next
 * dim with a small one (a transpose: x.t().contiguous()), runs along the
 * innermost dim touch a new cache line per element. Walking TILE x TILE
 * tiles of the two innermost dims instead keeps those lines in L1 across a
 * tile's rows; the loop function is the same. */
#define TILE 32

static bool transposed(const em_iter *it) {
    if (it->ndim < 2) return false;
    int last = it->ndim - 1;
    if (it->shape[last] < TILE || it->shape[last - 1] < TILE) return false;
    for (int k = 0; k < it->n_ops; k++) {
        int64_t inner = it->strides[k][last] < 0 ? -it->strides[k][last] : it->strides[k][last];
        int64_t next = it->strides[k][last - 1] < 0 ? -it->strides[k][last - 1] : it->strides[k][last - 1];
        if (inner > 64 && next != 0 && next <= 8) return true;
    }
    return false;
}

static void run_tiles(void *arg, int64_t begin, int64_t end) {
    const run_ctx *c = arg;
    const em_iter *it = c->it;
    int nd = it->ndim, last = nd - 1, n_ops = it->n_ops;
    int64_t rows = it->shape[last - 1], cols = it->shape[last];
    int64_t trows = (rows + TILE - 1) / TILE, tcols = (cols + TILE - 1) / TILE;
    int64_t inner_stride[EM_ITER_MAX_OPS];
    for (int k = 0; k < n_ops; k++) inner_stride[k] = it->strides[k][last];
    for (int64_t t = begin; t < end; t++) {
        /* t = (outer position, tile row, tile column) */
        int64_t tc = t % tcols, tr = (t / tcols) % trows, outer = t / (tcols * trows);
        char *base[EM_ITER_MAX_OPS];
        for (int k = 0; k < n_ops; k++) base[k] = it->data[k];
        for (int d = last - 2; d >= 0; d--) {
            int64_t i = outer % it->shape[d];
            outer /= it->shape[d];
            for (int k = 0; k < n_ops; k++) base[k] += i * it->strides[k][d];
        }
        int64_t r1 = (tr + 1) * TILE < rows ? (tr + 1) * TILE : rows;
        int64_t c0 = tc * TILE, n = (tc + 1) * TILE < cols ? TILE : cols - c0;
        for (int64_t r = tr * TILE; r < r1; r++) {
            char *ptrs[EM_ITER_MAX_OPS];
            for (int k = 0; k < n_ops; k++)
                ptrs[k] = base[k] + r * it->strides[k][last - 1] + c0 * it->strides[k][last];
            c->loop(ptrs, inner_stride, n);
        }
    }
}

void em_iter_run(const em_iter *it, em_loop_fn loop, int64_t grain) {
    if (it->numel == 0) return;
    if (it->ndim == 0) {
        int64_t zero[EM_ITER_MAX_OPS] = {0};
        char *ptrs[EM_ITER_MAX_OPS];
        for (int k = 0; k < it->n_ops; k++) ptrs[k] = it->data[k];
        loop(ptrs, zero, 1);
        return;
    }
    run_ctx c = {it, loop};
    if (transposed(it)) {
        int last = it->ndim - 1;
        int64_t tiles = ((it->shape[last - 1] + TILE - 1) / TILE) * ((it->shape[last] + TILE - 1) / TILE);
        int64_t outer = it->numel / (it->shape[last - 1] * it->shape[last]);
        em_parallel_for(outer * tiles, grain / (TILE * TILE) + 1, run_tiles, &c);
        return;
    }
    em_parallel_for(it->numel, grain, run_range, &c);
}
