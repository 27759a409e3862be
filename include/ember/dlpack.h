/*
 * dlpack.h - DLPack v0.8's tensor structs (https://github.com/dmlc/dlpack),
 * the ecosystem's convention for handing tensors between libraries without
 * copies. Written for ember from the published ABI, not vendored: these
 * few structs are the whole of it, laid out as dlpack's own header lays
 * them out, so a DLTensor from PyTorch, NumPy or a C program is read as
 * is. The include guard is dlpack's own: a program that includes the
 * original header first gets its definitions, which are the same.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLPACK_VERSION 80
#define DLPACK_ABI_VERSION 1

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLOpaqueHandle = 3U,
    kDLBfloat = 4U,
    kDLComplex = 5U,
    kDLBool = 6U,
} DLDataTypeCode;

typedef struct {
    uint8_t code; /* DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data; /* the first element is at (char *)data + byte_offset */
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means compact row-major */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#ifdef __cplusplus
}
#endif
#endif
