/* dynamo._frame_state: move a frame's state across a graph break (stage "resume").
 *
 * Input: the Python frame that calls one of these functions.  Output: its plain local
 * variables read into, or written from, a tuple; or a new function object whose closure is
 * made of that frame's cells.  Mechanism only: which slots, and what the tuples mean, is
 * decided in dynamo/resume/.
 *
 * A compiled frame with a graph break keeps the original instructions around the break, so
 * it must hold the same locals eager code would; its continuation runs as a separate function
 * (a "region") that receives those locals and returns them at its end.  Locals may be unbound
 * (NULL in the frame); tuples carry UNBOUND for them.  Cells are never copied: a region reads
 * and writes the very cells of the frame that calls it, through its closure.
 *
 *   read(slots)                    -> tuple of the caller's locals (UNBOUND where unset)
 *   write(slots, values)           -> None; sets or unsets the caller's locals
 *   enter(state, slots)            -> write(slots, state[1]); return state[0]
 *   leave(stack, tag, slots)       -> (tag, stack, read(slots))
 *   unpack(result, slots)          -> write(slots, result[2]); return result[1]
 *   pack(stack, slots)             -> (stack, read(slots))
 *   function(code, cell_slots)     -> a function of `code` with the caller's globals and the
 *                                     cells in `cell_slots` as its closure
 *   call(function, *args)          -> function(*args) with the calling frame hidden from the
 *                                     frame stack: a region continues its caller's frame, so
 *                                     inside it `f_back`, `sys._getframe(1)`, warnings'
 *                                     stacklevel and logging's caller see the frame that
 *                                     called the user's function, as in eager
 *
 * `slots` is a tuple of local-variable indices of the calling frame (-1: no such local).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
#define FRAME_STATE_SUPPORTED 1
#define Py_BUILD_CORE
#if PY_VERSION_HEX >= 0x030C0000
#undef _PyGC_FINALIZED
#endif
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#define CALLER_FRAME() (PyThreadState_Get()->cframe->current_frame)
#else
#define FRAME_STATE_SUPPORTED 0
#endif

static PyObject *unbound;  /* dynamo._frame_state.UNBOUND */

#if FRAME_STATE_SUPPORTED
static _PyInterpreterFrame *caller(void) {
    _PyInterpreterFrame *frame = CALLER_FRAME();
    if (frame == NULL) PyErr_SetString(PyExc_RuntimeError, "no calling Python frame");
    return frame;
}

static int slot_of(PyObject *slots, Py_ssize_t i, _PyInterpreterFrame *frame) {
    long slot = PyLong_AsLong(PyTuple_GET_ITEM(slots, i));
    if (slot == -1 && PyErr_Occurred()) return -2;
    if (slot >= frame->f_code->co_nlocalsplus) {
        PyErr_SetString(PyExc_IndexError, "local slot out of range");
        return -2;
    }
    return (int)slot;
}

static PyObject *read_locals(PyObject *slots) {
    _PyInterpreterFrame *frame = caller();
    if (frame == NULL) return NULL;
    if (!PyTuple_Check(slots)) return PyErr_Format(PyExc_TypeError, "slots must be a tuple");
    Py_ssize_t count = PyTuple_GET_SIZE(slots);
    PyObject *values = PyTuple_New(count);
    if (values == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        int slot = slot_of(slots, i, frame);
        if (slot == -2) { Py_DECREF(values); return NULL; }
        PyObject *value = slot >= 0 ? frame->localsplus[slot] : NULL;
        PyTuple_SET_ITEM(values, i, Py_NewRef(value != NULL ? value : unbound));
    }
    return values;
}

static int write_locals(PyObject *slots, PyObject *values) {
    _PyInterpreterFrame *frame = caller();
    if (frame == NULL) return -1;
    if (!PyTuple_Check(slots) || !PyTuple_Check(values) ||
            PyTuple_GET_SIZE(slots) != PyTuple_GET_SIZE(values)) {
        PyErr_SetString(PyExc_TypeError, "slots and values must be tuples of one length");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(slots); i++) {
        int slot = slot_of(slots, i, frame);
        if (slot == -2) return -1;
        if (slot < 0) continue;
        PyObject *value = PyTuple_GET_ITEM(values, i);
        PyObject *old = frame->localsplus[slot];
        frame->localsplus[slot] = value == unbound ? NULL : Py_NewRef(value);
        Py_XDECREF(old);
    }
    return 0;
}

static PyObject *item(PyObject *sequence, Py_ssize_t index) {
    if (!PyTuple_Check(sequence) || PyTuple_GET_SIZE(sequence) <= index)
        return PyErr_Format(PyExc_TypeError, "malformed frame state");
    return PyTuple_GET_ITEM(sequence, index);
}

static PyObject *fs_read(PyObject *module, PyObject *slots) { return read_locals(slots); }

static PyObject *fs_write(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "write(slots, values)");
    if (write_locals(args[0], args[1]) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *fs_enter(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "enter(state, slots)");
    PyObject *stack = item(args[0], 0), *locals = item(args[0], 1);
    if (stack == NULL || locals == NULL || write_locals(args[1], locals) < 0) return NULL;
    return Py_NewRef(stack);
}

static PyObject *fs_leave(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "leave(stack, tag, slots)");
    PyObject *locals = read_locals(args[2]);
    if (locals == NULL) return NULL;
    PyObject *result = PyTuple_Pack(3, args[1], args[0], locals);
    Py_DECREF(locals);
    return result;
}

static PyObject *fs_unpack(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "unpack(result, slots)");
    PyObject *stack = item(args[0], 1), *locals = item(args[0], 2);
    if (stack == NULL || locals == NULL || write_locals(args[1], locals) < 0) return NULL;
    return Py_NewRef(stack);
}

static PyObject *fs_pack(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "pack(stack, slots)");
    PyObject *locals = read_locals(args[1]);
    if (locals == NULL) return NULL;
    PyObject *result = PyTuple_Pack(2, args[0], locals);
    Py_DECREF(locals);
    return result;
}

static PyObject *fs_function(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyCode_Check(args[0]) || !PyTuple_Check(args[1]))
        return PyErr_Format(PyExc_TypeError, "function(code, cell_slots)");
    _PyInterpreterFrame *frame = caller();
    if (frame == NULL) return NULL;
    PyObject *slots = args[1];
    Py_ssize_t count = PyTuple_GET_SIZE(slots);
    PyObject *closure = PyTuple_New(count);
    if (closure == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        int slot = slot_of(slots, i, frame);
        PyObject *cell = slot >= 0 ? frame->localsplus[slot] : NULL;
        if (slot == -2 || cell == NULL || !PyCell_Check(cell)) {
            if (slot != -2) PyErr_SetString(PyExc_RuntimeError, "expected a cell in the frame");
            Py_DECREF(closure);
            return NULL;
        }
        PyTuple_SET_ITEM(closure, i, Py_NewRef(cell));
    }
    PyObject *function = PyFunction_New(args[0], frame->f_globals);
    if (function == NULL || (count && PyFunction_SetClosure(function, closure) < 0)) {
        Py_XDECREF(function);
        function = NULL;
    }
    Py_DECREF(closure);
    return function;
}

static PyObject *fs_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1) return PyErr_Format(PyExc_TypeError, "call(function, *args)");
    _PyCFrame *cframe = PyThreadState_Get()->cframe;
    _PyInterpreterFrame *frame = cframe->current_frame;
    if (frame == NULL) return PyObject_Vectorcall(args[0], args + 1, nargs - 1, NULL);
    /* the callee's frame links to `frame->previous`; CPython restores `current_frame` to
       the callee's `previous` when it returns, which is what we set here */
    cframe->current_frame = frame->previous;
    PyObject *result = PyObject_Vectorcall(args[0], args + 1, nargs - 1, NULL);
    cframe->current_frame = frame;
    return result;
}
#endif

static PyMethodDef methods[] = {
#if FRAME_STATE_SUPPORTED
    {"read", (PyCFunction)fs_read, METH_O, "the caller's locals in `slots`"},
    {"write", (PyCFunction)(void (*)(void))fs_write, METH_FASTCALL, "set the caller's locals"},
    {"enter", (PyCFunction)(void (*)(void))fs_enter, METH_FASTCALL, "a region's prologue"},
    {"leave", (PyCFunction)(void (*)(void))fs_leave, METH_FASTCALL, "a region's exit"},
    {"unpack", (PyCFunction)(void (*)(void))fs_unpack, METH_FASTCALL, "restore a region's result"},
    {"pack", (PyCFunction)(void (*)(void))fs_pack, METH_FASTCALL, "the state a region starts from"},
    {"function", (PyCFunction)(void (*)(void))fs_function, METH_FASTCALL,
     "a function of the given code closing over the caller's cells"},
    {"call", (PyCFunction)(void (*)(void))fs_call, METH_FASTCALL,
     "call a function with the calling frame hidden from the frame stack"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "dynamo._frame_state",
    "Frame state across graph breaks (see dynamo/resume/frame_state.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__frame_state(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    unbound = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (unbound == NULL || PyModule_AddObjectRef(module, "UNBOUND", unbound) < 0 ||
            PyModule_AddIntConstant(module, "SUPPORTED", FRAME_STATE_SUPPORTED) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
