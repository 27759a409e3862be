/*
 * tensor.h - refcounted storage and tensors (strided views of storage).
 *
 * Ownership (see STYLE.md): tensors and storages are refcounted. Every
 * function that returns an em_tensor* returns a NEW reference (release it
 * with em_tensor_release); arguments are borrowed; getters return borrowed
 * pointers. Constructors return NULL on failure with em_last_error() set.
 *
 * Fields of em_tensor are readable by every layer; only runtime/ writes them.
 * Shapes and strides count elements, not bytes. A tensor's bytes start at
 * storage->data + offset * itemsize.
 */
#ifndef EMBER_TENSOR_H
#define EMBER_TENSOR_H

#include "ember/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a storage gives its memory back. `ctx` is the owner given at creation
 * (an allocator, a NumPy array, a DLPack capsule). */
typedef void (*em_release_fn)(void *ctx, void *data, size_t nbytes);

typedef struct em_storage {
    int64_t refcount; /* updated atomically */
    void *data;
    size_t nbytes;
    em_device device;
    em_release_fn release;
    void *release_ctx;
    /* Bumped by every in-place write through any view of this storage, so
     * autograd and guards can notice mutation (shared by all views). */
    uint64_t version;
    /* Set once its address went out (NumPy's array interface, DLPack, the
     * buffer protocol): memory someone outside may read, so it is never
     * swapped for other memory (em_tensor_adopt_storage). */
    bool exported;
    /* How many of the references are autograd's saved results (aliases a
     * node keeps for its backward, updated atomically): a later in-place
     * write makes them unusable (the version check), it does not update
     * what they mean, so a tracer need not count them as sharing. */
    int64_t saved_refs;
} em_storage;

/* The layers that keep state of their own on tensors (issue 41, item 2):
 * each owns one word of em_tensor.layer_state and says what releasing it
 * means; tensor.c depends on none of them. In the order a dying tensor
 * tells them: the tracer sees the tensor whole, before autograd lets go of
 * its history. */
typedef enum em_tensor_layer {
    EM_LAYER_TRACE,    /* frontend/trace.c, through runtime/trace_hook.c: its mark (ops.h) */
    EM_LAYER_AUTOGRAD, /* runtime/autograd: an em_autograd_meta * (autograd/node.h) */
    EM_LAYER_COMPILE,  /* frontend/function.c: dims marked dynamic, a bit each (frontend.h) */
    EM_LAYER_PYTHON,   /* python/csrc: the Python object wrapping it (borrowed) */
    EM_LAYER_COUNT
} em_tensor_layer;

struct em_tensor;
/* What a layer does with its word of a dying tensor (never 0 when called). */
typedef void (*em_layer_release_fn)(struct em_tensor *t, uintptr_t state);

typedef struct em_tensor {
    int64_t refcount; /* updated atomically */
    em_storage *storage;
    int64_t offset; /* elements */
    int64_t numel;  /* product of shape, cached */
    em_dtype dtype;
    em_device device;
    int ndim;
    int64_t shape[EM_MAX_DIMS];
    int64_t strides[EM_MAX_DIMS]; /* elements; may be 0 (expanded dims) */
    /* A 0-d tensor made from a Python number: it takes part in type
     * promotion by category only, as in PyTorch. */
    bool is_wrapped_number;
    /* Serial number in order of creation (a tracer tells tensors born
     * during its trace from those that existed before by it). */
    uint64_t serial;
    /* made by a view op (dispatch), or a view made by hand (Tensor.set_) */
    bool is_view;
    /* A view op's result (dispatch): the tensor whose memory it views (the
     * root: a view of a view names the first one's base; owned), and the
     * memory's version its grad_fn describes. A write into the memory
     * through any other tensor leaves that grad_fn stale; autograd then
     * rebuilds it from the base's history (engine.c, as PyTorch's views
     * do), and a write through the view updates the base's history (its
     * CopySlices). view_refs: how many views name this tensor as their
     * base (atomic; a base alive only through them is not the user's). */
    struct em_tensor *view_base;
    uint64_t view_version;
    int64_t view_refs;
    /* The state each layer above the runtime keeps per tensor, one word a
     * layer (em_tensor_layer): tensor.c neither reads nor knows it, and
     * hands it to the layer's release function when the tensor dies. */
    uintptr_t layer_state[EM_LAYER_COUNT];
} em_tensor;

/* ---- storage ---- */

/* Allocates `nbytes` on `device` (uninitialised). */
em_storage *em_storage_new(em_device device, size_t nbytes);
/* Wraps memory owned elsewhere; `release(ctx, data, nbytes)` runs when the
 * last reference goes. On failure `release` is NOT called. */
em_storage *em_storage_wrap(void *data, size_t nbytes, em_device device, em_release_fn release,
                            void *ctx);
/* Is s memory ember allocated (not a NumPy array's, a DLPack producer's)? */
bool em_storage_is_own(const em_storage *s);
void em_storage_retain(em_storage *s);
void em_storage_release(em_storage *s);

/* ---- tensors ---- */

/* A new contiguous tensor with uninitialised data. */
em_tensor *em_tensor_empty(const int64_t *shape, int ndim, em_dtype dtype, em_device device);
/* A new tensor over `storage` (retained) with the given geometry. Checks that
 * every reachable element lies inside the storage. */
em_tensor *em_tensor_from_storage(em_storage *storage, em_dtype dtype, int64_t offset,
                                  const int64_t *shape, const int64_t *strides, int ndim);
/* Gives `target` the memory of `value` (which keeps target's old memory),
 * as an O(1) alternative to copying value into target; the storage's
 * version continues target's, bumped once like a write. Only when that is
 * invisible: neither memory is shared with another tensor, an outside owner
 * or an export (NumPy, DLPack) and both have the same dtype, shape and
 * layout. Returns
 * false, changing nothing, otherwise. */
bool em_tensor_adopt_storage(em_tensor *target, em_tensor *value);
/* PyTorch's resize_: t becomes contiguous with `shape` over the same
 * storage from its offset, the storage growing (its old bytes kept, the new
 * ones uninitialised, every tensor sharing it still valid) when it is too
 * small. Refused for storage ember did not allocate or whose address went
 * out (and, by its callers, for tensors that require grad). */
em_status em_tensor_resize(em_tensor *t, const int64_t *shape, int ndim);
/* Tensor.set_ and the in-place view ops (squeeze_, transpose_, as_strided_):
 * t becomes a view of `storage` (retained; t's own may be it) with the
 * given geometry, checked to lie inside it (its callers refuse tensors
 * that require grad). */
em_status em_tensor_set_geometry(em_tensor *t, em_storage *storage, int64_t offset, const int64_t *shape,
                                 const int64_t *strides, int ndim);
/* A view of `base`'s storage with new geometry (no bounds re-check: callers
 * derive the geometry from base's). */
em_tensor *em_tensor_alias(const em_tensor *base, int64_t offset, const int64_t *shape,
                           const int64_t *strides, int ndim);
/* A 0-d CPU tensor holding `value` converted to `dtype`. */
em_tensor *em_tensor_scalar(double value, em_dtype dtype);
/* Same for int64 values that a double cannot hold exactly. */
em_tensor *em_tensor_scalar_i64(int64_t value, em_dtype dtype);

void em_tensor_retain(em_tensor *t);
void em_tensor_release(em_tensor *t);
/* Sets what layer's release does (a layer calls it before it first stores
 * a word on a tensor; the same function again is harmless). */
void em_tensor_layer_register(em_tensor_layer layer, em_layer_release_fn release);

/* PyTorch's `t.data = src`: t takes src's memory, dtype, device and
 * geometry, keeping its identity and every layer's state (autograd's flags:
 * the caller checks they still fit). */
void em_tensor_set_data(em_tensor *t, const em_tensor *src);

/* Does t hold values? Not on the meta device (shapes, dtypes and strides,
 * no data), where nothing may read or write its memory. */
static inline bool em_tensor_has_data(const em_tensor *t) { return t->device.type != EM_DEVICE_META; }
/* EM_OK when t holds values, else an error saying `what` (".item()", ...)
 * cannot run on a meta tensor. */
em_status em_tensor_require_data(const em_tensor *t, const char *what);

static inline void *em_tensor_data(const em_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)em_dtype_size(t->dtype);
}
static inline em_type em_tensor_type(const em_tensor *t) {
    em_type ty;
    ty.dtype = t->dtype;
    ty.device = t->device;
    ty.ndim = t->ndim;
    for (int i = 0; i < EM_MAX_DIMS; i++) ty.shape[i] = i < t->ndim ? t->shape[i] : 0;
    return ty;
}

/* True when strides are row-major for the shape (size-1 dims ignored). */
bool em_tensor_is_contiguous(const em_tensor *t);
bool em_strides_are_contiguous(const int64_t *shape, const int64_t *strides, int ndim);
/* True when t's elements fill numel consecutive places in memory, its
 * dims in some order (contiguous, channels-last, any permutation of a
 * contiguous tensor; size-1 dims ignored): PyTorch's "non-overlapping and
 * dense". */
bool em_tensor_is_dense(const em_tensor *t);
/* Row-major strides for `shape`. */
void em_contiguous_strides(const int64_t *shape, int ndim, int64_t *strides);
/* Strides of a dense tensor whose dims lie in memory in `order` (outermost
 * first, a permutation of 0..ndim-1): contiguous for the identity. */
void em_layout_strides(const int64_t *shape, int ndim, const int64_t *order, int64_t *strides);
/* Reads element `linear` (row-major order over the shape) as a double. */
double em_tensor_get_f64(const em_tensor *t, int64_t linear);
/* One element of `dtype` at p, read or written through the conversions of
 * ops_math.h (floats to integers truncate; integers wrap). */
double em_load_f64(const void *p, em_dtype dtype);
int64_t em_load_i64(const void *p, em_dtype dtype);
void em_store_f64(void *p, em_dtype dtype, double value);
void em_store_i64(void *p, em_dtype dtype, int64_t value);

/* The serial number the next tensor created will get (tensors are numbered
 * in order of creation). */
uint64_t em_tensor_next_serial(void);

/* Live object counters, for leak tests. */
int64_t em_tensor_live_count(void);
int64_t em_storage_live_count(void);

#ifdef __cplusplus
}
#endif
#endif
