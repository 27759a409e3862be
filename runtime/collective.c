/*
 * collective.c - the all_reduce op: a collective between processes as a node
 * of the op table, so that a traced function (a compiled training step
 * under DistributedDataParallel) records it and a compiled graph runs it in
 * its place among the other nodes. Its result is its input combined across
 * the ranks of a process group; the combining is done by the function the
 * process-group layer (distributed/, on MPI) installs, which the runtime
 * only calls.
 */
#include "kernels.h"

static em_collective_fn collective_handler;

void em_set_collective_handler(em_collective_fn fn) { collective_handler = fn; }

/* (torch.distributed.ReduceOp: SUM, AVG, PRODUCT, MIN, MAX) */
#define REDUCE_OPS 5

em_status infer_all_reduce(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                           int n_out) {
    (void)n_in, (void)n_out;
    if (attrs->reduce_op < 0 || attrs->reduce_op >= REDUCE_OPS)
        return em_error(EM_ERR_VALUE, "%s: reduce_op %lld is not one of ReduceOp's (0 to %d)", em_op_name(op),
                        (long long)attrs->reduce_op, REDUCE_OPS - 1);
    if (attrs->process_group < 0) return em_error(EM_ERR_VALUE, "%s: group %lld", em_op_name(op), (long long)attrs->process_group);
    if (in[0].device.type != EM_DEVICE_CPU)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "%s: only CPU tensors (no NCCL yet)", em_op_name(op));
    out[0] = in[0];
    return EM_OK;
}

em_status cpu_all_reduce(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)n_in;
    if (!collective_handler)
        return em_error(EM_ERR_RUNTIME, "%s: no process group in this process: call "
                        "ember.distributed.init_process_group first", em_op_name(op));
    em_status st = em_copy_into(out[0], in[0]);
    return st == EM_OK ? collective_handler(out[0], attrs->reduce_op, attrs->process_group) : st;
}
