/*
 * tensor.c - refcounted storage and tensors: creation, views, release.
 *
 * A tensor is a strided window (offset, shape, strides in elements) onto a
 * storage. Views share the storage and its version counter. Refcounts are
 * atomic because kernels may drop references from pool threads.
 */
#include <stdint.h>
#include <string.h>

#include "ember/alloc.h"
#include "ember/ops_math.h"
#include "ember/tensor.h"
#include "memory.h"

static int64_t live_tensors, live_storages;
static uint64_t next_serial = 1;

uint64_t em_tensor_next_serial(void) { return __atomic_load_n(&next_serial, __ATOMIC_RELAXED); }

int64_t em_tensor_live_count(void) { return __atomic_load_n(&live_tensors, __ATOMIC_RELAXED); }
int64_t em_storage_live_count(void) { return __atomic_load_n(&live_storages, __ATOMIC_RELAXED); }

/* ---- storage ---- */

em_storage *em_storage_wrap(void *data, size_t nbytes, em_device device, em_release_fn release,
                            void *ctx) {
    em_storage *s = em_object_alloc(EM_OBJECT_STORAGE, sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s); /* (every field a later one adds starts at zero) */
    s->refcount = 1;
    s->data = data;
    s->nbytes = nbytes;
    s->device = device;
    s->release = release;
    s->release_ctx = ctx;
    s->version = 0;
    s->exported = false;
    __atomic_fetch_add(&live_storages, 1, __ATOMIC_RELAXED);
    return s;
}

em_storage *em_storage_new(em_device device, size_t nbytes) {
    if (device.type == EM_DEVICE_CUDA && device.index < 0) device.index = 0; /* "cuda": the current device, cuda:0 */
    const em_device_memory *mem = em_device_memory_of(device);
    if (!mem) {
        char dev[16];
        em_error(EM_ERR_NOT_IMPLEMENTED, "cannot allocate on %s: this build of ember has no %s device support yet",
                 em_device_str(device, dev), device.type == EM_DEVICE_CUDA ? "CUDA" : "such");
        return NULL;
    }
    void *data = NULL; /* (a device without data: meta) */
    if (mem->alloc && !(data = mem->alloc(device.index, nbytes))) return NULL;
    em_storage *s = em_storage_wrap(data, nbytes, device, mem->release, NULL);
    if (!s) mem->release(NULL, data, nbytes);
    return s;
}

void em_storage_retain(em_storage *s) { __atomic_fetch_add(&s->refcount, 1, __ATOMIC_RELAXED); }

void em_storage_release(em_storage *s) {
    if (!s || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (s->release) s->release(s->release_ctx, s->data, s->nbytes);
    em_object_free(EM_OBJECT_STORAGE, s);
    __atomic_fetch_sub(&live_storages, 1, __ATOMIC_RELAXED);
}

/* ---- tensors ---- */

void em_contiguous_strides(const int64_t *shape, int ndim, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
}

void em_layout_strides(const int64_t *shape, int ndim, const int64_t *order, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[order[i]] = s;
        s *= shape[order[i]] > 1 ? shape[order[i]] : 1;
    }
}

/* As PyTorch: a tensor with no elements is contiguous whatever its strides
 * (em_contiguous_strides' own strides for a zero-size shape included), and
 * size-1 dims' strides do not matter. */
bool em_strides_are_contiguous(const int64_t *shape, const int64_t *strides, int ndim) {
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return true;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] == 1) continue;
        if (strides[i] != s) return false;
        s *= shape[i];
    }
    return true;
}

bool em_tensor_is_contiguous(const em_tensor *t) {
    return em_strides_are_contiguous(t->shape, t->strides, t->ndim);
}

bool em_tensor_is_dense(const em_tensor *t) {
    int dims[EM_MAX_DIMS], n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) return true;
        if (t->shape[i] > 1) dims[n++] = i;
    }
    for (int i = 1; i < n; i++) /* by stride, the smallest first (insertion: at most EM_MAX_DIMS) */
        for (int j = i; j > 0 && t->strides[dims[j]] < t->strides[dims[j - 1]]; j--) {
            int d = dims[j];
            dims[j] = dims[j - 1];
            dims[j - 1] = d;
        }
    int64_t step = 1;
    for (int i = 0; i < n; i++) {
        if (t->strides[dims[i]] != step) return false;
        step *= t->shape[dims[i]];
    }
    return true;
}

static em_status check_shape(const int64_t *shape, int ndim) {
    if (ndim < 0 || ndim > EM_MAX_DIMS)
        return em_error(EM_ERR_VALUE, "tensors have at most %d dimensions, got %d", EM_MAX_DIMS,
                        ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return em_error(EM_ERR_VALUE, "negative dimension %lld in shape",
                            (long long)shape[i]);
    return EM_OK;
}

static em_tensor *tensor_alloc(em_storage *storage, em_dtype dtype, int64_t offset,
                               const int64_t *shape, const int64_t *strides, int ndim) {
    em_tensor *t = em_object_alloc(EM_OBJECT_TENSOR, sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->refcount = 1;
    t->storage = storage;
    em_storage_retain(storage);
    t->offset = offset;
    t->dtype = dtype;
    t->device = storage->device;
    t->ndim = ndim;
    if (ndim) {
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    }
    t->numel = em_shape_numel(shape, ndim);
    t->serial = __atomic_fetch_add(&next_serial, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&live_tensors, 1, __ATOMIC_RELAXED);
    return t;
}

em_tensor *em_tensor_empty(const int64_t *shape, int ndim, em_dtype dtype, em_device device) {
    if (check_shape(shape, ndim) != EM_OK) return NULL;
    size_t item = em_dtype_size(dtype);
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && n > (UINT64_MAX / 2) / item / (uint64_t)shape[i]) {
            char s[256];
            em_shape_str(shape, ndim, s, sizeof s);
            em_error(EM_ERR_NOMEM, "tensor of shape %s is too large to allocate", s);
            return NULL;
        }
        n *= (uint64_t)shape[i];
    }
    em_storage *s = em_storage_new(device, (size_t)n * item);
    if (!s) return NULL;
    int64_t strides[EM_MAX_DIMS];
    em_contiguous_strides(shape, ndim, strides);
    em_tensor *t = tensor_alloc(s, dtype, 0, shape, strides, ndim);
    em_storage_release(s);
    return t;
}

em_tensor *em_tensor_from_storage(em_storage *storage, em_dtype dtype, int64_t offset,
                                  const int64_t *shape, const int64_t *strides, int ndim) {
    if (check_shape(shape, ndim) != EM_OK) return NULL;
    /* Every product and sum checked: the geometry may come from a file
     * (a checkpoint, a DLPack producer), and an overflow would turn an
     * out-of-bounds view into one that seems to fit. */
    int64_t lo = offset, hi = offset, numel = 1;
    bool empty = false, overflow = offset < 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) empty = true;
        int64_t ext;
        overflow |= __builtin_mul_overflow(shape[i] ? shape[i] - 1 : 0, strides[i], &ext);
        overflow |= ext < 0 ? __builtin_add_overflow(lo, ext, &lo) : __builtin_add_overflow(hi, ext, &hi);
        overflow |= __builtin_mul_overflow(numel, shape[i], &numel);
    }
    size_t item = em_dtype_size(dtype);
    uint64_t end;
    if (!empty &&
        (overflow || lo < 0 || __builtin_mul_overflow((uint64_t)hi + 1, item, &end) || end > storage->nbytes)) {
        char s[256];
        em_shape_str(shape, ndim, s, sizeof s);
        em_error(EM_ERR_VALUE,
                 "view out of bounds: a %s view of shape %s at offset %lld reaches elements "
                 "[%lld, %lld], outside a storage of %zu bytes",
                 em_dtype_name(dtype), s, (long long)offset, (long long)lo, (long long)hi, storage->nbytes);
        return NULL;
    }
    return tensor_alloc(storage, dtype, empty ? 0 : offset, shape, strides, ndim);
}

em_tensor *em_tensor_alias(const em_tensor *base, int64_t offset, const int64_t *shape,
                           const int64_t *strides, int ndim) {
    return tensor_alloc(base->storage, base->dtype, offset, shape, strides, ndim);
}

static em_tensor *scalar_new(em_dtype dtype) {
    return em_tensor_empty(NULL, 0, dtype, em_cpu());
}

/* One element of dtype dt at p, converted by the one set of conversions
 * every backend uses (ops_math.h). */
#define STORE_FROM(FROM, S, T, sfx)                                                                \
    case EM_DTYPE_##S: *(T *)p = sc_cast_##FROM##_##sfx(value); break;

void em_store_f64(void *p, em_dtype dtype, double value) {
    switch (dtype) {
        EM_FOR_DTYPES_STORED(STORE_FROM, f64)
    default: break;
    }
}

void em_store_i64(void *p, em_dtype dtype, int64_t value) {
    switch (dtype) {
        EM_FOR_DTYPES_STORED(STORE_FROM, i64)
    default: break;
    }
}

em_tensor *em_tensor_scalar(double value, em_dtype dtype) {
    em_tensor *t = scalar_new(dtype);
    if (t) em_store_f64(em_tensor_data(t), dtype, value);
    return t;
}

em_tensor *em_tensor_scalar_i64(int64_t value, em_dtype dtype) {
    em_tensor *t = scalar_new(dtype);
    if (t) em_store_i64(em_tensor_data(t), dtype, value);
    return t;
}

void em_tensor_retain(em_tensor *t) { __atomic_fetch_add(&t->refcount, 1, __ATOMIC_RELAXED); }

bool em_storage_is_own(const em_storage *s) { return s->release == em_host_release; }

bool em_tensor_adopt_storage(em_tensor *target, em_tensor *value) {
    em_storage *a = target->storage, *b = value->storage;
    if (a == b || a->refcount != 1 || b->refcount != 1 || value->refcount != 1) return false;
    if (a->exported || b->exported) return false;
    if (a->release != em_host_release || b->release != em_host_release || a->nbytes != b->nbytes ||
        !em_device_eq(a->device, b->device))
        return false;
    if (target->offset || value->offset || target->dtype != value->dtype ||
        !em_shape_eq(target->shape, target->ndim, value->shape, value->ndim) ||
        memcmp(target->strides, value->strides, (size_t)target->ndim * sizeof *target->strides) != 0)
        return false;
    target->storage = b;
    value->storage = a;
    b->version = a->version + 1;
    return true;
}

em_status em_tensor_resize(em_tensor *t, const int64_t *shape, int ndim) {
    if (ndim < 0 || ndim > EM_MAX_DIMS)
        return em_error(EM_ERR_SHAPE, "resize_: %d dims (ember's tensors have at most %d)", ndim, EM_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return em_error(EM_ERR_SHAPE, "resize_: negative size %lld", (long long)shape[i]);
        if (shape[i] && numel > INT64_MAX / shape[i]) return em_error(EM_ERR_RUNTIME, "resize_: size overflows");
        numel *= shape[i];
    }
    em_storage *s = t->storage;
    size_t size = em_dtype_size(t->dtype);
    if ((uint64_t)(t->offset + numel) > (SIZE_MAX / size))
        return em_error(EM_ERR_RUNTIME, "resize_: size overflows");
    size_t need = (size_t)(t->offset + numel) * size;
    if (need > s->nbytes && s->device.type == EM_DEVICE_META) {
        s->nbytes = need; /* (no memory to grow) */
    } else if (need > s->nbytes) {
        if (s->release != em_host_release || s->exported)
            return em_error(EM_ERR_RUNTIME, "resize_: cannot grow memory ember does not own (a NumPy array's, a "
                                            "DLPack producer's, or one whose address went out) from %zu to %zu bytes",
                            s->nbytes, need);
        void *data = em_cpu_alloc(need);
        if (!data) return em_error(EM_ERR_NOMEM, "resize_: out of memory for %zu bytes", need);
        if (s->nbytes) memcpy(data, s->data, s->nbytes);
        em_cpu_free(s->data, s->nbytes);
        s->data = data;
        s->nbytes = need;
    }
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    em_contiguous_strides(t->shape, ndim, t->strides);
    t->numel = numel;
    s->version++;
    return EM_OK;
}

em_status em_tensor_set_geometry(em_tensor *t, em_storage *storage, int64_t offset, const int64_t *shape,
                                 const int64_t *strides, int ndim) {
    em_tensor *probe = em_tensor_from_storage(storage, t->dtype, offset, shape, strides, ndim); /* (the checks) */
    if (!probe) return em_last_status();
    em_storage_retain(storage);
    em_storage_release(t->storage);
    t->storage = storage;
    t->offset = probe->offset;
    t->ndim = probe->ndim;
    memcpy(t->shape, probe->shape, sizeof t->shape);
    memcpy(t->strides, probe->strides, sizeof t->strides);
    t->numel = probe->numel;
    em_tensor_release(probe);
    return EM_OK;
}

em_status em_tensor_require_data(const em_tensor *t, const char *what) {
    if (em_tensor_has_data(t)) return EM_OK;
    return em_error(EM_ERR_NOT_IMPLEMENTED, "%s cannot be called on meta tensors: they have a shape, a dtype "
                    "and strides but no data", what);
}

void em_tensor_set_data(em_tensor *t, const em_tensor *src) {
    em_storage_retain(src->storage);
    em_storage_release(t->storage);
    t->storage = src->storage;
    t->offset = src->offset;
    t->numel = src->numel;
    t->dtype = src->dtype;
    t->device = src->device;
    t->ndim = src->ndim;
    memcpy(t->shape, src->shape, sizeof t->shape);
    memcpy(t->strides, src->strides, sizeof t->strides);
    t->is_view = false;
}

/* Each layer's release of its word (em_tensor_layer), set by the layer. */
static em_layer_release_fn layer_release[EM_LAYER_COUNT];

void em_tensor_layer_register(em_tensor_layer layer, em_layer_release_fn release) {
    __atomic_store_n(&layer_release[layer], release, __ATOMIC_RELEASE);
}

void em_tensor_release(em_tensor *t) {
    if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int l = 0; l < EM_LAYER_COUNT; l++) {
        if (!t->layer_state[l]) continue;
        em_layer_release_fn release = __atomic_load_n(&layer_release[l], __ATOMIC_ACQUIRE);
        if (release) release(t, t->layer_state[l]);
    }
    if (t->view_base) {
        __atomic_sub_fetch(&t->view_base->view_refs, 1, __ATOMIC_ACQ_REL);
        em_tensor_release(t->view_base);
    }
    em_storage_release(t->storage);
    em_object_free(EM_OBJECT_TENSOR, t);
    __atomic_fetch_sub(&live_tensors, 1, __ATOMIC_RELAXED);
}

static const char *element_at(const em_tensor *t, int64_t linear) {
    int64_t off = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        int64_t idx = linear % t->shape[i];
        linear /= t->shape[i];
        off += idx * t->strides[i];
    }
    return (const char *)em_tensor_data(t) + off * (int64_t)em_dtype_size(t->dtype);
}

#define LOAD_AS(TO, S, T, sfx)                                                                     \
    case EM_DTYPE_##S: return sc_cast_##sfx##_##TO(*(const T *)p);

double em_load_f64(const void *p, em_dtype dtype) {
    switch (dtype) {
        EM_FOR_DTYPES_STORED(LOAD_AS, f64)
    default: return 0;
    }
}

int64_t em_load_i64(const void *p, em_dtype dtype) {
    switch (dtype) {
        EM_FOR_DTYPES_STORED(LOAD_AS, i64)
    default: return 0;
    }
}

double em_tensor_get_f64(const em_tensor *t, int64_t linear) {
    return em_load_f64(element_at(t, linear), t->dtype);
}
