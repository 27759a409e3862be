/*
 * cuda.h - the CUDA device as the runtime sees it (runtime/cuda/).
 *
 * The driver (libcuda.so.1) is loaded at run time, so one build of ember
 * runs with and without one. Tensors on "cuda" are not built yet (issue
 * 17): the code generator's kernels compile to PTX (codegen_cuda.h), and
 * what follows is the device itself: memory, streams, launches.
 */
#ifndef EMBER_CUDA_H
#define EMBER_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many CUDA devices the driver reports: 0 without a driver, and then
 * `why` (if not NULL) says why, e.g. "no NVIDIA driver: libcuda.so.1 could
 * not be loaded (...)". */
int em_cuda_driver_devices(char *why, size_t why_size);
/* Can tensors live on a CUDA device? Not in this build (false), and `why`
 * says what is missing: a driver, a device, and ember's CUDA tensors. */
bool em_cuda_available(char *why, size_t why_size);

#ifdef __cplusplus
}
#endif
#endif
