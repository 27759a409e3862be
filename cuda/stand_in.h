/*
 * stand_in.h - the host stand-in for a CUDA device (stand_in.c): tests of
 * the code around the device on machines without a GPU. Not public.
 */
#ifndef EMBER_RUNTIME_CUDA_STAND_IN_H
#define EMBER_RUNTIME_CUDA_STAND_IN_H

#include <stdbool.h>

/* Is EMBER_CUDA_HOST_STAND_IN=1 set? */
bool em_cuda_stand_in_wanted(void);
/* Installs the stand-in as the CUDA entry of the device table, supporting
 * the ops the CUDA device does (supported_on_cuda, its `supports`). */
void em_cuda_stand_in_register(bool (*supported_on_cuda)(em_op));
/* Is the stand-in the CUDA entry now? */
bool em_cuda_stand_in_active(void);

#endif
