/*
 * interceptor.c - the stack of layers that dispatch tells about every op
 * the user runs (ops.h). A file of its own so that the layers install
 * themselves without reaching dispatch, nor dispatch them.
 */
#include "ember/ops.h"

const em_interceptor *em_interceptors[EM_INTERCEPT_COUNT];

void em_interceptor_install(em_interceptor_rank rank, const em_interceptor *ic) {
    __atomic_store_n(&em_interceptors[rank], ic, __ATOMIC_RELEASE);
}
