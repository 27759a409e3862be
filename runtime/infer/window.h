/*
 * window.h - what the sliding-window ops share, on every device: their
 * geometry, checked once from the attributes and the types.
 *
 * Every window op sees its input as (N, C, spatial...) with 1 to
 * EM_MAX_SPATIAL spatial dims. Its geometry relates the big side (a
 * convolution's input, a pool's input, fold's result) to the small side (a
 * convolution's output, the positions a window stops at): position o of the
 * small side reads the big side at o * stride - padding + tap * dilation
 * for each tap of the kernel. The geometry is padded to EM_MAX_SPATIAL dims
 * with leading dims of size 1, so every loop is written once for three.
 */
#ifndef EMBER_INFER_WINDOW_H
#define EMBER_INFER_WINDOW_H

#include "../kernels.h"

#define W3 EM_MAX_SPATIAL

typedef struct em_window_geom {
    int n;                    /* spatial dims the op was given */
    int64_t in[W3], out[W3];  /* big and small side's spatial sizes */
    int64_t k[W3], s[W3], p[W3], d[W3]; /* kernel, stride, padding before, dilation */
    int64_t in_numel, out_numel, k_numel;
} em_window_geom;

/* How the small side's size follows from the big side's. */
typedef enum em_window_rule {
    EM_WIN_FLOOR,      /* (in + pads - d(k-1) - 1) / s + 1, rounded down      */
    EM_WIN_CEIL,       /* rounded up, the last window starting inside the input
                          or its padding before (pooling's ceil_mode)         */
    EM_WIN_TRANSPOSED, /* given; the big side may exceed what it needs by less
                          than max(stride, dilation) (conv_transpose's
                          output_padding)                                     */
} em_window_rule;

/* The geometry of op (its name starts every error) over an input whose type
 * is x, with `kernel` per spatial dim (NULL: the kernel attribute) and, for
 * EM_WIN_TRANSPOSED, the small side's spatial sizes `small` (NULL: computed
 * by `rule` from x). Checks that the lists have one entry per spatial dim
 * (two for padding), that kernel, stride and dilation are positive and
 * padding not negative, and that the sizes fit, with PyTorch's messages. */
em_status em_window_geometry(em_op op, const em_type *x, const int64_t *kernel, const em_attrs *a,
                             em_window_rule rule, const int64_t *small, em_window_geom *g);

/* Checks that x is (N, C, 1 to EM_MAX_SPATIAL spatial dims) of float32 or
 * float64, naming op and what x is ("input", "weight", ...). */
em_status em_window_input(em_op op, const em_type *x, const char *what);

/* Does im2col copy x unchanged (a 1x1 kernel, stride 1, no padding)? */
bool em_window_is_identity(const em_window_geom *g);

/* a / b rounded up and down, for any sign of a (b > 0). */
static inline int64_t em_ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static inline int64_t em_floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

#endif
