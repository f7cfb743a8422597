/* dynamo._C: the PEP 523 frame hook (stage "intercept").
 *
 * Input: CPython frames about to run.  Output: either the frame runs as is, or a
 * replacement code object runs in its place with the same arguments, cells and free
 * variables.  This file is mechanism only; every decision is made in Python:
 *
 *   - a per-thread callback, installed with set_callback(); the interpreter-wide eval
 *     function is installed only while at least one thread has a callback;
 *   - only fresh, optimized function frames are intercepted (no generators, coroutines,
 *     throw calls, resumed frames, module/class bodies, tracing, or skipped code);
 *   - a per-code-object cache on co_extra: a Python list of (check, code) entries that C
 *     walks, calling check(L, G); the first hit runs without calling the Python callback
 *     and moves to the front of the list;
 *   - on a miss the callback receives a FrameView and answers None (run as is), SKIP
 *     (never intercept this code again), DISABLE (run it, and everything it calls, with
 *     capture off; remembered for the code object) or a code object (run it now);
 *   - capture off: a per-thread depth (`dynamo.disable` scopes, DISABLE frames) and a
 *     process-wide flag (`set_stance("force_eager")`, `dynamo.config.disable`) under
 *     which no frame is intercepted, no cache entry runs and a ScopedCall does not
 *     install its callback;
 *   - a process-wide filter (set_disable_filter) marks code objects DISABLE the first time
 *     one of their frames, fresh or resumed, meets a thread with a callback, before any
 *     cache or callback: the compilers, whose frames and callees are never captured.
 *
 * A replacement code object takes every argument slot positionally (the Python side
 * rewrites the signature), so it is called through an ordinary function object that
 * shares the original's globals and closure; CPython owns that frame entirely.
 *
 * Every version difference lives in the macros below.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
#define JIT_HOOK_SUPPORTED 1
#define Py_BUILD_CORE
#if PY_VERSION_HEX >= 0x030C0000
#undef _PyGC_FINALIZED
#endif
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#if PY_VERSION_HEX >= 0x030C0000
#include <internal/pycore_interp.h>
#endif
#undef Py_BUILD_CORE
#else
#define JIT_HOOK_SUPPORTED 0
#endif

/* ---- version macros ------------------------------------------------------------ */
#if JIT_HOOK_SUPPORTED
typedef _PyInterpreterFrame Frame;
#if PY_VERSION_HEX >= 0x030C0000
#define FRAME_FUNC(f) ((PyFunctionObject *)(f)->f_funcobj)
#define REQUEST_EXTRA_INDEX PyUnstable_Eval_RequestCodeExtraIndex
#define CODE_GET_EXTRA PyUnstable_Code_GetExtra
#define CODE_SET_EXTRA PyUnstable_Code_SetExtra
#define FRAME_CALLER_CLEARS 0
#else
#define FRAME_FUNC(f) ((f)->f_func)
#define REQUEST_EXTRA_INDEX _PyEval_RequestCodeExtraIndex
#define CODE_GET_EXTRA _PyCode_GetExtra
#define CODE_SET_EXTRA _PyCode_SetExtra
#define FRAME_CALLER_CLEARS 1
#endif
#define FRAME_CODE(f) ((f)->f_code)
#define FRAME_IS_FRESH(f) ((f)->prev_instr == _PyCode_CODE(FRAME_CODE(f)) - 1)
#define CODE_KIND(co, i) (((uint8_t *)PyBytes_AS_STRING((co)->co_localspluskinds))[i])
#endif

#define SKIP_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

static PyObject *skip_sentinel;     /* dynamo._C.SKIP */
static PyObject *disable_sentinel;  /* dynamo._C.DISABLE */
/* Per-thread state, one thread-local struct: in a shared object every thread-local variable
 * costs a call to __tls_get_addr wherever it is read, so the hot paths take its address once. */
typedef struct {
    PyObject *callback;  /* strong reference or NULL */
    int busy;            /* >0 while callback/check runs */
    int disabled;        /* >0: capture off in this thread */
} ThreadFlags;
static __thread ThreadFlags thread_flags = {NULL, 0, 0};

/* The struct's address, opaque to the compiler, which would otherwise recompute it (a call)
 * at each use after a call instead of keeping it in a register. */
static inline ThreadFlags *this_thread(void) {
    ThreadFlags *t = &thread_flags;
    __asm__("" : "+r"(t));
    return t;
}
#define thread_disabled (thread_flags.disabled)
static int process_disabled = 0;          /* capture off in every thread (GIL) */
static PyObject *disable_filter = NULL;   /* filter(code) -> bool, or NULL */
static int filter_generation = 1;          /* bumped by set_disable_filter */
static unsigned long long counter_disabled_runs = 0;

#if JIT_HOOK_SUPPORTED
/* ---- per-code-object cache on co_extra ------------------------------------------ */
typedef struct {
    PyObject *entries;  /* list of (check, code) tuples, or NULL */
    int skip;           /* SKIP_CODE: never intercept; SKIP_DISABLED: run with capture off */
    int filtered;       /* the filter_generation whose filter answered (0: none) */
} CodeExtra;

#define SKIP_CODE 1
#define SKIP_DISABLED 2

static Py_ssize_t extra_index = -1;

/* CPython calls every registered free function for every code object that carries any
 * extra data, so `ptr` is NULL when only another user (torch.compile, a debugger) set one. */
static void free_extra(void *ptr) {
    CodeExtra *extra = (CodeExtra *)ptr;
    if (extra == NULL) return;
    Py_XDECREF(extra->entries);
    PyMem_Free(extra);
}

static CodeExtra *get_extra(PyCodeObject *code, int create) {
    void *ptr = NULL;
    if (CODE_GET_EXTRA((PyObject *)code, extra_index, &ptr) < 0) return NULL;
    if (ptr != NULL || !create) return (CodeExtra *)ptr;
    CodeExtra *extra = PyMem_Calloc(1, sizeof(CodeExtra));
    if (extra == NULL) { PyErr_NoMemory(); return NULL; }
    if (CODE_SET_EXTRA((PyObject *)code, extra_index, extra) < 0) {
        PyMem_Free(extra);
        return NULL;
    }
    return extra;
}

/* ---- per-thread state ----------------------------------------------------------- */
#define thread_callback (thread_flags.callback)
static int active_threads = 0;                     /* threads with a callback (GIL) */
static unsigned long long counter_hits = 0, counter_misses = 0;

static PyObject *eval_frame(PyThreadState *, Frame *, int);

/* Another PEP 523 user (torch.compile, a debugger) may have its function installed when the
 * first callback arrives: remember it and put it back when the last callback leaves. */
static _PyFrameEvalFunction previous_eval_frame = NULL;

static void install_eval_frame(int on) {
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (on && current != eval_frame) {
        previous_eval_frame = current;
        _PyInterpreterState_SetEvalFrameFunc(interp, eval_frame);
    } else if (!on && current == eval_frame) {  /* if replaced since, leave the new one */
        _PyInterpreterState_SetEvalFrameFunc(
            interp, previous_eval_frame ? previous_eval_frame : _PyEval_EvalFrameDefault);
        previous_eval_frame = NULL;
    }
}

static int eval_frame_installed(void) {
    return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == eval_frame;
}

static int tracing_active(PyThreadState *tstate) {
    if (tstate->c_tracefunc != NULL || tstate->c_profilefunc != NULL) return 1;
#if PY_VERSION_HEX >= 0x030C0000
    for (int i = 0; i < _PY_MONITORING_UNGROUPED_EVENTS; i++)
        if (tstate->interp->monitors.tools[i]) return 1;
#endif
    return 0;
}

/* ---- the frame view handed to the callback ---------------------------------------- */
typedef struct {
    PyObject_HEAD
    PyObject *f_code, *f_func, *f_globals, *f_builtins, *f_locals;
} FrameView;

static PyMemberDef frame_view_members[] = {
    {"f_code", T_OBJECT, offsetof(FrameView, f_code), READONLY, "the code object"},
    {"f_func", T_OBJECT, offsetof(FrameView, f_func), READONLY, "the function object"},
    {"f_globals", T_OBJECT, offsetof(FrameView, f_globals), READONLY, "globals dict"},
    {"f_builtins", T_OBJECT, offsetof(FrameView, f_builtins), READONLY, "builtins dict"},
    {"f_locals", T_OBJECT, offsetof(FrameView, f_locals), READONLY,
     "locals by name at entry: arguments, raw cell values, free-variable contents"},
    {NULL},
};

static void frame_view_dealloc(FrameView *self) {
    Py_XDECREF(self->f_code);
    Py_XDECREF(self->f_func);
    Py_XDECREF(self->f_globals);
    Py_XDECREF(self->f_builtins);
    Py_XDECREF(self->f_locals);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject FrameViewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.FrameView",
    .tp_basicsize = sizeof(FrameView),
    .tp_dealloc = (destructor)frame_view_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A light view of an intercepted frame (no frame object is built).",
    .tp_members = frame_view_members,
};

/* Locals by name, read by slot before the prologue has run: cell slots hold raw
 * argument values (or nothing), free variables come from the function's closure. */
static PyObject *frame_locals(Frame *frame) {
    PyCodeObject *code = FRAME_CODE(frame);
    PyObject *closure = FRAME_FUNC(frame)->func_closure;
    int free_offset = code->co_nlocalsplus - code->co_nfreevars;
    PyObject *locals = PyDict_New();
    if (locals == NULL) return NULL;
    for (int i = 0; i < code->co_nlocalsplus; i++) {
        PyObject *value = frame->localsplus[i];
        if (CODE_KIND(code, i) & CO_FAST_FREE)
            value = closure ? PyCell_GET(PyTuple_GET_ITEM(closure, i - free_offset)) : NULL;
        if (value == NULL) continue;
        PyObject *name = PyTuple_GET_ITEM(code->co_localsplusnames, i);
        if (PyDict_SetItem(locals, name, value) < 0) { Py_DECREF(locals); return NULL; }
    }
    return locals;
}

static PyObject *make_frame_view(Frame *frame, PyObject *locals) {
    FrameView *view = PyObject_New(FrameView, &FrameViewType);
    if (view == NULL) return NULL;
    view->f_code = Py_NewRef(FRAME_CODE(frame));
    view->f_func = Py_NewRef(FRAME_FUNC(frame));
    view->f_globals = Py_NewRef(frame->f_globals);
    view->f_builtins = Py_NewRef(frame->f_builtins);
    view->f_locals = Py_NewRef(locals);
    return (PyObject *)view;
}

/* ---- cache walk ----------------------------------------------------------------- */
/* Returns a new reference to the replacement code of the first entry whose check
 * passes (moving it to the front), Py_None if none passes, NULL on error. */
static PyObject *cache_lookup(CodeExtra *extra, PyObject *locals, PyObject *globals) {
    PyObject *entries = extra->entries;
    if (entries == NULL) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        Py_INCREF(entry);
        PyObject *args[2] = {locals, globals};
        PyObject *check = PyTuple_GET_ITEM(entry, 0);
        PyObject *ok = check == Py_None ? Py_NewRef(Py_True) : PyObject_Vectorcall(check, args, 2, NULL);
        int passed = ok != NULL && PyObject_IsTrue(ok) == 1;
        Py_XDECREF(ok);
        if (ok == NULL || PyErr_Occurred()) PyErr_Clear();  /* a check that raises fails */
        if (passed) {
            PyObject *code = Py_NewRef(PyTuple_GET_ITEM(entry, 1));
            if (i > 0 && i < PyList_GET_SIZE(entries) && PyList_GET_ITEM(entries, i) == entry) {
                /* move to front: shift [0, i) right by one */
                PyObject **items = ((PyListObject *)entries)->ob_item;
                memmove(items + 1, items, i * sizeof(PyObject *));
                items[0] = entry;
            }
            Py_DECREF(entry);
            return code;
        }
        Py_DECREF(entry);
    }
    Py_RETURN_NONE;
}

/* ---- running frames ------------------------------------------------------------- */
#if !FRAME_CALLER_CLEARS
/* 3.12: the eval function owns the frame it was given.  When that frame never runs we
 * must release its references and pop it from the thread's data stack ourselves.  The
 * frame never started, so no frame object exists and it is the top of the stack. */
static void release_unstarted_frame(PyThreadState *tstate, Frame *frame) {
    for (int i = 0; i < frame->stacktop; i++) Py_CLEAR(frame->localsplus[i]);
    Py_CLEAR(frame->f_locals);
    Py_CLEAR(frame->f_funcobj);
    Py_DECREF(frame->f_code);
    PyObject **base = (PyObject **)frame;
    _PyStackChunk *chunk = tstate->datastack_chunk;
    if (base == &chunk->data[0]) {
        _PyStackChunk *previous = chunk->previous;
        PyObjectArenaAllocator arena;
        PyObject_GetArenaAllocator(&arena);
        tstate->datastack_top = &previous->data[previous->top];
        tstate->datastack_chunk = previous;
        tstate->datastack_limit = (PyObject **)(((char *)previous) + previous->size);
        arena.free(arena.ctx, chunk, chunk->size);
    } else {
        tstate->datastack_top = base;
    }
}
#define RELEASE_FRAME(tstate, frame) release_unstarted_frame(tstate, frame)
#else
#define RELEASE_FRAME(tstate, frame) ((void)0)  /* 3.11: _PyEval_Vector clears it */
#endif

static int arg_slot_count(PyCodeObject *code) {
    return code->co_argcount + code->co_kwonlyargcount +
           ((code->co_flags & CO_VARARGS) ? 1 : 0) + ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

/* ---- function objects for replacements ------------------------------------------------
 * A replacement runs through a function object sharing the original's globals, builtins,
 * closure and name. Making and freeing one per call is a large part of a cache hit's cost, so
 * a few idle ones wait in a pool: taking one fills in the replacement's code and the
 * original's fields; it goes back only when nothing but us holds it (the frame that ran it is
 * gone: a frame object kept by a traceback or sys._getframe() holds a reference), emptied first
 * (an empty code object and dict, no closure) so that an idle one keeps nothing alive.
 * Recursion and other threads find the pool empty, or take another one. */
#define FUNCTION_POOL_SIZE 4
static PyObject *function_pool[FUNCTION_POOL_SIZE];
static int function_pool_count = 0;
static PyObject *idle_code = NULL;     /* what an idle function holds as its code */
static PyObject *idle_globals = NULL;  /* ... and as its globals and builtins (an empty dict) */

static PyObject *take_function(Frame *frame, PyObject *replacement) {
    PyFunctionObject *original = FRAME_FUNC(frame), *func;
    if (function_pool_count == 0) {
        func = (PyFunctionObject *)PyFunction_NewWithQualName(replacement, frame->f_globals,
                                                              original->func_qualname);
        if (func == NULL) return NULL;
    } else {
        func = (PyFunctionObject *)function_pool[--function_pool_count];
    }
    /* An idle function's old fields are the idle objects (kept alive by these statics),
     * strings or NULL; a new one's are the values set here: releasing them runs no Python
     * code. The module is the original's: 3.12's sys._getframemodulename() reads it (and
     * namedtuple, enum, dataclasses, typing use it for __module__). */
    Py_SETREF(func->func_code, Py_NewRef(replacement));
    Py_SETREF(func->func_globals, Py_NewRef(frame->f_globals));
    Py_SETREF(func->func_builtins, Py_NewRef(frame->f_builtins));
    Py_SETREF(func->func_name, Py_NewRef(((PyCodeObject *)replacement)->co_name));
    Py_SETREF(func->func_qualname, Py_NewRef(original->func_qualname));
    Py_XSETREF(func->func_module, Py_XNewRef(original->func_module));
    Py_XSETREF(func->func_closure, Py_XNewRef(original->func_closure));
    func->func_version = 0;
    return (PyObject *)func;
}

/* Drop our reference to a function that ran a replacement, keeping it idle in the pool when
 * we hold its only reference and no one gave it attributes of its own. */
static void give_back_function(PyObject *op) {
    PyFunctionObject *func = (PyFunctionObject *)op;
    if (Py_REFCNT(op) != 1 || function_pool_count == FUNCTION_POOL_SIZE || func->func_dict ||
        func->func_weakreflist || func->func_defaults || func->func_kwdefaults ||
#if PY_VERSION_HEX >= 0x030C0000
        func->func_typeparams ||
#endif
        func->func_annotations) {
        Py_DECREF(op);
        return;
    }
    /* swap first, release after: the last reference to a globals dict or a closure may go
     * here, and its finalizers may run a replacement (and use the pool) */
    PyObject *code = func->func_code, *globals = func->func_globals;
    PyObject *builtins = func->func_builtins, *closure = func->func_closure;
    PyObject *module = func->func_module;
    func->func_code = Py_NewRef(idle_code);
    func->func_globals = Py_NewRef(idle_globals);
    func->func_builtins = Py_NewRef(idle_globals);
    func->func_closure = NULL;
    func->func_module = NULL;
    function_pool[function_pool_count++] = op;
    Py_DECREF(code);
    Py_DECREF(globals);
    Py_DECREF(builtins);
    Py_XDECREF(closure);
    Py_XDECREF(module);
}

/* Run `replacement` with the original frame's argument slots as positional arguments,
 * through a function object sharing the original's globals, closure and name. */
static PyObject *run_replacement(PyThreadState *tstate, Frame *frame, PyObject *replacement) {
    PyObject *result = NULL;
    CodeExtra *extra = get_extra((PyCodeObject *)replacement, 1);
    if (extra == NULL) goto done;
    extra->skip = 1;  /* the replacement itself always runs as is */
    PyObject *func = take_function(frame, replacement);
    if (func == NULL) goto done;
    result = PyObject_Vectorcall(func, frame->localsplus, arg_slot_count(FRAME_CODE(frame)), NULL);
    give_back_function(func);
done:
    RELEASE_FRAME(tstate, frame);
    return result;
}

static int frame_is_interceptable(PyThreadState *tstate, Frame *frame, int throw_flag) {
    PyCodeObject *code = FRAME_CODE(frame);
    return !throw_flag && frame->owner == FRAME_OWNED_BY_THREAD &&
           (code->co_flags & CO_OPTIMIZED) && !(code->co_flags & SKIP_FLAGS) &&
           FRAME_IS_FRESH(frame) && !tracing_active(tstate);
}

/* Ask the cache, then the callback.  Returns a new reference: a code object to run,
 * Py_None to run the frame as is, or NULL with an exception set. */
static PyObject *decide(Frame *frame, CodeExtra *extra, PyObject *callback) {
    PyObject *locals = frame_locals(frame);
    if (locals == NULL) return NULL;
    PyObject *answer = cache_lookup(extra, locals, frame->f_globals);
    if (answer != Py_None) {
        counter_hits++;
        Py_DECREF(locals);
        return answer;
    }
    Py_DECREF(answer);
    counter_misses++;
    PyObject *view = make_frame_view(frame, locals);
    Py_DECREF(locals);
    if (view == NULL) return NULL;
    answer = PyObject_CallOneArg(callback, view);
    Py_DECREF(view);
    if (answer == skip_sentinel) {
        extra->skip = SKIP_CODE;
        Py_DECREF(answer);
        Py_RETURN_NONE;
    }
    if (answer == disable_sentinel) {
        extra->skip = SKIP_DISABLED;
        return answer;
    }
    if (answer != NULL && answer != Py_None && !PyCode_Check(answer)) {
        PyErr_Format(PyExc_TypeError, "frame callback must return None, SKIP or a code "
                     "object, not %.100s", Py_TYPE(answer)->tp_name);
        Py_CLEAR(answer);
    }
    return answer;
}

/* Run the frame as is with capture off in this thread until it returns. */
static PyObject *run_disabled(ThreadFlags *t, PyThreadState *tstate, Frame *frame,
                              int throw_flag) {
    counter_disabled_runs++;
    t->disabled++;
    PyObject *result = _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    t->disabled--;
    return result;
}

/* Ask the disable filter about a code object once per filter (with the hook off for this
 * thread); a filter that raises is reported as unraisable and counts as "no". A mark of an
 * earlier filter goes when the current one (or none) does not give it again. */
static void apply_disable_filter(ThreadFlags *t, PyCodeObject *code, CodeExtra *extra) {
    extra->filtered = filter_generation;
    if (extra->skip == SKIP_DISABLED) extra->skip = 0;
    if (disable_filter == NULL) return;
    PyObject *filter = Py_NewRef(disable_filter);
    t->busy++;
    PyObject *answer = PyObject_CallOneArg(filter, (PyObject *)code);
    t->busy--;
    int disabled = answer == NULL ? -1 : PyObject_IsTrue(answer);
    Py_XDECREF(answer);
    if (disabled < 0) PyErr_WriteUnraisable(filter);
    if (disabled > 0) extra->skip = SKIP_DISABLED;
    Py_DECREF(filter);
}

static PyObject *eval_frame(PyThreadState *tstate, Frame *frame, int throw_flag) {
    ThreadFlags *t = this_thread();
    PyObject *callback = t->callback;
    if (callback == NULL || t->busy || t->disabled || process_disabled)
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    /* a throw carries its exception in the thread state: no Python runs, nothing is cleared */
    CodeExtra *extra = get_extra(FRAME_CODE(frame), !throw_flag);
    if (extra == NULL) {  /* no mark yet, or no memory for one: run the frame as is */
        if (!throw_flag) PyErr_Clear();
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }
    if (extra->filtered != filter_generation && !throw_flag)
        apply_disable_filter(t, FRAME_CODE(frame), extra);
    if (extra->skip == SKIP_DISABLED) return run_disabled(t, tstate, frame, throw_flag);
    if (extra->skip || !frame_is_interceptable(tstate, frame, throw_flag))
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    Py_INCREF(callback);
    t->busy++;
    PyObject *answer = decide(frame, extra, callback);
    t->busy--;
    Py_DECREF(callback);
    if (answer == NULL) { RELEASE_FRAME(tstate, frame); return NULL; }
    if (answer == Py_None) {
        Py_DECREF(answer);
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }
    if (answer == disable_sentinel) {
        Py_DECREF(answer);
        return run_disabled(t, tstate, frame, throw_flag);
    }
    PyObject *result = run_replacement(tstate, frame, answer);
    Py_DECREF(answer);
    return result;
}
#endif  /* JIT_HOOK_SUPPORTED */

/* ---- module functions ------------------------------------------------------------ */
#if !JIT_HOOK_SUPPORTED
static PyObject *unsupported(void) {
    PyErr_Format(PyExc_RuntimeError, "framejit's frame hook supports CPython 3.11 and 3.12; "
                 "this interpreter is %s", Py_GetVersion());
    return NULL;
}
#endif

/* Make `callback` (NULL for none) this thread's callback; returns the previous one (a
 * reference handed to the caller).  The eval function is installed while any thread has
 * a callback. */
static PyObject *swap_callback(ThreadFlags *t, PyObject *callback) {
#if JIT_HOOK_SUPPORTED
    PyObject *previous = t->callback;
    Py_XINCREF(callback);
    if (previous == NULL && callback != NULL && active_threads++ == 0) install_eval_frame(1);
    if (previous != NULL && callback == NULL && --active_threads == 0) install_eval_frame(0);
    t->callback = callback;
    return previous;
#else
    return NULL;
#endif
}

static PyObject *set_callback(PyObject *module, PyObject *callback) {
#if !JIT_HOOK_SUPPORTED
    if (callback != Py_None) return unsupported();
#endif
    PyObject *previous = swap_callback(this_thread(), callback == Py_None ? NULL : callback);
    return previous ? previous : Py_NewRef(Py_None);
}

/* ---- ScopedCall: call a function with a callback installed, without a Python frame ---- */
typedef struct {
    PyObject_HEAD
    PyObject *fn, *callback, *dict, *weakreflist;
    vectorcallfunc vectorcall;
} ScopedCall;

/* callback None: call with no callback; DISABLE: with no callback and capture off in this
 * thread (nested ScopedCalls then leave theirs uninstalled); a callback: install it, unless
 * capture is off, when fn is simply called. */
static PyObject *scoped_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    ScopedCall *self = (ScopedCall *)op;
    ThreadFlags *t = this_thread();
    int disabling = self->callback == disable_sentinel;
    if (!disabling && self->callback != Py_None && (t->disabled || process_disabled))
        return PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    PyObject *previous = swap_callback(
        t, self->callback == Py_None || disabling ? NULL : self->callback);
    t->disabled += disabling;
    PyObject *result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    t->disabled -= disabling;
    PyObject *ours = swap_callback(t, previous);
    Py_XDECREF(previous);
    Py_XDECREF(ours);
    return result;
}

static PyObject *scoped_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fn, *callback;
    if (!PyArg_ParseTuple(args, "OO:ScopedCall", &fn, &callback)) return NULL;
    if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "ScopedCall: fn must be callable");
    ScopedCall *self = (ScopedCall *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->fn = Py_NewRef(fn);
    self->callback = Py_NewRef(callback);
    self->vectorcall = scoped_vectorcall;
    return (PyObject *)self;
}

static int scoped_traverse(ScopedCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->fn);
    Py_VISIT(self->callback);
    Py_VISIT(self->dict);
    return 0;
}

static int scoped_clear(ScopedCall *self) {
    Py_CLEAR(self->fn);
    Py_CLEAR(self->callback);
    Py_CLEAR(self->dict);
    return 0;
}

static void scoped_dealloc(ScopedCall *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist) PyObject_ClearWeakRefs((PyObject *)self);
    scoped_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *scoped_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyMemberDef scoped_members[] = {
    {"fn", T_OBJECT, offsetof(ScopedCall, fn), READONLY, "the wrapped callable"},
    {"callback", T_OBJECT, offsetof(ScopedCall, callback), READONLY, "the frame callback"},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ScopedCall, weakreflist), READONLY},
    {"__dictoffset__", T_PYSSIZET, offsetof(ScopedCall, dict), READONLY},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(ScopedCall, vectorcall), READONLY},
    {NULL},
};

static PyGetSetDef scoped_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyTypeObject ScopedCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.ScopedCall",
    .tp_basicsize = sizeof(ScopedCall),
    .tp_dealloc = (destructor)scoped_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "ScopedCall(fn, callback): calls fn with callback as this thread's frame "
              "callback (None: no callback), restoring the previous one afterwards.",
    .tp_traverse = (traverseproc)scoped_traverse,
    .tp_clear = (inquiry)scoped_clear,
    .tp_members = scoped_members,
    .tp_getset = scoped_getset,
    .tp_descr_get = scoped_get,
    .tp_new = scoped_new,
    .tp_vectorcall_offset = offsetof(ScopedCall, vectorcall),
    .tp_weaklistoffset = offsetof(ScopedCall, weakreflist),
    .tp_dictoffset = offsetof(ScopedCall, dict),
};

static PyObject *get_callback(PyObject *module, PyObject *unused) {
#if JIT_HOOK_SUPPORTED
    return Py_NewRef(thread_callback ? thread_callback : Py_None);
#else
    Py_RETURN_NONE;
#endif
}

/* is_current_callback(reference) is `reference() is get_callback()` for a weak reference
 * (the scope guard of every cache entry, `dynamo.driver.JitScopeGuard`), without two calls. */
static PyObject *is_current_callback(PyObject *module, PyObject *reference) {
    if (!PyWeakref_Check(reference))
        return PyErr_Format(PyExc_TypeError, "is_current_callback: expected a weak reference");
#if JIT_HOOK_SUPPORTED
    PyObject *current = thread_callback ? thread_callback : Py_None;
#else
    PyObject *current = Py_None;
#endif
    return PyBool_FromLong(PyWeakref_GET_OBJECT(reference) == current);
}

#if JIT_HOOK_SUPPORTED
static PyCodeObject *code_arg(PyObject *arg) {
    if (!PyCode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "expected a code object, got %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return (PyCodeObject *)arg;
}
#endif

static PyObject *cache_entries(PyObject *module, PyObject *arg) {
#if JIT_HOOK_SUPPORTED
    PyCodeObject *code = code_arg(arg);
    CodeExtra *extra = code ? get_extra(code, 1) : NULL;
    if (extra == NULL) return NULL;
    if (extra->entries == NULL && (extra->entries = PyList_New(0)) == NULL) return NULL;
    return Py_NewRef(extra->entries);
#else
    return unsupported();
#endif
}

static PyObject *set_skip(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
#if JIT_HOOK_SUPPORTED
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "set_skip(code, flag)");
    PyCodeObject *code = code_arg(args[0]);
    CodeExtra *extra = code ? get_extra(code, 1) : NULL;
    int flag = PyObject_IsTrue(args[1]);
    if (extra == NULL || flag < 0) return NULL;
    extra->skip = flag;
    extra->filtered = 0;  /* unmarked: the disable filter answers again */
    Py_RETURN_NONE;
#else
    return unsupported();
#endif
}

static PyObject *get_skip(PyObject *module, PyObject *arg) {
#if JIT_HOOK_SUPPORTED
    PyCodeObject *code = code_arg(arg);
    if (code == NULL) return NULL;
    CodeExtra *extra = get_extra(code, 0);
    if (extra == NULL && PyErr_Occurred()) return NULL;
    return PyBool_FromLong(extra != NULL && extra->skip);
#else
    Py_RETURN_FALSE;
#endif
}

/* Capture off: adjust_thread_disabled(delta) changes this thread's depth and returns the new
 * one; set_process_disabled(flag) sets the process-wide flag and returns the previous one. */
static PyObject *adjust_thread_disabled(PyObject *module, PyObject *arg) {
    long delta = PyLong_AsLong(arg);
    if (delta == -1 && PyErr_Occurred()) return NULL;
    if (thread_disabled + delta < 0)
        return PyErr_Format(PyExc_ValueError, "capture-off depth would go below zero");
    thread_disabled += (int)delta;
    return PyLong_FromLong(thread_disabled);
}

static PyObject *set_process_disabled(PyObject *module, PyObject *arg) {
    int flag = PyObject_IsTrue(arg);
    if (flag < 0) return NULL;
    int previous = process_disabled;
    process_disabled = flag;
    return PyBool_FromLong(previous);
}

/* The filter marking code objects DISABLE on first sight (None: none from now on); returns
 * the previous one. Every code object is asked again on its next run: marks of the previous
 * filter do not outlive it (a test's filter answered for code the real one would mark). */
static PyObject *set_disable_filter(PyObject *module, PyObject *filter) {
    if (filter != Py_None && !PyCallable_Check(filter))
        return PyErr_Format(PyExc_TypeError, "set_disable_filter: expected a callable or None");
    PyObject *previous = disable_filter;
    disable_filter = filter == Py_None ? NULL : Py_NewRef(filter);
    filter_generation++;
    return previous ? previous : Py_NewRef(Py_None);
}

static PyObject *counters(PyObject *module, PyObject *unused) {
#if JIT_HOOK_SUPPORTED
    return Py_BuildValue("{sKsKsKsisO}", "hits", counter_hits, "misses", counter_misses,
                         "disabled_runs", counter_disabled_runs, "active_threads", active_threads,
                         "installed", eval_frame_installed() ? Py_True : Py_False);
#else
    return Py_BuildValue("{sisisisisO}", "hits", 0, "misses", 0, "disabled_runs", 0,
                         "active_threads", 0,
                         "installed", Py_False);
#endif
}

static PyMethodDef methods[] = {
    {"set_callback", set_callback, METH_O,
     "Set this thread's frame callback (None removes it); returns the previous one."},
    {"get_callback", get_callback, METH_NOARGS, "This thread's frame callback or None."},
    {"is_current_callback", is_current_callback, METH_O,
     "Whether a weak reference's object is this thread's frame callback (None: no callback)."},
    {"cache_entries", cache_entries, METH_O,
     "The live list of (check, code) cache entries of a code object."},
    {"set_skip", (PyCFunction)(void (*)(void))set_skip, METH_FASTCALL,
     "Mark or unmark a code object as never intercepted."},
    {"get_skip", get_skip, METH_O, "Whether a code object is marked skip."},
    {"adjust_thread_disabled", adjust_thread_disabled, METH_O,
     "Add to this thread's capture-off depth; returns the new depth."},
    {"set_process_disabled", set_process_disabled, METH_O,
     "Turn capture off (True) or on in every thread; returns the previous flag."},
    {"set_disable_filter", set_disable_filter, METH_O,
     "Set the filter(code) -> bool that marks code DISABLE on first sight; returns the old."},
    {"counters", counters, METH_NOARGS,
     "Cache hits and misses, frames run with capture off by a DISABLE mark, threads with a "
     "callback, whether the eval function is set."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "dynamo._C",
    "framejit's PEP 523 frame hook: mechanism only (see dynamo.hook).", -1, methods,
};

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
#if JIT_HOOK_SUPPORTED
    extra_index = REQUEST_EXTRA_INDEX(free_extra);
    if (extra_index < 0 || PyType_Ready(&FrameViewType) < 0) goto error;
    idle_code = (PyObject *)PyCode_NewEmpty("<framejit>", "<idle>", 0);
    idle_globals = PyDict_New();
    if (idle_code == NULL || idle_globals == NULL) goto error;
    if (PyModule_AddObjectRef(module, "FrameView", (PyObject *)&FrameViewType) < 0) goto error;
#endif
    if (PyType_Ready(&ScopedCallType) < 0 ||
        PyModule_AddObjectRef(module, "ScopedCall", (PyObject *)&ScopedCallType) < 0)
        goto error;
    skip_sentinel = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (skip_sentinel == NULL || PyModule_AddObjectRef(module, "SKIP", skip_sentinel) < 0)
        goto error;
    disable_sentinel = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (disable_sentinel == NULL ||
        PyModule_AddObjectRef(module, "DISABLE", disable_sentinel) < 0)
        goto error;
    if (PyModule_AddIntConstant(module, "SUPPORTED", JIT_HOOK_SUPPORTED) < 0) goto error;
    return module;
error:
    Py_DECREF(module);
    return NULL;
}
