// The torch global-state step of a guard program (stage: guard; included by tensor_match.cpp).
//
// Input: the snapshot a `GlobalStateGuard` took at capture (guards/kinds/state.py, in the form
// `native_state_spec` gives). Output: whether torch's global state now equals it, read in C++
// (~10 ns in all, against ~60-150 ns per Python-level getter call, eight to ten per check).
// The semantics are the Python conditions' (`state_conditions`), which stay the reference
// (tests/guards/test_guard_state_native.py compares the two):
//
//   grad mode, inference mode;
//   autocast: when none was enabled at capture, none may be enabled now on any device (torch's
//     `_is_any_autocast_enabled`); else, for cpu and cuda, the enabled flag, and the dtype only
//     where enabled;
//   the default dtype, deterministic algorithms (warn-only only while deterministic), the float32
//   matmul precision, the cuBLAS and cuDNN TF32 flags.
//
// "Any autocast": a device's autocast is on exactly when its Autocast dispatch key is not in the
// thread's excluded set (at::autocast::is_autocast_enabled). When every key of
// c10::autocast_dispatch_keyset is excluded, no device has it on; otherwise the answer is asked of
// torch's own `_is_any_autocast_enabled` (the spec carries it), whose device list varies between
// torch versions. A getter that throws (torch's TF32 flag checks its legacy and new settings
// agree) fails the step, as the exception fails the Python check.
//
// The C++ API used exists in torch 2.4 and later (the autocast calls by device type); older
// headers build the helper without this step (`HAS_STATE_STEP` false: Python conditions).
#pragma once

#include <Python.h>

#include <torch/version.h>

#define JIT_STATE_STEP (TORCH_VERSION_MAJOR > 2 || \
                        (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

#if JIT_STATE_STEP
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/Device.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/tensor/python_tensor.h>

#include <string>
#include <vector>

namespace global_state {

struct Autocast {
  c10::DeviceType device = c10::DeviceType::CPU;
  bool enabled = false;
  c10::ScalarType dtype = c10::ScalarType::Undefined;  // only read while enabled
};

struct Snapshot {
  bool grad_enabled = true, inference_mode = false, any_autocast = false;
  std::vector<Autocast> autocast;
  c10::ScalarType default_dtype = c10::ScalarType::Float;
  bool deterministic = false, warn_only = false;
  at::Float32MatmulPrecision matmul_precision = at::Float32MatmulPrecision::HIGHEST;
  bool cublas_tf32 = false, cudnn_tf32 = true;
  PyObject* any_autocast_enabled = nullptr;  // borrowed: the program's operands own the spec
};

inline bool read_bool(PyObject* value, bool& out) {
  if (!PyBool_Check(value)) {
    PyErr_SetString(PyExc_TypeError, "a global-state flag must be a bool");
    return false;
  }
  out = value == Py_True;
  return true;
}

inline bool read_dtype(PyObject* value, c10::ScalarType& out) {
  if (value == Py_None) return true;  // an autocast dtype while disabled: never read
  if (!THPDtype_Check(value)) {
    PyErr_SetString(PyExc_TypeError, "a global-state dtype must be a torch.dtype");
    return false;
  }
  out = reinterpret_cast<THPDtype*>(value)->scalar_type;
  return true;
}

inline bool read_precision(PyObject* value, at::Float32MatmulPrecision& out) {
  const char* text = PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : nullptr;
  std::string name = text ? text : "";
  if (name == "highest") out = at::Float32MatmulPrecision::HIGHEST;
  else if (name == "high") out = at::Float32MatmulPrecision::HIGH;
  else if (name == "medium") out = at::Float32MatmulPrecision::MEDIUM;
  else {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "unknown float32 matmul precision");
    return false;
  }
  return true;
}

inline bool read_autocast(PyObject* entries, std::vector<Autocast>& out) {
  if (!PyTuple_CheckExact(entries)) {
    PyErr_SetString(PyExc_TypeError, "autocast entries must be a tuple");
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(entries); i++) {
    PyObject *device, *enabled, *dtype;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(entries, i), "UOO;an autocast entry is (device, "
                          "enabled, dtype)", &device, &enabled, &dtype))
      return false;
    Autocast entry;
    try {
      entry.device = c10::Device(std::string(PyUnicode_AsUTF8(device))).type();
    } catch (...) {
      PyErr_SetString(PyExc_ValueError, "unknown autocast device");
      return false;
    }
    if (!read_bool(enabled, entry.enabled) || !read_dtype(dtype, entry.dtype)) return false;
    out.push_back(entry);
  }
  return true;
}

// The snapshot from (grad_enabled, inference_mode, any_autocast, ((device, enabled, dtype), ...),
// default_dtype, deterministic, warn_only, matmul_precision, cublas_tf32, cudnn_tf32,
// is_any_autocast_enabled).
inline bool parse(PyObject* spec, Snapshot& out) {
  PyObject *grad, *inference, *any, *autocast, *dtype, *deterministic, *warn_only, *precision,
      *cublas, *cudnn, *any_function;
  if (!PyArg_ParseTuple(spec, "OOOOOOOOOOO;a global-state spec has 11 fields", &grad,
                        &inference, &any, &autocast, &dtype, &deterministic, &warn_only,
                        &precision, &cublas, &cudnn, &any_function))
    return false;
  if (dtype == Py_None || !PyCallable_Check(any_function)) {
    PyErr_SetString(PyExc_TypeError, "a global-state spec needs a default dtype and a callable");
    return false;
  }
  out.any_autocast_enabled = any_function;
  return read_bool(grad, out.grad_enabled) && read_bool(inference, out.inference_mode) &&
         read_bool(any, out.any_autocast) && read_autocast(autocast, out.autocast) &&
         read_dtype(dtype, out.default_dtype) && read_bool(deterministic, out.deterministic) &&
         read_bool(warn_only, out.warn_only) && read_precision(precision, out.matmul_precision) &&
         read_bool(cublas, out.cublas_tf32) && read_bool(cudnn, out.cudnn_tf32);
}

// 1: no device has autocast on, 0: one has, -1: an exception is set.
inline int no_autocast(const Snapshot& expected) {
  c10::DispatchKeySet excluded = c10::impl::tls_local_dispatch_key_set().excluded_;
  if ((excluded & c10::autocast_dispatch_keyset) == c10::autocast_dispatch_keyset) return 1;
  PyObject* answer = PyObject_CallNoArgs(expected.any_autocast_enabled);
  if (answer == nullptr) return -1;
  int truth = PyObject_IsTrue(answer);
  Py_DECREF(answer);
  return truth < 0 ? -1 : truth == 0;
}

inline bool same_autocast(const Snapshot& expected) {
  for (const Autocast& entry : expected.autocast) {
    if (at::autocast::is_autocast_enabled(entry.device) != entry.enabled) return false;
    if (entry.enabled && at::autocast::get_autocast_dtype(entry.device) != entry.dtype)
      return false;
  }
  return true;
}

// 1: the state now is the snapshot, 0: it is not, -1: an exception is set.
inline int holds(const Snapshot& expected) {
  try {
    if (c10::GradMode::is_enabled() != expected.grad_enabled ||
        c10::InferenceMode::is_enabled() != expected.inference_mode)
      return 0;
    if (!expected.any_autocast) {
      int none = no_autocast(expected);
      if (none != 1) return none;
    } else if (!same_autocast(expected)) {
      return 0;
    }
    if (torch::tensors::get_default_scalar_type() != expected.default_dtype) return 0;
    at::Context& context = at::globalContext();
    if (context.deterministicAlgorithms() != expected.deterministic) return 0;
    if (expected.deterministic &&
        context.deterministicAlgorithmsWarnOnly() != expected.warn_only)
      return 0;
    return context.float32MatmulPrecision() == expected.matmul_precision &&
           context.allowTF32CuBLAS() == expected.cublas_tf32 &&
           context.allowTF32CuDNN() == expected.cudnn_tf32;
  } catch (...) {
    return 0;
  }
}

}  // namespace global_state
#endif  // JIT_STATE_STEP
