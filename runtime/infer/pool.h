/*
 * pool.h - the pools' geometry (pool.c), shared by their inference and
 * their kernels.
 */
#ifndef EMBER_INFER_POOL_H
#define EMBER_INFER_POOL_H

#include "window.h"

/* A strided pool's windows over big side `big`, its small side either given
 * (`small`: a gradient's, as ceil_mode gave it or not) or computed by
 * `rule`; p_hi: the padding after each dim (the average's divisor). */
em_status em_pool_strided_geometry(em_op op, const em_type *big, const em_attrs *a, const int64_t *small,
                                   em_window_rule rule, em_window_geom *g, int64_t *p_hi);

/* An adaptive pool's windows: big side x, the small side's spatial sizes. */
em_status em_pool_adaptive_geometry(em_op op, const em_type *x, const int64_t *small, em_window_geom *g);

#endif
