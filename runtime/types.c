/*
 * types.c - dtype tables, devices and shape helpers (the type vocabulary the
 * runtime shares with the IR).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/types.h"

static const struct {
    size_t size;
    em_dtype_category cat;
    const char *name, *long_name;
} dtype_info[EM_DTYPE_COUNT] = {
#define X(S, ct, sn, pn, cat) {sizeof(ct), cat, sn, pn},
    EM_DTYPE_LIST(X)
#undef X
};

size_t em_dtype_size(em_dtype dt) { return dtype_info[dt].size; }
em_dtype_category em_dtype_category_of(em_dtype dt) { return dtype_info[dt].cat; }
bool em_dtype_is_float(em_dtype dt) { return dtype_info[dt].cat == EM_CAT_FLOAT; }
bool em_dtype_is_signed(em_dtype dt) { return dt != EM_DTYPE_U8 && dt != EM_DTYPE_BOOL; }
/* ember dtype -> DLPack (code, bits). ORDER DTYPE */
static const struct {
    uint8_t code, bits;
} dl_types[EM_DTYPE_COUNT] = {
    [EM_DTYPE_F32] = {kDLFloat, 32}, [EM_DTYPE_F64] = {kDLFloat, 64},
    [EM_DTYPE_F16] = {kDLFloat, 16}, [EM_DTYPE_BF16] = {kDLBfloat, 16},
    [EM_DTYPE_I64] = {kDLInt, 64},   [EM_DTYPE_I32] = {kDLInt, 32},
    [EM_DTYPE_I16] = {kDLInt, 16},   [EM_DTYPE_I8] = {kDLInt, 8},
    [EM_DTYPE_U8] = {kDLUInt, 8},    [EM_DTYPE_BOOL] = {kDLBool, 8},
};
_Static_assert(EM_DTYPE_COUNT == 10, "a new dtype needs a DLPack code here");

DLDataType em_dtype_to_dlpack(em_dtype dt) { return (DLDataType){dl_types[dt].code, dl_types[dt].bits, 1}; }

bool em_dtype_from_dlpack(DLDataType d, em_dtype *out) {
    if (d.lanes != 1) return false;
    for (int i = 0; i < EM_DTYPE_COUNT; i++)
        if (dl_types[i].code == d.code && dl_types[i].bits == d.bits) {
            *out = (em_dtype)i;
            return true;
        }
    return false;
}

const char *em_dtype_name(em_dtype dt) {
    return (unsigned)dt < EM_DTYPE_COUNT ? dtype_info[dt].name : "?";
}
const char *em_dtype_long_name(em_dtype dt) {
    return (unsigned)dt < EM_DTYPE_COUNT ? dtype_info[dt].long_name : "?";
}

bool em_dtype_from_name(const char *name, size_t len, em_dtype *out) {
    for (int i = 0; i < EM_DTYPE_COUNT; i++) {
        const char *n = dtype_info[i].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0) {
            *out = (em_dtype)i;
            return true;
        }
    }
    return false;
}

char *em_device_str(em_device d, char *buf) {
    if (d.type == EM_DEVICE_CPU)
        strcpy(buf, "cpu");
    else if (d.type == EM_DEVICE_META)
        strcpy(buf, "meta");
    else if (d.index < 0)
        strcpy(buf, "cuda");
    else
        snprintf(buf, 16, "cuda:%d", d.index);
    return buf;
}

bool em_device_parse(const char *s, em_device *out) {
    static const struct {
        const char *name;
        em_device_type type;
    } names[] = {{"cpu", EM_DEVICE_CPU}, {"meta", EM_DEVICE_META}, {"cuda", EM_DEVICE_CUDA}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t n = strlen(names[i].name);
        if (strncmp(s, names[i].name, n) != 0) continue;
        const char *rest = s + n;
        long index = -1;
        if (*rest == ':') { /* "cpu:0" and "meta:0" are the one CPU and meta device */
            char *end;
            if (rest[1] < '0' || rest[1] > '9') return false;
            index = strtol(rest + 1, &end, 10);
            if (*end || index > 127) return false;
        } else if (*rest) {
            return false;
        }
        if (names[i].type != EM_DEVICE_CUDA) index = -1;
        *out = (em_device){(uint8_t)names[i].type, (int8_t)index};
        return true;
    }
    return false;
}

int64_t em_shape_numel(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

bool em_shape_eq(const int64_t *a, int na, const int64_t *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

bool em_type_eq(const em_type *a, const em_type *b) {
    return a->dtype == b->dtype && em_device_eq(a->device, b->device) &&
           em_shape_eq(a->shape, a->ndim, b->shape, b->ndim);
}

int em_shape_str(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t n = 0;
    int w = snprintf(buf, size, "[");
    n += w > 0 ? (size_t)w : 0;
    for (int i = 0; i < ndim; i++) {
        w = snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, "%s%lld",
                     i ? "," : "", (long long)shape[i]);
        n += w > 0 ? (size_t)w : 0;
    }
    w = snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, "]");
    n += w > 0 ? (size_t)w : 0;
    return (int)n;
}

int em_type_str(const em_type *t, char *buf, size_t size) {
    char shape[256];
    em_shape_str(t->shape, t->ndim, shape, sizeof shape);
    if (t->device.type == EM_DEVICE_CPU)
        return snprintf(buf, size, "%s%s", em_dtype_name(t->dtype), shape);
    char dev[16];
    return snprintf(buf, size, "%s%s@%s", em_dtype_name(t->dtype), shape,
                    em_device_str(t->device, dev));
}

em_status em_wrap_dim(const char *op, int64_t dim, int ndim, int *out) {
    int64_t n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dims -1 and 0 */
    if (dim < -n || dim >= n)
        return em_error(EM_ERR_INDEX,
                        "%s: dimension out of range (expected to be in range of [%lld, %lld], "
                        "but got %lld)",
                        op, (long long)-n, (long long)(n - 1), (long long)dim);
    *out = (int)(dim < 0 ? dim + n : dim);
    return EM_OK;
}

static em_dtype default_float = EM_DTYPE_F32;

em_dtype em_default_float(void) { return __atomic_load_n(&default_float, __ATOMIC_RELAXED); }

bool em_set_default_float(em_dtype dt) {
    if ((unsigned)dt >= EM_DTYPE_COUNT || !em_dtype_is_float(dt)) return false;
    __atomic_store_n(&default_float, dt, __ATOMIC_RELAXED);
    return true;
}
