/*
 * window.h - the moves between a sliding-window op's input and its columns
 * (im2col and col2im) that convolution and unfold/fold are built on; the
 * geometry they walk is device-free (../infer/window.h).
 */
#ifndef EMBER_CPU_WINDOW_H
#define EMBER_CPU_WINDOW_H

#include "../infer/window.h"

/* col[(c * K + tap) * ld + (l - l0)] = the big side x (channel planes of
 * in_numel elements) at small-side position l and tap, zero in the padding,
 * for channels [0, nc) and positions [l0, l1). dt: float32 or float64. */
void em_im2col(em_dtype dt, const void *x, int64_t nc, const em_window_geom *g, int64_t l0, int64_t l1,
               void *col, int64_t ld);
/* The adjoint: x[...] += col[...] for every (channel, tap, position in
 * [l0, l1)) that im2col reads from x. */
void em_col2im(em_dtype dt, const void *col, int64_t nc, const em_window_geom *g, int64_t l0, int64_t l1,
               int64_t ld, void *x);

#endif
