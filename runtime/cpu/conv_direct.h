/*
 * conv_direct.h - float32 convolutions at stride 1 as an implicit GEMM over
 * row-shifted copies of the input (conv_direct.c), beside conv.c's im2col
 * and OpenBLAS path that every other convolution takes.
 */
#ifndef EMBER_CPU_CONV_DIRECT_H
#define EMBER_CPU_CONV_DIRECT_H

#include "window.h"

/* Can a convolution of geometry g over n samples go direct, and is it
 * faster there? (float32, stride 1, enough work per position; with
 * `weight`, asked for conv_weight, also runs of positions long enough or
 * few (channel, tap) pairs: see MIN_WEIGHT_RUN.) */
bool em_conv_direct_fits(bool weight, em_dtype dt, const em_window_geom *g, int64_t n, int64_t groups, int64_t cin,
                         int64_t cout);

/* y = conv(x, w) + b (b may be NULL), all dense: x (n, cin, in...), w
 * (cout, cin / groups, k...), y (n, cout, out...). */
em_status em_conv_direct(const em_window_geom *g, int64_t n, int64_t groups, int64_t cin, int64_t cout,
                         const float *x, const float *w, const float *b, float *y);

/* dw = conv's gradient in w for input x and output gradient gy, dense. */
em_status em_conv_direct_weight(const em_window_geom *g, int64_t n, int64_t groups, int64_t cin, int64_t cout,
                                const float *x, const float *gy, float *dw);

/* Input channels per block of a direct convolution's sum over channels x
 * taps (kk taps, cg channels): each block summed in registers from zero,
 * then added to the result (see conv_direct.c). */
int64_t em_conv_block_channels(int64_t cg, int64_t kk);

#endif
