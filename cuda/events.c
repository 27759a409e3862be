/*
 * events.c - torch.cuda.Event's ember: points in a device's stream, their
 * wait and their elapsed time (the stand-in's: host times at recording).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "stand_in.h"
#include "ember/cuda.h"

/* ---- events (torch.cuda.Event): points in a device's stream ---- */

struct em_cuda_event {
    int index;
    bool timing, recorded;
    CUevent ev;    /* NULL under the stand-in, whose work is done when queued */
    double host_s; /* the stand-in's record time */
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

em_cuda_event *em_cuda_event_new(int index, bool timing) {
    em_cuda_event *e = calloc(1, sizeof *e);
    if (!e) {
        em_error(EM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    e->index = index < 0 ? 0 : index;
    e->timing = timing;
    if (em_cuda_stand_in_active()) return e;
    cuda_dev *d;
    if (em_cuda_dev_enter(e->index, &d) != EM_OK) {
        free(e);
        return NULL;
    }
    /* (CU_EVENT_DISABLE_TIMING = 2: cheaper, as PyTorch's default) */
    CUresult rc = em_cu()->EventCreate(&e->ev, timing ? 0 : 2);
    if (rc != EM_CU_SUCCESS) {
        em_cuda_fail("cuEventCreate", rc);
        free(e);
        return NULL;
    }
    return e;
}

em_status em_cuda_event_record(em_cuda_event *e) {
    e->recorded = true;
    if (!e->ev) {
        e->host_s = now_s();
        return EM_OK;
    }
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(e->index, &d);
    CUresult rc = st == EM_OK ? em_cu()->EventRecord(e->ev, d->stream) : EM_CU_SUCCESS;
    return st != EM_OK ? st : rc == EM_CU_SUCCESS ? EM_OK : em_cuda_fail("cuEventRecord", rc);
}

em_status em_cuda_event_synchronize(em_cuda_event *e) {
    if (!e->ev || !e->recorded) return EM_OK;
    CUresult rc = em_cu()->EventSynchronize(e->ev);
    return rc == EM_CU_SUCCESS ? EM_OK : em_cuda_fail("cuEventSynchronize", rc);
}

int em_cuda_event_query(em_cuda_event *e) {
    if (!e->ev || !e->recorded) return 1;
    CUresult rc = em_cu()->EventQuery(e->ev);
    if (rc == EM_CU_SUCCESS) return 1;
    if (rc == 600) return 0; /* CUDA_ERROR_NOT_READY */
    em_cuda_fail("cuEventQuery", rc);
    return -1;
}

em_status em_cuda_event_elapsed_ms(em_cuda_event *start, em_cuda_event *end, double *ms) {
    if (!start->timing || !end->timing)
        return em_error(EM_ERR_RUNTIME,
                        "Both events must be created with argument 'enable_timing=True'.");
    if (!start->recorded || !end->recorded)
        return em_error(EM_ERR_RUNTIME,
                        "Both events must be recorded before calculating elapsed time.");
    if (!start->ev || !end->ev) {
        *ms = (end->host_s - start->host_s) * 1e3;
        return EM_OK;
    }
    float t = 0;
    em_status st = em_cuda_event_synchronize(end);
    CUresult rc = st == EM_OK ? em_cu()->EventElapsedTime(&t, start->ev, end->ev) : EM_CU_SUCCESS;
    if (st != EM_OK) return st;
    if (rc != EM_CU_SUCCESS) return em_cuda_fail("cuEventElapsedTime", rc);
    *ms = t;
    return EM_OK;
}

void em_cuda_event_free(em_cuda_event *e) {
    if (!e) return;
    if (e->ev) em_cu()->EventDestroy(e->ev);
    free(e);
}
