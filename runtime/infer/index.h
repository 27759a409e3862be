/*
 * index.h - what the indexing ops' inference (index.c) shares with their
 * kernels: which dtypes index, and the plan of advanced indexing.
 */
#ifndef EMBER_INFER_INDEX_H
#define EMBER_INFER_INDEX_H

#include "../kernels.h"

/* Integer dtypes index (bool tensors are masks, made integer first). */
static inline bool em_is_index_dtype(em_dtype dt) { return dt != EM_DTYPE_BOOL && !em_dtype_is_float(dt); }

/* x[i_1, ..., i_k] with integer tensors for dims dims[0..k) (increasing).
 * The index tensors broadcast to a shape B. If the indexed dims are
 * adjacent, B replaces them in place; otherwise B comes first and the other
 * dims follow, as in NumPy and PyTorch. */
typedef struct {
    int k, nb, pos; /* index count, rank of B, where B starts in the result */
    int64_t bshape[EM_MAX_DIMS];
    int nd;                     /* result rank */
    int64_t shape[EM_MAX_DIMS]; /* result shape */
    int rest_dim[EM_MAX_DIMS];  /* result dim -> x dim for non-indexed dims, -1 inside B */
} em_adv_plan;

/* The plan of op (index or index_put) over x with index types ix[0..k):
 * the result's shape and where each of its dims comes from; an error in
 * PyTorch's words when the indices do not fit. */
em_status em_adv_plan_make(const char *op, const em_type *x, const em_type *ix, int k, const em_attrs *a,
                           em_adv_plan *p);

#endif
