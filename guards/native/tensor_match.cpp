// guards.native._tensor_match: native guard checks (stage: guard).
//
// Input: the values a compiled check reads from the frame. Output: whether they match what was
// seen at capture. Mechanism only: the expectations come from Python (guards/kinds/*.py), and
// the Python conditions those generate stay the reference (tests compare the two). Built on
// first use against the installed torch's headers (see __init__.py), because torch's Python
// getters cost ~50-90 ns each while the fields behind them cost ~1 ns.
//
//   matcher = TensorMatcher([(type, dtype, device, requires_grad, layout, sizes, strides,
//                             inference, neg, conj), ...])     # sizes/strides: None = any
//   matcher(x, y, ...) -> bool
//
//   program = GuardProgram(steps, register_count, exports, tensor_specs)
//   program(L, G) -> tuple of the exported registers' values, or None when a check fails or a
//                    read raises an Exception (other BaseExceptions propagate)
//
// A program is straight-line: each step reads the frame or a register into a register
// (locals, globals, attributes, items, type, a bound constant) or checks one (exact type,
// identity, `is` against a constant or another register, length, constant equality, tensor
// properties, which registers are one object or share one tensor storage, relations between
// the sizes and strides of tensors: size_relations.h, torch's global state: global_state.h). It
// replaces the interpreted lines of a generated check (~20 ns each) for the guards that need
// nothing else; the rest stay Python (guards/codegen.py).
#include <Python.h>

#include <c10/core/TensorImpl.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/autograd/python_variable.h>

#include "global_state.h"
#include "size_relations.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
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

// ---- the GuardProgram type --------------------------------------------------------------------

enum Operation : int {
  kLocal = 0,       // target = L[operand]
  kGlobal = 1,      // target = G[operand]
  kAttribute = 2,   // target = source.<operand>
  kItem = 3,        // target = source[operand]
  kTypeOf = 4,      // target = type(source)
  kTypeIs = 5,      // type(source) is operand
  kIdentity = 6,    // id(source) == number
  kIs = 7,          // source is operand
  kIsNot = 8,       // source is not operand
  kLength = 9,      // len(source) == number
  kEqual = 10,      // type(source) is type(operand) and source == operand (int, str, bytes)
  kFloat = 11,      // type(source) is float and the same float (nan matches nan, -0.0 not 0.0)
  kTensors = 12,    // each register in `registers` matches the next tensor spec
  kFalsy = 13,      // not source
  kKeys = 14,       // tuple(source) == operand (a tuple of keys)
  kConstant = 15,   // target = operand (a value bound into the check: another module's globals)
  kSame = 16,       // source is registers[0] (two sources reach one object: alias guards)
  kContains = 17,   // (operand in source) == bool(number): an instance dict has, or lacks, a key
  kFalsyItems = 18, // not source[key] for every key of operand (a tuple): a module's hook dicts
  kTypeId = 19,     // id(type(source)) == number (a class held weakly by its guard)
  kWeak = 20,       // target = operand() (a weak reference bound into the check); dead: fails
  kPartition = 21,  // registers[i], registers[j] are one object (number 0) or share one storage
                    // (number 1) exactly when labels[i] == labels[j] (operand: tuple of labels)
  kGlobals = 22,    // target = G (the globals dict itself: a builtin not shadowed by a global)
  kSizes = 23,      // the sizes/strides of the tensors in `registers` satisfy the relations in
                    // operand (reads, relations): see size_relations.h
  kState = 24,      // torch's global state equals the snapshot in operand: global_state.h
};

struct Step {
  int operation = 0, target = -1, source = -1;
  PyObject* operand = nullptr;  // borrowed: the program's `operands` list owns it
  long long number = 0;
  std::vector<int> registers;
  std::vector<int64_t> labels;  // partition steps: one label per register
  size_t first_spec = 0;
  // attribute steps: whether objects of `seen_type` (at type version `seen_version`) read the
  // attribute straight from their instance dict (see `attribute_of`)
  PyTypeObject* seen_type = nullptr;
  unsigned int seen_version = 0;
  bool from_instance_dict = false;
  size_relations::Relations relations;  // sizes steps
#if JIT_STATE_STEP
  std::shared_ptr<global_state::Snapshot> state;  // state steps
#endif
};

struct GuardProgram {
  PyObject_HEAD
  std::vector<Step>* steps;
  std::vector<Expected>* specs;
  std::vector<int>* exports;
  Py_ssize_t register_count;
  PyObject* operands;  // list keeping every operand alive
  vectorcallfunc vectorcall;
};

// A new reference to mapping[key]; nullptr with no exception set when the key is missing.
PyObject* item_of(PyObject* mapping, PyObject* key) {
  if (PyDict_CheckExact(mapping)) {
    PyObject* value = PyDict_GetItemWithError(mapping, key);
    Py_XINCREF(value);
    return value;
  }
  return PyObject_GetItem(mapping, key);
}

PyObject* getattribute_name = nullptr;    // "__getattribute__", interned (set at module init)
PyObject* object_getattribute = nullptr;  // object.__getattribute__ (set at module init)

// Whether `name` read from an instance of `type` is the instance dict's entry when it has one:
// attribute lookup is object's (no __getattribute__ override; a __getattr__ only runs for
// missing names) and the type has no data descriptor of that name.
bool reads_instance_dict(PyTypeObject* type, PyObject* name) {
  if (type->tp_getattro != PyObject_GenericGetAttr) {
    PyObject* getattribute = _PyType_Lookup(type, getattribute_name);
    if (getattribute != object_getattribute) return false;
  }
  PyObject* descriptor = _PyType_Lookup(type, name);
  return descriptor == nullptr || Py_TYPE(descriptor)->tp_descr_set == nullptr;
}

// value.<name>, as `getattr` reads it, taking an instance's own dict entry directly when the
// type (unchanged since the last read: same version tag) lets the dict decide.
PyObject* attribute_of(Step& step, PyObject* value) {
  PyTypeObject* type = Py_TYPE(value);
  bool tagged = PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) && type->tp_version_tag;
  if (!tagged || type != step.seen_type || type->tp_version_tag != step.seen_version) {
    step.from_instance_dict = tagged && type->tp_dictoffset != 0 &&
                              reads_instance_dict(type, step.operand);
    step.seen_type = tagged ? type : nullptr;
    step.seen_version = tagged ? type->tp_version_tag : 0;
  }
  if (step.from_instance_dict) {
    PyObject** dictionary = _PyObject_GetDictPtr(value);
    if (dictionary != nullptr && *dictionary != nullptr) {
      PyObject* found = PyDict_GetItemWithError(*dictionary, step.operand);
      if (found != nullptr) return Py_NewRef(found);
      if (PyErr_Occurred()) return nullptr;
    }
  }
  return PyObject_GetAttr(value, step.operand);  // class attributes, descriptors, __getattr__
}

bool same_float(PyObject* value, PyObject* expected) {
  if (!PyFloat_CheckExact(value)) return false;
  double got = PyFloat_AS_DOUBLE(value), want = PyFloat_AS_DOUBLE(expected);
  if (std::isnan(want)) return std::isnan(got);
  if (want == 0.0) return got == 0.0 && std::signbit(got) == std::signbit(want);
  return got == want;
}

// tuple(value) == keys, for an exact dict without building the tuple.
int same_keys(PyObject* value, PyObject* keys) {
  if (!PyDict_CheckExact(value)) {
    PyObject* items = PySequence_Tuple(value);
    if (items == nullptr) return -1;
    int equal = PyObject_RichCompareBool(items, keys, Py_EQ);
    Py_DECREF(items);
    return equal;
  }
  if (PyDict_GET_SIZE(value) != PyTuple_GET_SIZE(keys)) return 0;
  Py_ssize_t position = 0, index = 0;
  PyObject *key, *unused;
  while (PyDict_Next(value, &position, &key, &unused)) {
    PyObject* want = PyTuple_GET_ITEM(keys, index++);
    if (key == want) continue;
    int equal = PyObject_RichCompareBool(key, want, Py_EQ);
    if (equal != 1) return equal;
  }
  return 1;
}

// What a partition step compares: the object itself, or the tensor's storage (nullptr: none).
const void* partition_key(PyObject* value, bool by_storage) {
  if (!by_storage) return value;
  if (!THPVariable_Check(value)) return nullptr;
  const at::Tensor& tensor = THPVariable_Unpack(value);
  if (!tensor.defined() || !tensor.has_storage()) return nullptr;
  return tensor.storage().unsafeGetStorageImpl();
}

// Whether the registers fall into the same groups as the labels: keys equal exactly where
// labels are equal. Labels are canonical (0, 1, 2... in order of first appearance, so each is
// below the count): one pass, with the key of each label in a vector and the label of each key
// in an open-addressing table (scratch space kept per thread: no allocation per call).
int same_partition(const Step& step, PyObject** registers) {
  size_t count = step.registers.size();
  bool by_storage = step.number != 0;
  thread_local std::vector<const void*> key_of_label;
  thread_local std::vector<std::pair<const void*, int64_t>> table;
  size_t capacity = 8;
  while (capacity < 2 * count) capacity <<= 1;
  key_of_label.assign(count, nullptr);
  table.assign(capacity, {nullptr, -1});
  try {
    for (size_t i = 0; i < count; i++) {
      const void* key = partition_key(registers[step.registers[i]], by_storage);
      int64_t label = step.labels[i];
      if (key == nullptr || label < 0 || static_cast<size_t>(label) >= count) return 0;
      const void*& known = key_of_label[label];
      if (known == nullptr) known = key;
      else if (known != key) return 0;  // one label, two objects
      size_t slot = (reinterpret_cast<uintptr_t>(key) >> 4) * 0x9E3779B97F4A7C15ull;
      for (slot &= capacity - 1;; slot = (slot + 1) & (capacity - 1)) {
        if (table[slot].first == nullptr) {
          table[slot] = {key, label};
          break;
        }
        if (table[slot].first == key) {
          if (table[slot].second != label) return 0;  // one object, two labels
          break;
        }
      }
    }
  } catch (...) {
    return 0;
  }
  return 1;
}

// 1: the step holds, 0: it does not, -1: an exception is set.
int run_step(const GuardProgram* self, Step& step, PyObject** registers, PyObject* L,
             PyObject* G) {
  PyObject* value = step.source >= 0 ? registers[step.source] : nullptr;
  PyObject* result = nullptr;
  switch (step.operation) {
    case kLocal: result = item_of(L, step.operand); break;
    case kGlobal: result = item_of(G, step.operand); break;
    case kAttribute: result = attribute_of(step, value); break;
    case kItem: result = item_of(value, step.operand); break;
    case kTypeOf: result = Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(value))); break;
    case kTypeIs: return reinterpret_cast<PyObject*>(Py_TYPE(value)) == step.operand;
    case kIdentity: return static_cast<long long>(reinterpret_cast<uintptr_t>(value)) ==
                           step.number;
    case kIs: return value == step.operand;
    case kIsNot: return value != step.operand;
    case kLength: {
      Py_ssize_t length = PyObject_Length(value);
      return length < 0 ? -1 : length == step.number;
    }
    case kEqual:
      if (Py_TYPE(value) != Py_TYPE(step.operand)) return 0;
      return PyObject_RichCompareBool(value, step.operand, Py_EQ);
    case kFloat: return same_float(value, step.operand);
    case kFalsy: {
      int truth = PyObject_IsTrue(value);
      return truth < 0 ? -1 : truth == 0;
    }
    case kKeys: return same_keys(value, step.operand);
    case kFalsyItems:
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(step.operand); i++) {
        PyObject* item = item_of(value, PyTuple_GET_ITEM(step.operand, i));
        if (item == nullptr) return PyErr_Occurred() ? -1 : 0;
        int truth = PyObject_IsTrue(item);
        Py_DECREF(item);
        if (truth != 0) return truth < 0 ? -1 : 0;
      }
      return 1;
    case kConstant: result = Py_NewRef(step.operand); break;
    case kTypeId: return static_cast<long long>(reinterpret_cast<uintptr_t>(Py_TYPE(value))) ==
                         step.number;
    case kWeak: {
      PyObject* referent = PyWeakref_GetObject(step.operand);  // borrowed
      if (referent == nullptr) return -1;
      if (referent == Py_None) return 0;  // the object died: its guard set is dying too
      result = Py_NewRef(referent);
      break;
    }
    case kPartition: return same_partition(step, registers);
    case kGlobals: result = Py_NewRef(G); break;
    case kSame: return value == registers[step.registers[0]];
    case kSizes: return size_relations::holds(step.relations, step.registers, registers);
#if JIT_STATE_STEP
    case kState: return global_state::holds(*step.state);
#endif
    case kContains: {
      int found = PyDict_CheckExact(value) ? PyDict_Contains(value, step.operand)
                                           : PySequence_Contains(value, step.operand);
      return found < 0 ? -1 : found == (step.number != 0);
    }
    case kTensors:
      for (size_t i = 0; i < step.registers.size(); i++)
        if (!matches(registers[step.registers[i]], (*self->specs)[step.first_spec + i]))
          return 0;
      return 1;
    default:
      PyErr_SetString(PyExc_SystemError, "GuardProgram: unknown step");
      return -1;
  }
  if (result == nullptr) return PyErr_Occurred() ? -1 : 0;  // a missing key: the check fails
  Py_XSETREF(registers[step.target], result);
  return 1;
}

PyObject* program_call(PyObject* self_object, PyObject* const* args, size_t nargsf,
                       PyObject* kwnames) {
  auto* self = reinterpret_cast<GuardProgram*>(self_object);
  if (kwnames != nullptr || PyVectorcall_NARGS(nargsf) != 2) {
    PyErr_SetString(PyExc_TypeError, "GuardProgram takes exactly (L, G)");
    return nullptr;
  }
  std::vector<PyObject*> registers(self->register_count, nullptr);
  int verdict = 1;
  for (Step& step : *self->steps)
    if ((verdict = run_step(self, step, registers.data(), args[0], args[1])) != 1) break;
  PyObject* answer = nullptr;
  if (verdict == 1) {
    answer = PyTuple_New(static_cast<Py_ssize_t>(self->exports->size()));
    for (size_t i = 0; answer != nullptr && i < self->exports->size(); i++) {
      PyObject* value = registers[(*self->exports)[i]];
      PyTuple_SET_ITEM(answer, i, Py_NewRef(value ? value : Py_None));
    }
  } else if (verdict == 0 || PyErr_ExceptionMatches(PyExc_Exception)) {
    PyErr_Clear();  // a read that raises fails the check, as `except Exception` does in Python
    answer = Py_NewRef(Py_None);
  }
  for (PyObject* value : registers) Py_XDECREF(value);
  return answer;
}

bool read_step(PyObject* spec, Step& step, Py_ssize_t register_count) {
  PyObject *registers, *operand;
  if (!PyArg_ParseTuple(spec, "iiiOLO;a step is (operation, target, source, operand, number, "
                        "registers)", &step.operation, &step.target, &step.source, &operand,
                        &step.number, &registers))
    return false;
  step.operand = operand;
  if (step.target >= register_count || step.source >= register_count ||
      step.operation < kLocal || step.operation > (JIT_STATE_STEP ? kState : kSizes) ||
      ((step.operation <= kTypeOf || step.operation == kConstant || step.operation == kWeak ||
        step.operation == kGlobals) && step.target < 0) ||
      (step.operation >= kAttribute && step.operation != kTensors &&
       step.operation != kConstant && step.operation != kWeak &&
       step.operation != kPartition && step.operation != kGlobals &&
       step.operation != kSizes && step.operation != kState && step.source < 0)) {
    PyErr_SetString(PyExc_ValueError, "GuardProgram: a step's registers are out of range");
    return false;
  }
  if (step.operation == kFloat && !PyFloat_CheckExact(operand)) {
    PyErr_SetString(PyExc_TypeError, "GuardProgram: a float step needs a float");
    return false;
  }
  if ((step.operation == kKeys || step.operation == kFalsyItems ||
       step.operation == kPartition) && !PyTuple_CheckExact(operand)) {
    PyErr_SetString(PyExc_TypeError, "GuardProgram: a keys or partition step needs a tuple");
    return false;
  }
  if (step.operation == kWeak && !PyWeakref_CheckRef(operand)) {
    PyErr_SetString(PyExc_TypeError, "GuardProgram: a weak step needs a weak reference");
    return false;
  }
  if (step.operation == kPartition && !read_entries(operand, step.labels)) return false;
  std::vector<int64_t> indices;
  if (!read_entries(registers, indices)) return false;
  for (int64_t index : indices) {
    if (index < 0 || index >= register_count) {
      PyErr_SetString(PyExc_ValueError, "GuardProgram: a tensor register is out of range");
      return false;
    }
    step.registers.push_back(static_cast<int>(index));
  }
  if (step.operation == kSizes &&
      !size_relations::parse(operand, step.registers.size(), step.relations))
    return false;
#if JIT_STATE_STEP
  if (step.operation == kState) {
    step.state = std::make_shared<global_state::Snapshot>();
    if (!global_state::parse(operand, *step.state)) return false;
  }
#endif
  if (step.operation == kSame && step.registers.size() != 1) {
    PyErr_SetString(PyExc_ValueError, "GuardProgram: a same-object step names one register");
    return false;
  }
  if (step.operation == kPartition && step.labels.size() != step.registers.size()) {
    PyErr_SetString(PyExc_ValueError, "GuardProgram: a partition step needs one label per "
                    "register");
    return false;
  }
  return true;
}

// Whether every register `step` reads was set by an earlier step (then marks its target set).
bool reads_written(const Step& step, std::vector<bool>& written) {
  bool ok = step.source < 0 || written[step.source];
  for (int index : step.registers) ok = ok && written[index];
  if (!ok) {
    PyErr_SetString(PyExc_ValueError, "GuardProgram: a step reads a register no earlier "
                    "step sets");
    return false;
  }
  if (step.target >= 0) written[step.target] = true;
  return true;
}

bool read_program(GuardProgram* self, PyObject* steps, PyObject* exports, PyObject* specs) {
  PyObject* sequence = PySequence_Fast(steps, "GuardProgram expects a sequence of steps");
  if (sequence == nullptr) return false;
  bool ok = true;
  std::vector<bool> written(self->register_count, false);  // registers set by earlier steps
  for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(sequence); i++) {
    Step step;
    ok = read_step(PySequence_Fast_GET_ITEM(sequence, i), step, self->register_count) &&
         PyList_Append(self->operands, step.operand) == 0;
    if (ok) ok = reads_written(step, written);
    if (ok && step.operation == kTensors) {
      step.first_spec = self->specs->size();
      self->specs->resize(self->specs->size() + step.registers.size());
    }
    if (ok) self->steps->push_back(std::move(step));
  }
  Py_DECREF(sequence);
  std::vector<int64_t> indices;
  if (!ok || !read_entries(exports, indices)) return false;
  for (int64_t index : indices) {
    if (index < 0 || index >= self->register_count || !written[index]) {
      PyErr_SetString(PyExc_ValueError, "GuardProgram: an export is out of range or unset");
      return false;
    }
    self->exports->push_back(static_cast<int>(index));
  }
  sequence = PySequence_Fast(specs, "GuardProgram expects a sequence of tensor specs");
  if (sequence == nullptr) return false;
  if (PySequence_Fast_GET_SIZE(sequence) != static_cast<Py_ssize_t>(self->specs->size())) {
    PyErr_SetString(PyExc_ValueError, "GuardProgram: one tensor spec per tensor register");
    ok = false;
  }
  for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(sequence); i++) {
    PyObject* spec = PySequence_Fast_GET_ITEM(sequence, i);
    ok = read_expected(spec, (*self->specs)[i]) && PyList_Append(self->operands, spec) == 0;
  }
  Py_DECREF(sequence);
  return ok;
}

void program_dealloc(PyObject* self_object) {
  auto* self = reinterpret_cast<GuardProgram*>(self_object);
  delete self->steps;
  delete self->specs;
  delete self->exports;
  Py_XDECREF(self->operands);
  Py_TYPE(self_object)->tp_free(self_object);
}

PyObject* program_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *steps, *exports, *specs;
  Py_ssize_t register_count;
  if (!PyArg_ParseTuple(args, "OnOO:GuardProgram", &steps, &register_count, &exports, &specs))
    return nullptr;
  if (register_count < 0) {
    PyErr_SetString(PyExc_ValueError, "GuardProgram: negative register count");
    return nullptr;
  }
  auto* self = reinterpret_cast<GuardProgram*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->steps = new std::vector<Step>();
  self->specs = new std::vector<Expected>();
  self->exports = new std::vector<int>();
  self->register_count = register_count;
  self->vectorcall = program_call;
  self->operands = PyList_New(0);
  if (self->operands == nullptr || !read_program(self, steps, exports, specs)) {
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

PyTypeObject GuardProgramType = {PyVarObject_HEAD_INIT(nullptr, 0)};


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
  GuardProgramType.tp_name = "guards.native.GuardProgram";
  GuardProgramType.tp_basicsize = sizeof(GuardProgram);
  GuardProgramType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  GuardProgramType.tp_doc =
      "GuardProgram(steps, register_count, exports, tensor_specs): called with (L, G), the "
      "exported values when every step holds, else None.";
  GuardProgramType.tp_new = program_new;
  GuardProgramType.tp_dealloc = program_dealloc;
  GuardProgramType.tp_call = PyVectorcall_Call;
  GuardProgramType.tp_vectorcall_offset = offsetof(GuardProgram, vectorcall);
  if (PyType_Ready(&GuardProgramType) < 0) return nullptr;
  getattribute_name = PyUnicode_InternFromString("__getattribute__");
  if (getattribute_name == nullptr) return nullptr;
  object_getattribute = _PyType_Lookup(&PyBaseObject_Type, getattribute_name);
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  if (PyModule_AddIntConstant(module, "HAS_STATE_STEP", JIT_STATE_STEP) < 0 ||
      PyModule_AddObjectRef(module, "TensorMatcher",
                            reinterpret_cast<PyObject*>(&TensorMatcherType)) < 0 ||
      PyModule_AddObjectRef(module, "GuardProgram",
                            reinterpret_cast<PyObject*>(&GuardProgramType)) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
