/*
 * capture.h - observing what a trace reads from and does to Python state
 * (capture.c), and the guards that check it at every call.
 */
#ifndef EMBER_PY_CAPTURE_H
#define EMBER_PY_CAPTURE_H

#include "ember_py.h"

#define EM_PY_MAX_PENDING 512

typedef struct {
    PyObject *rec; /* borrowed: the _capture.Recorder */
    bool failed;
    /* (capture.c's: frames whose last instruction made an object) */
    struct {
        PyFrameObject *frame;
        int op;
    } pending[EM_PY_MAX_PENDING];
    int n_pending;
} em_py_recording;

typedef struct {
    em_py_recording rec;
    bool installed;
} em_py_capture;

/* Starts telling `recorder` (an ember._capture.Recorder, borrowed until
 * em_py_capture_end) what the code this thread runs reads and does: 1
 * when it does, 0 when it cannot (another trace function is installed: a
 * debugger or coverage; the caller then cannot know what the call read),
 * -1 with an exception. */
int em_py_capture_begin(PyObject *recorder, em_py_capture *c);
/* Stops; false when it was not running or the recorder failed. */
bool em_py_capture_end(em_py_capture *c);
/* Frames whose file is under dir are ember's own: not observed. */
void em_py_capture_set_own_dir(const char *dir);

/* A table of guards from the recorder's list of (kind, container, key,
 * value, what) and its ABSENT marker: a capsule (new reference). */
typedef struct em_py_state_guards em_py_state_guards;
PyObject *em_py_state_guards_new(PyObject *list, PyObject *absent_marker);
/* 1 when every guard holds, 0 when one does not (*failed_what, borrowed,
 * says which), -1 with an exception. */
int em_py_state_guards_hold(PyObject *guards, PyObject **failed_what);
Py_ssize_t em_py_state_guards_count(PyObject *guards);
PyObject *em_py_state_guards_what(PyObject *guards, Py_ssize_t i); /* borrowed */

extern PyMethodDef em_py_capture_methods[];

#endif
