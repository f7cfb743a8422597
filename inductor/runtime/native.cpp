// inductor.runtime._native: host-side helpers of compiled graphs' wrappers (stage: run).
//
// Input: what a generated wrapper passes per call. Output: tensors. Built on first use against
// the installed torch's headers by guards.native.build_extension (see native.py).
//
//   empty_strided(sizes, strides, dtype, device) -> Tensor
//   storages_shared(values) -> bool
//
// The same tensor as torch.empty_strided(sizes, strides, dtype=dtype, device=device), through
// at::empty_strided (so the dispatcher, dispatch modes and the device's caching allocator all
// apply), without torch's Python argument parser: a wrapper allocates every buffer it does not
// reuse on each call, and on a GPU host-bound call that parsing is a visible share of the call.
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <vector>

namespace {

// The integers of a tuple (or list) into `out`; false with an exception set otherwise.
bool read_ints(PyObject* sequence, std::vector<int64_t>& out, const char* what) {
  PyObject* fast = PySequence_Fast(sequence, what);
  if (fast == nullptr) return false;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  out.resize(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; i++) {
    long long value = PyLong_AsLongLong(items[i]);
    if (value == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out[static_cast<size_t>(i)] = value;
  }
  Py_DECREF(fast);
  return true;
}

PyObject* empty_strided(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "empty_strided(sizes, strides, dtype, device)");
    return nullptr;
  }
  if (!THPDtype_Check(args[2]) || !THPDevice_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError, "empty_strided: dtype and device must be a torch.dtype "
                                     "and a torch.device");
    return nullptr;
  }
  std::vector<int64_t> sizes, strides;
  if (!read_ints(args[0], sizes, "empty_strided: sizes must be a sequence of ints") ||
      !read_ints(args[1], strides, "empty_strided: strides must be a sequence of ints"))
    return nullptr;
  if (sizes.size() != strides.size()) {
    PyErr_SetString(PyExc_ValueError, "empty_strided: sizes and strides differ in length");
    return nullptr;
  }
  auto dtype = reinterpret_cast<THPDtype*>(args[2])->scalar_type;
  auto device = reinterpret_cast<THPDevice*>(args[3])->device;
  HANDLE_TH_ERRORS  // torch's own translation: the exception torch.empty_strided would raise
  at::Tensor result =
      at::empty_strided(sizes, strides, at::TensorOptions().dtype(dtype).device(device));
  return THPVariable_Wrap(std::move(result));
  END_HANDLE_TH_ERRORS
}

// Whether two tensors of a sequence share a storage (other items are skipped): the per-call
// check of compiled graphs that write into inputs (compiled_graph.StoragePattern), one pointer
// read per tensor instead of a Python storage object (0.2 us each from Python).
PyObject* storages_shared(PyObject*, PyObject* sequence) {
  PyObject* fast = PySequence_Fast(sequence, "storages_shared: expected a sequence");
  if (fast == nullptr) return nullptr;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  std::vector<const void*> storages;
  storages.reserve(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; i++) {
    if (!THPVariable_Check(items[i])) continue;
    const at::Tensor& tensor = THPVariable_Unpack(items[i]);
    if (tensor.has_storage()) storages.push_back(tensor.storage().unsafeGetStorageImpl());
  }
  Py_DECREF(fast);
  std::sort(storages.begin(), storages.end());
  bool shared = std::adjacent_find(storages.begin(), storages.end()) != storages.end();
  return PyBool_FromLong(shared);
}

PyMethodDef methods[] = {
    {"empty_strided", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(empty_strided)),
     METH_FASTCALL,
     "empty_strided(sizes, strides, dtype, device): torch.empty_strided without the Python "
     "argument parser."},
    {"storages_shared", storages_shared, METH_O,
     "storages_shared(values): whether two tensors of the sequence share a storage."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_native",
                          "Host-side helpers of inductor's generated wrappers.", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module_def); }
