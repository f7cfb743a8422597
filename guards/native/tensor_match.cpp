// guards.native._tensor_match: every tensor of a guard set checked in one call (stage: guard).
//
// Input: the tensors a compiled check fetched from the frame, in the order of its tensor guards.
// Output: True when each has exactly the expected properties, else False. Mechanism only: the
// expectations come from guards.kinds.tensors.TensorProperties, and the Python conditions that
// guards/kinds/tensors.py generates stay the reference (tests compare the two on generated
// tensors). Built on first use against the installed torch's headers (see __init__.py), because
// torch's Python getters cost ~50-90 ns each while the fields behind them cost ~1 ns.
//
//   matcher = TensorMatcher([(type, dtype, device, requires_grad, layout, sizes, strides,
//                             inference, neg, conj), ...])     # sizes/strides: None = any
//   matcher(x, y, ...) -> bool
#include <Python.h>

#include <c10/core/TensorImpl.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace {

constexpr int64_t kAny = std::numeric_limits<int64_t>::min();

struct Expected {
  PyTypeObject* type = nullptr;  // borrowed: the matcher's `types` tuple owns it
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  bool requires_grad = false;
  c10::Layout layout = c10::Layout::Strided;
  std::vector<int64_t> sizes;
  bool has_strides = false;
  std::vector<int64_t> strides;
  bool inference = false, neg = false, conj = false;
};

bool same_entries(c10::IntArrayRef got, const std::vector<int64_t>& expected) {
  if (got.size() != expected.size()) return false;
  for (size_t i = 0; i < expected.size(); i++)
    if (expected[i] != kAny && got[i] != expected[i]) return false;
  return true;
}

bool matches(PyObject* object, const Expected& expected) {
  if (Py_TYPE(object) != expected.type) return false;
  try {
    const at::Tensor& tensor = THPVariable_Unpack(object);
    if (!tensor.defined()) return false;
    c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
    if (impl->dtype().toScalarType() != expected.dtype) return false;
    if (expected.device.type() == c10::DeviceType::CPU) {
      if (impl->device_type() != c10::DeviceType::CPU) return false;
    } else if (impl->device() != expected.device) {
      return false;
    }
    if (impl->requires_grad() != expected.requires_grad) return false;
    if (impl->layout() != expected.layout) return false;
    if (impl->is_inference() != expected.inference || impl->is_neg() != expected.neg ||
        impl->is_conj() != expected.conj)
      return false;
    if (!same_entries(impl->sizes(), expected.sizes)) return false;
    if (expected.has_strides && !same_entries(impl->strides(), expected.strides)) return false;
    return true;
  } catch (...) {  // symbolic sizes, no strides, no device: not the tensor we compiled for
    return false;
  }
}

// ---- building expectations from Python values ------------------------------------------------

bool read_entries(PyObject* values, std::vector<int64_t>& out) {
  PyObject* sequence = PySequence_Fast(values, "sizes and strides must be sequences");
  if (sequence == nullptr) return false;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
  for (Py_ssize_t i = 0; i < count; i++) {
    PyObject* item = PySequence_Fast_GET_ITEM(sequence, i);
    int64_t value = kAny;
    if (item != Py_None) {
      value = PyLong_AsLongLong(item);
      if (value == -1 && PyErr_Occurred()) {
        Py_DECREF(sequence);
        return false;
      }
    }
    out.push_back(value);
  }
  Py_DECREF(sequence);
  return true;
}

bool read_flag(PyObject* value, bool& out) {
  int truth = PyObject_IsTrue(value);
  out = truth == 1;
  return truth >= 0;
}

bool read_expected(PyObject* spec, Expected& out) {
  PyObject *type, *dtype, *device, *requires_grad, *layout, *sizes, *strides, *inference, *neg,
      *conj;
  if (!PyArg_ParseTuple(spec, "OOOOOOOOOO;a tensor spec is (type, dtype, device, "
                        "requires_grad, layout, sizes, strides, inference, neg, conj)",
                        &type, &dtype, &device, &requires_grad, &layout, &sizes, &strides,
                        &inference, &neg, &conj))
    return false;
  if (!PyType_Check(type) || !PyObject_IsSubclass(type, THPVariableClass)) {
    PyErr_SetString(PyExc_TypeError, "the expected type must be a tensor type");
    return false;
  }
  if (!THPDtype_Check(dtype) || !THPDevice_Check(device) || !THPLayout_Check(layout)) {
    PyErr_SetString(PyExc_TypeError, "expected a torch.dtype, torch.device and torch.layout");
    return false;
  }
  out.type = reinterpret_cast<PyTypeObject*>(type);
  out.dtype = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
  out.device = reinterpret_cast<THPDevice*>(device)->device;
  out.layout = reinterpret_cast<THPLayout*>(layout)->layout;
  out.has_strides = strides != Py_None;
  return read_flag(requires_grad, out.requires_grad) && read_flag(inference, out.inference) &&
         read_flag(neg, out.neg) && read_flag(conj, out.conj) && read_entries(sizes, out.sizes) &&
         (!out.has_strides || read_entries(strides, out.strides));
}

// ---- the TensorMatcher type -----------------------------------------------------------------

struct TensorMatcher {
  PyObject_HEAD
  std::vector<Expected>* expected;
  PyObject* types;  // tuple holding every expected type
  vectorcallfunc vectorcall;
};

PyObject* matcher_call(PyObject* self_object, PyObject* const* args, size_t nargsf,
                       PyObject* kwnames) {
  auto* self = reinterpret_cast<TensorMatcher*>(self_object);
  Py_ssize_t count = PyVectorcall_NARGS(nargsf);
  if (kwnames != nullptr || count != static_cast<Py_ssize_t>(self->expected->size())) {
    PyErr_Format(PyExc_TypeError, "TensorMatcher takes exactly %zd positional tensors",
                 static_cast<Py_ssize_t>(self->expected->size()));
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < count; i++)
    if (!matches(args[i], (*self->expected)[i])) Py_RETURN_FALSE;
  Py_RETURN_TRUE;
}

PyObject* matcher_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* specs;
  if (!PyArg_ParseTuple(args, "O:TensorMatcher", &specs)) return nullptr;
  PyObject* sequence = PySequence_Fast(specs, "TensorMatcher expects a sequence of specs");
  if (sequence == nullptr) return nullptr;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
  auto expected = new std::vector<Expected>(count);
  PyObject* types = PyTuple_New(count);
  bool ok = types != nullptr;
  for (Py_ssize_t i = 0; ok && i < count; i++) {
    ok = read_expected(PySequence_Fast_GET_ITEM(sequence, i), (*expected)[i]);
    if (ok) PyTuple_SET_ITEM(types, i, Py_NewRef((*expected)[i].type));
  }
  Py_DECREF(sequence);
  auto* self = ok ? reinterpret_cast<TensorMatcher*>(type->tp_alloc(type, 0)) : nullptr;
  if (self == nullptr) {
    delete expected;
    Py_XDECREF(types);
    return nullptr;
  }
  self->expected = expected;
  self->types = types;
  self->vectorcall = matcher_call;
  return reinterpret_cast<PyObject*>(self);
}

void matcher_dealloc(PyObject* self_object) {
  auto* self = reinterpret_cast<TensorMatcher*>(self_object);
  delete self->expected;
  Py_XDECREF(self->types);
  Py_TYPE(self_object)->tp_free(self_object);
}

PyTypeObject TensorMatcherType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_tensor_match",
                          "Native tensor matching for framejit guard checks.", -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__tensor_match(void) {
  TensorMatcherType.tp_name = "guards.native.TensorMatcher";
  TensorMatcherType.tp_basicsize = sizeof(TensorMatcher);
  TensorMatcherType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  TensorMatcherType.tp_doc =
      "TensorMatcher(specs): called with one tensor per spec, True when each matches.";
  TensorMatcherType.tp_new = matcher_new;
  TensorMatcherType.tp_dealloc = matcher_dealloc;
  TensorMatcherType.tp_call = PyVectorcall_Call;
  TensorMatcherType.tp_vectorcall_offset = offsetof(TensorMatcher, vectorcall);
  if (PyType_Ready(&TensorMatcherType) < 0) return nullptr;
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  if (PyModule_AddObjectRef(module, "TensorMatcher",
                            reinterpret_cast<PyObject*>(&TensorMatcherType)) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
