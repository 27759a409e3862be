/*
 * generator.c - random ops drawing from an ember.Generator.
 *
 * The runtime's random ops reserve Philox counters from one global state
 * (seed, offset). An ember.Generator keeps a state of its own, a Python list
 * [seed, offset] (python/ember/_generator.py); an op given one runs with
 * that state swapped in for the global one, then stores the advanced offset
 * back in the list and puts the global state back. So a generator's stream
 * does not depend on what the global one drew, and the reverse.
 *
 * Why a swap is safe: between em_py_rng_swap_in and em_py_rng_swap_out the
 * caller runs only the C op, holding the GIL and running no Python code, so
 * no other Python thread can draw in between; and the runtime's random ops
 * are only ever started from Python with the GIL held (compiled graphs that
 * contain random ops keep holding it while they run, and never swap).
 */
#include "ember_py.h"

int em_py_rng_swap_in(PyObject *gen, em_rng_state *global) {
    if (gen == Py_None) return 0;
    if (!PyList_Check(gen) || PyList_GET_SIZE(gen) != 2) {
        PyErr_SetString(PyExc_TypeError, "generator state must be a list [seed, offset]");
        return -1;
    }
    unsigned long long seed = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(gen, 0));
    unsigned long long offset = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(gen, 1));
    if (PyErr_Occurred()) return -1;
    em_note_event(EM_EVENT_RNG_SWAP, "generator=", NULL); /* a trace cannot replay the swap */
    *global = em_rng_get_state();
    em_rng_set_state((em_rng_state){seed, offset});
    return 0;
}

PyObject *em_py_rng_swap_out(PyObject *gen, em_rng_state global, em_tensor *t) {
    if (gen != Py_None) {
        em_rng_state drawn = em_rng_get_state();
        em_rng_set_state(global);
        PyObject *offset = PyLong_FromUnsignedLongLong(drawn.offset);
        if (!offset) {
            em_tensor_release(t);
            return NULL;
        }
        PyList_SetItem(gen, 1, offset); /* steals offset */
    }
    return em_py_wrap(t);
}
