/*
 * ew_chain.c - a chain of elementwise ops run block by block.
 *
 * What a fused node does when no kernel was compiled for it (a node too
 * small to be worth LLVM's time, or a build without LLVM): each op's eager
 * inner loop (elementwise.c) runs over a block of CHAIN_BLOCK elements at
 * a time, and the values between ops live in a few block-sized buffers that
 * stay in the L1 cache. Run op by op instead, every intermediate would be a
 * tensor of its own: an allocation, a type inference and an iterator set-up
 * per op, which is most of the cost of a small node, and a trip through
 * memory per op for a large one. The loops are the eager kernels' own, so
 * the results are theirs bit for bit.
 */
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/parallel.h"

#define CHAIN_BLOCK 256
#define CHAIN_ITEM_MAX 8 /* bytes: a temporary's buffer holds any dtype up to this */
#define CHAIN_FEW 64     /* slots and steps planned on the stack */

typedef struct {
    const em_ew_step *steps;
    int n_steps;
    const em_loop_fn *loops;
    char *const *base;     /* per slot: a tensor's data, or NULL for a temporary */
    const int64_t *stride; /* per slot, bytes: the item size, or 0 for a broadcast scalar */
    const int *buffer;     /* per temporary slot: its block buffer */
    int n_buffers;
    int failed; /* a worker could not allocate its buffers */
} chain;

static void run_blocks(void *arg, int64_t begin, int64_t end) {
    const chain *c = arg;
    size_t bytes = (size_t)c->n_buffers * CHAIN_BLOCK * CHAIN_ITEM_MAX;
    _Alignas(64) char few[8 * CHAIN_BLOCK * CHAIN_ITEM_MAX];
    char *tmp = bytes <= sizeof few ? few : em_malloc(bytes);
    if (!tmp) {
        __atomic_store_n(&((chain *)arg)->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t i0 = begin; i0 < end; i0 += CHAIN_BLOCK) {
        int64_t n = end - i0 < CHAIN_BLOCK ? end - i0 : CHAIN_BLOCK;
        for (int k = 0; k < c->n_steps; k++) {
            const em_ew_step *st = &c->steps[k];
            char *p[4];
            int64_t s[4];
            for (int j = 0; j <= st->n_in; j++) {
                int slot = j == 0 ? st->out : st->in[j - 1];
                if (c->base[slot]) {
                    p[j] = c->base[slot] + i0 * c->stride[slot];
                } else {
                    p[j] = tmp + (size_t)c->buffer[slot] * CHAIN_BLOCK * CHAIN_ITEM_MAX;
                }
                s[j] = c->stride[slot];
            }
            c->loops[k](p, s, n);
        }
    }
    if (tmp != few) em_free(tmp);
}

bool em_ew_chain_run(const em_ew_step *steps, int n_steps, em_tensor *const *tensors, const em_type *types,
                     int n_slots, int64_t numel) {
    em_loop_fn few_loops[CHAIN_FEW];
    char *few_base[CHAIN_FEW];
    int64_t few_stride[CHAIN_FEW];
    int few_buffer[CHAIN_FEW], few_last[CHAIN_FEW], few_written[CHAIN_FEW];
    bool heap = n_slots > CHAIN_FEW || n_steps > CHAIN_FEW;
    em_loop_fn *loops = heap ? em_malloc((size_t)(n_steps ? n_steps : 1) * sizeof *loops) : few_loops;
    char **base = heap ? em_malloc((size_t)(n_slots ? n_slots : 1) * sizeof *base) : few_base;
    int64_t *stride = heap ? em_malloc((size_t)(n_slots ? n_slots : 1) * sizeof *stride) : few_stride;
    int *buffer = heap ? em_malloc((size_t)(n_slots ? n_slots : 1) * 3 * sizeof *buffer) : few_buffer;
    int *last = heap ? (buffer ? buffer + n_slots : NULL) : few_last;
    int *written = heap ? (buffer ? buffer + 2 * n_slots : NULL) : few_written;
    bool ok = loops && base && stride && buffer;

    /* Each slot: where its elements are, and the last step that reads it. */
    for (int i = 0; ok && i < n_slots; i++) {
        const em_tensor *t = tensors[i];
        size_t item = em_dtype_size(types[i].dtype);
        last[i] = -1;
        written[i] = t != NULL;
        buffer[i] = -1;
        if (!t) {
            base[i] = NULL;
            stride[i] = (int64_t)item;
            ok = item <= CHAIN_ITEM_MAX;
        } else {
            ok = t->dtype == types[i].dtype && t->device.type == EM_DEVICE_CPU &&
                 (t->numel == 1 || (t->numel == numel && em_tensor_is_contiguous(t)));
            base[i] = em_tensor_data(t);
            stride[i] = t->numel == numel ? (int64_t)item : 0;
        }
    }
    /* Each step: a loop that reads and writes its slots' dtypes as they are,
     * inputs already written, and a result of the chain's size. */
    for (int k = 0; ok && k < n_steps; k++) {
        const em_ew_step *st = &steps[k];
        em_type in[3];
        ok = st->n_in >= 1 && st->n_in <= 3 && st->out >= 0 && st->out < n_slots &&
             (!tensors[st->out] || stride[st->out] != 0 || numel == 1);
        for (int j = 0; ok && j < st->n_in; j++) {
            int slot = st->in[j];
            ok = slot >= 0 && slot < n_slots && written[slot];
            if (ok) {
                in[j] = types[slot];
                last[slot] = k;
            }
        }
        if (ok) ok = (loops[k] = em_ew_direct_loop(st->op, in, st->n_in, types[st->out].dtype)) != NULL;
        if (ok) written[st->out] = 1;
    }
    /* Temporaries share block buffers: one is free again after its value's
     * last read. (Not for the step that reads it last: a cast's result
     * written over its input would overwrite elements not read yet.) */
    int n_buffers = 0, n_free = 0;
    int *free_list = written; /* (written[] is done with: reused as the free list) */
    for (int k = 0; ok && k < n_steps; k++) {
        const em_ew_step *st = &steps[k];
        if (!tensors[st->out]) buffer[st->out] = n_free ? free_list[--n_free] : n_buffers++;
        for (int j = 0; j < st->n_in; j++) {
            int slot = st->in[j];
            bool dup = false; /* (an input read twice by this step dies once) */
            for (int q = 0; q < j; q++) dup |= st->in[q] == slot;
            if (!tensors[slot] && last[slot] == k && !dup) free_list[n_free++] = buffer[slot];
        }
    }
    if (ok) { /* (a worker short of memory: the caller runs the ops one by one instead) */
        chain c = {steps, n_steps, loops, base, stride, buffer, n_buffers, 0};
        em_parallel_for(numel, EM_GRAIN_ELEMENTWISE, run_blocks, &c);
        ok = !c.failed;
    }
    if (heap) {
        em_free(loops);
        em_free(base);
        em_free(stride);
        em_free(buffer);
    }
    return ok;
}
