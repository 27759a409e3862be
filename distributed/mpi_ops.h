/*
 * mpi_ops.h - ember dtypes and reduce ops as MPI datatypes and ops
 * (distributed/ only).
 */
#ifndef EMBER_DISTRIBUTED_MPI_OPS_H
#define EMBER_DISTRIBUTED_MPI_OPS_H

#include <mpi.h>

#include "ember/distributed.h"

/* Makes the datatypes and ops of our own (after MPI_Init); an MPI code. */
int em_mpi_ops_init(void);
void em_mpi_ops_free(void);
MPI_Datatype em_mpi_type(em_dtype dt);
/* The MPI op for `op` on dt; an error naming `what` when there is none
 * (AVG of integers). */
em_status em_mpi_op(const char *what, em_dtype dt, em_reduce_op op, MPI_Op *out);
/* buf[0..n) /= divisor: AVG's second half. */
void em_mpi_divide(void *buf, int64_t n, em_dtype dt, int divisor);
const char *em_reduce_op_name(em_reduce_op op);

#endif
