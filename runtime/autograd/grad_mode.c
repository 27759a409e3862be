/*
 * grad_mode.c - grad mode (autograd.h): whether ops record history, per
 * thread. Apart from the engine so that what reads it (formulas, the ops
 * that build their own node) need not reach the engine.
 */
#include "ember/autograd.h"

static _Thread_local bool grad_disabled; /* inverted: zero-initialised means on */

bool em_grad_enabled(void) { return !grad_disabled; }

bool em_set_grad_enabled(bool on) {
    bool was = !grad_disabled;
    grad_disabled = !on;
    return was;
}
