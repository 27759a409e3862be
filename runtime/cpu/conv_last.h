/*
 * conv_last.h - float32 convolutions from a channels-last input into a
 * channels-last result, direct (conv_last.c), beside conv.c's im2row and
 * OpenBLAS path that the others of that layout take.
 */
#ifndef EMBER_CPU_CONV_LAST_H
#define EMBER_CPU_CONV_LAST_H

#include "window.h"

/* Can a convolution of geometry g over n samples go direct? (float32, at
 * least a vector of output channels per group, a tile of positions.) */
bool em_conv_last_fits(em_dtype dt, const em_window_geom *g, int64_t n, int64_t groups, int64_t cin, int64_t cout);

/* y = conv(x, w) + b (b may be NULL): x (n, in..., cin) and y (n, out...,
 * cout) dense channels-last, w (cout, cin / groups, k...) dense. */
em_status em_conv_last(const em_window_geom *g, int64_t n, int64_t groups, int64_t cin, int64_t cout, const float *x,
                       const float *w, const float *b, float *y);

#endif
