// inductor.runtime._native: host-side helpers of compiled graphs' wrappers (stage: run).
//
// Input: what a generated wrapper passes per call. Output: tensors. Built on first use against
// the installed torch's headers by guards.native.build_extension (see native.py).
//
//   empty_strided(sizes, strides, dtype, device) -> Tensor
//   storages_shared(values) -> bool
//   size_binder(reads, checks, exception) -> capsule
//   bind_sizes(binder, *tensors) -> tuple of ints
//   launch(entry_address, *tensors_then_ints) -> int status
//   own_tensor(memory, sizes, strides, offset) -> Tensor
//   view_of(base, sizes, strides, offset) -> Tensor
//   layout_differs(tensor, dims, strides, nbytes) -> bool
//   program(inputs, allocations, launches, outputs, mode, kernel_error) -> capsule
//   run_program(program, *inputs) -> the outputs
//
// The same tensor as torch.empty_strided(sizes, strides, dtype=dtype, device=device), through
// at::empty_strided (so the dispatcher, dispatch modes and the device's caching allocator all
// apply), without torch's Python argument parser: a wrapper allocates every buffer it does not
// reuse on each call, and on a GPU host-bound call that parsing is a visible share of the call.
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <cstdint>
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

// The size binding of a wrapper compiled over symbolic sizes (codegen/wrapper.py, `_bind_symbols`):
// each symbol read off an input's size or stride, then each checked input's strides compared
// with their expressions of the symbols (polynomials with integer coefficients), in one call
// instead of a Python `x.shape[0]` per symbol and a `x.stride() != (...)` tuple per input.
struct Term {
  int64_t coefficient;
  std::vector<int> symbols;  // indices into the read values, one per factor (s0**2: 0, 0)
};

struct StrideCheck {
  int position;
  std::vector<std::vector<Term>> strides;  // one polynomial per dimension
};

struct Binder {
  std::vector<int64_t> reads;  // (position, kind 0 size / 1 stride, dim) per symbol, flat
  std::vector<StrideCheck> checks;
  PyObject* exception;  // raised where a checked input's strides differ (InputLayoutChanged)
  Py_ssize_t tensor_count;  // positions below this are passed
  // The last call's answer (owned; nullptr before the first): a call binding the same values
  // returns it again instead of a new tuple of new ints (the GIL guards both fields).
  PyObject* last = nullptr;
  std::vector<int64_t> last_values;
};

const char* BINDER = "inductor.runtime._native.Binder";

void free_binder(PyObject* capsule) {
  auto* binder = static_cast<Binder*>(PyCapsule_GetPointer(capsule, BINDER));
  if (binder == nullptr) return;
  Py_XDECREF(binder->exception);
  Py_XDECREF(binder->last);
  delete binder;
}

bool read_term(PyObject* item, Term& term) {
  PyObject* symbols = nullptr;
  long long coefficient = 0;
  if (!PyArg_ParseTuple(item, "LO", &coefficient, &symbols)) return false;
  std::vector<int64_t> indices;
  if (!read_ints(symbols, indices, "size_binder: a term's symbols must be ints")) return false;
  term.coefficient = coefficient;
  term.symbols.assign(indices.begin(), indices.end());
  return true;
}

bool read_check(PyObject* item, StrideCheck& check, Py_ssize_t symbol_count) {
  PyObject* strides = nullptr;
  if (!PyArg_ParseTuple(item, "iO", &check.position, &strides)) return false;
  PyObject* fast = PySequence_Fast(strides, "size_binder: strides must be a sequence");
  if (fast == nullptr) return false;
  bool good = true;
  for (Py_ssize_t dim = 0; good && dim < PySequence_Fast_GET_SIZE(fast); dim++) {
    PyObject* terms = PySequence_Fast(PySequence_Fast_GET_ITEM(fast, dim),
                                      "size_binder: a stride must be a sequence of terms");
    if (terms == nullptr) { good = false; break; }
    std::vector<Term> polynomial(static_cast<size_t>(PySequence_Fast_GET_SIZE(terms)));
    for (Py_ssize_t i = 0; good && i < PySequence_Fast_GET_SIZE(terms); i++) {
      good = read_term(PySequence_Fast_GET_ITEM(terms, i), polynomial[static_cast<size_t>(i)]);
      for (int symbol : polynomial[static_cast<size_t>(i)].symbols)
        if (good && (symbol < 0 || symbol >= symbol_count)) {
          PyErr_SetString(PyExc_ValueError, "size_binder: a term names no read symbol");
          good = false;
        }
    }
    Py_DECREF(terms);
    check.strides.push_back(std::move(polynomial));
  }
  Py_DECREF(fast);
  return good;
}

// size_binder(reads, checks, exception): reads ((position, kind, dim), ...), checks
// ((position, (stride polynomial per dim)), ...), a polynomial ((coefficient, (symbol, ...)), ...).
PyObject* size_binder(PyObject*, PyObject* args) {
  PyObject *reads = nullptr, *checks = nullptr, *exception = nullptr;
  if (!PyArg_ParseTuple(args, "OOO", &reads, &checks, &exception)) return nullptr;
  auto binder = std::make_unique<Binder>();
  if (!read_ints(reads, binder->reads, "size_binder: reads must be a flat sequence of ints"))
    return nullptr;
  if (binder->reads.size() % 3 != 0) {
    PyErr_SetString(PyExc_ValueError, "size_binder: reads come in (position, kind, dim)");
    return nullptr;
  }
  Py_ssize_t symbol_count = static_cast<Py_ssize_t>(binder->reads.size() / 3);
  PyObject* fast = PySequence_Fast(checks, "size_binder: checks must be a sequence");
  if (fast == nullptr) return nullptr;
  binder->checks.resize(static_cast<size_t>(PySequence_Fast_GET_SIZE(fast)));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++)
    if (!read_check(PySequence_Fast_GET_ITEM(fast, i), binder->checks[static_cast<size_t>(i)],
                    symbol_count)) {
      Py_DECREF(fast);
      return nullptr;
    }
  Py_DECREF(fast);
  for (size_t i = 0; i < binder->reads.size(); i += 3)
    binder->tensor_count = std::max<Py_ssize_t>(binder->tensor_count, binder->reads[i] + 1);
  for (const StrideCheck& check : binder->checks)
    binder->tensor_count = std::max<Py_ssize_t>(binder->tensor_count, check.position + 1);
  Py_INCREF(exception);
  binder->exception = exception;
  PyObject* capsule = PyCapsule_New(binder.get(), BINDER, free_binder);
  if (capsule != nullptr) binder.release();
  else Py_DECREF(exception);
  return capsule;
}

// A polynomial's value at `values`; false where it overflows int64 (then no stride equals it).
bool evaluate(const std::vector<Term>& polynomial, const int64_t* values, int64_t& result) {
  int64_t sum = 0;
  for (const Term& term : polynomial) {
    int64_t product = term.coefficient;
    for (int symbol : term.symbols)
      if (__builtin_mul_overflow(product, values[symbol], &product)) return false;
    if (__builtin_add_overflow(sum, product, &sum)) return false;
  }
  result = sum;
  return true;
}

bool strides_match(const StrideCheck& check, const at::Tensor& tensor, const int64_t* values) {
  auto strides = tensor.strides();
  if (strides.size() != check.strides.size()) return false;
  for (size_t dim = 0; dim < strides.size(); dim++) {
    int64_t expected = 0;
    if (!evaluate(check.strides[dim], values, expected) || expected != strides[dim])
      return false;
  }
  return true;
}

PyObject* bind_sizes(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  auto* binder = nargs > 0 ? static_cast<Binder*>(PyCapsule_GetPointer(args[0], BINDER))
                           : nullptr;
  if (binder == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "bind_sizes(binder, *tensors)");
    return nullptr;
  }
  if (nargs - 1 < binder->tensor_count) {
    PyErr_SetString(PyExc_TypeError, "bind_sizes: fewer tensors than the binder reads");
    return nullptr;
  }
  for (size_t i = 0; i < binder->reads.size(); i += 3)   // only the inputs it reads
    if (!THPVariable_Check(args[1 + binder->reads[i]])) {
      PyErr_SetString(PyExc_TypeError, "bind_sizes: expected a tensor");
      return nullptr;
    }
  for (const StrideCheck& check : binder->checks)
    if (!THPVariable_Check(args[1 + check.position])) {
      PyErr_SetString(PyExc_TypeError, "bind_sizes: expected a tensor");
      return nullptr;
    }
  HANDLE_TH_ERRORS
  constexpr size_t kInline = 16;  // symbols held on the stack (a wrapper rarely binds more)
  size_t count = binder->reads.size() / 3;
  int64_t inline_values[kInline];
  std::vector<int64_t> heap_values(count > kInline ? count : 0);
  int64_t* values = count > kInline ? heap_values.data() : inline_values;
  for (size_t i = 0; i < count; i++) {
    const int64_t* read = &binder->reads[3 * i];
    const at::Tensor& tensor = THPVariable_Unpack(args[1 + read[0]]);
    int64_t dim = read[2];
    if (dim >= tensor.dim()) {
      PyErr_SetString(PyExc_IndexError, "bind_sizes: tuple index out of range");
      return nullptr;
    }
    values[i] = read[1] == 0 ? tensor.sizes()[dim] : tensor.strides()[dim];
  }
  for (const StrideCheck& check : binder->checks)
    if (!strides_match(check, THPVariable_Unpack(args[1 + check.position]), values)) {
      PyErr_SetNone(binder->exception);
      return nullptr;
    }
  if (binder->last != nullptr && std::equal(values, values + count, binder->last_values.begin()))
    return Py_NewRef(binder->last);
  PyObject* result = PyTuple_New(static_cast<Py_ssize_t>(count));
  if (result == nullptr) return nullptr;
  for (size_t i = 0; i < count; i++) {
    PyObject* value = PyLong_FromLongLong(values[i]);
    if (value == nullptr) {
      Py_DECREF(result);
      return nullptr;
    }
    PyTuple_SET_ITEM(result, static_cast<Py_ssize_t>(i), value);
  }
  binder->last_values.assign(values, values + count);
  Py_XSETREF(binder->last, Py_NewRef(result));
  return result;
  END_HANDLE_TH_ERRORS
}

// launch(address, *values): calls the generated `int entry(void* const* pointers, const int64_t*
// sizes)` at `address` (codegen/cpp/source.py, `_packed_entry`) with each tensor's data pointer
// and each int's value, in order; returns its status. One call instead of a ctypes call (about
// 1 us, plus an int conversion per argument) and a Python `data_ptr()` per tensor. The GIL is
// released while the kernels run, as ctypes does.
using PackedEntry = int (*)(void* const*, const int64_t*);

PyObject* launch(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  constexpr Py_ssize_t kInline = 32;
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "launch(entry_address, *values)");
    return nullptr;
  }
  auto entry = reinterpret_cast<PackedEntry>(PyLong_AsVoidPtr(args[0]));
  if (entry == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "launch: a null entry address");
    return nullptr;
  }
  void* pointer_storage[kInline];
  int64_t size_storage[kInline];
  std::vector<void*> pointer_heap;
  std::vector<int64_t> size_heap;
  void** pointers = pointer_storage;
  int64_t* sizes = size_storage;
  if (nargs - 1 > kInline) {
    pointer_heap.resize(static_cast<size_t>(nargs));
    size_heap.resize(static_cast<size_t>(nargs));
    pointers = pointer_heap.data();
    sizes = size_heap.data();
  }
  Py_ssize_t pointer_count = 0, size_count = 0;
  HANDLE_TH_ERRORS
  for (Py_ssize_t i = 1; i < nargs; i++) {
    if (THPVariable_Check(args[i])) {
      pointers[pointer_count++] = THPVariable_Unpack(args[i]).data_ptr();
      continue;
    }
    long long value = PyLong_AsLongLong(args[i]);
    if (value == -1 && PyErr_Occurred()) return nullptr;
    sizes[size_count++] = value;
  }
  int status = 0;
  Py_BEGIN_ALLOW_THREADS
  status = entry(pointers, sizes);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
  END_HANDLE_TH_ERRORS
}

// Sizes, strides and an offset from Python (args[1], args[2], args[3]); false with an exception
// set otherwise. `what` names the entry point in messages.
bool read_geometry(PyObject* const* args, std::vector<int64_t>& sizes,
                   std::vector<int64_t>& strides, int64_t& offset, const char* what) {
  if (!read_ints(args[1], sizes, what) || !read_ints(args[2], strides, what)) return false;
  if (sizes.size() != strides.size()) {
    PyErr_Format(PyExc_ValueError, "%s: sizes and strides differ in length", what);
    return false;
  }
  long long value = PyLong_AsLongLong(args[3]);
  if (value == -1 && PyErr_Occurred()) return false;
  offset = value;
  return true;
}

// own_tensor(memory, sizes, strides, offset): a tensor of that geometry over `memory`'s
// storage that is no view (`_base` None, a version counter of its own at 0), as eager's freshly
// allocated outputs; what `native.py`'s `_python_own_tensor` makes with `torch.empty` and `set_`
// under a preserved version counter, with neither a dispatch nor an empty storage allocated.
// The geometry must lie in the storage.
PyObject* own_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "own_tensor(memory, sizes, strides, offset)");
    return nullptr;
  }
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  if (!read_geometry(args, sizes, strides, offset, "own_tensor")) return nullptr;
  HANDLE_TH_ERRORS
  const at::Tensor& memory = THPVariable_Unpack(args[0]);
  int64_t last = offset;  // the furthest element addressed (none where a size is 0)
  bool empty = false;
  for (size_t dim = 0; dim < sizes.size(); dim++) {
    TORCH_CHECK(sizes[dim] >= 0 && strides[dim] >= 0 && offset >= 0,
                "own_tensor: negative size, stride or offset");
    empty = empty || sizes[dim] == 0;
    if (sizes[dim] > 0) last += (sizes[dim] - 1) * strides[dim];
  }
  TORCH_CHECK(empty || static_cast<size_t>(last + 1) * memory.itemsize() <=
                           memory.storage().nbytes(),
              "own_tensor: the geometry lies outside the memory's storage");
  // A new TensorImpl over the storage, as at::empty makes one over a new storage: its
  // constructor adds the autograd keys and a version counter at 0, or none in inference mode.
  // Over an inference tensor's memory (an input or result made under torch.inference_mode) it
  // is one too, made in inference mode: no version counter, so that a write into it outside
  // inference mode raises as into eager's own result (a counter of its own let it pass).
  std::optional<c10::InferenceMode> inference;
  if (memory.is_inference()) inference.emplace();
  c10::DispatchKeySet keys(
      c10::computeDispatchKey(memory.scalar_type(), memory.layout(), memory.device()));
  at::Tensor result = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(memory.storage()), keys, memory.dtype());
  result.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  return THPVariable_Wrap(std::move(result));
  END_HANDLE_TH_ERRORS
}

// view_of(base, sizes, strides, offset): torch.as_strided(base, sizes, strides,
// base.storage_offset() + offset), through the dispatcher (autograd's view tracking applies:
// `_base`, the shared version counter, a gradient where `base` requires one) without the
// Python argument parser: the rebuild of outputs eager returns as views.
PyObject* view_of(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "view_of(base, sizes, strides, offset)");
    return nullptr;
  }
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  if (!read_geometry(args, sizes, strides, offset, "view_of")) return nullptr;
  HANDLE_TH_ERRORS
  const at::Tensor& base = THPVariable_Unpack(args[0]);
  at::Tensor result = at::as_strided(base, sizes, strides, base.storage_offset() + offset);
  return THPVariable_Wrap(std::move(result));
  END_HANDLE_TH_ERRORS
}

// layout_differs(tensor, dims, strides, nbytes): whether an eager kernel's result must be copied
// into the layout the kernels expect (codegen/wrapper.py, `stride_check`): its stride along
// dims[i] differs from strides[i] for some i (a dim it lacks counts as differing), or, where
// nbytes >= 0, it does not start a storage of exactly nbytes. One call for what took a
// `stride()` tuple, a `storage_offset()` and an `untyped_storage().nbytes()` from Python.
PyObject* layout_differs(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "layout_differs(tensor, dims, strides, nbytes)");
    return nullptr;
  }
  std::vector<int64_t> dims, strides;
  if (!read_ints(args[1], dims, "layout_differs: dims must be ints") ||
      !read_ints(args[2], strides, "layout_differs: strides must be ints"))
    return nullptr;
  if (dims.size() != strides.size()) {
    PyErr_SetString(PyExc_ValueError, "layout_differs: dims and strides differ in length");
    return nullptr;
  }
  long long nbytes = PyLong_AsLongLong(args[3]);
  if (nbytes == -1 && PyErr_Occurred()) return nullptr;
  HANDLE_TH_ERRORS
  const at::Tensor& tensor = THPVariable_Unpack(args[0]);
  auto actual = tensor.strides();
  bool differs = false;
  for (size_t i = 0; !differs && i < dims.size(); i++)
    differs = dims[i] < 0 || static_cast<size_t>(dims[i]) >= actual.size() ||
              actual[static_cast<size_t>(dims[i])] != strides[i];
  if (!differs && nbytes >= 0)
    differs = !tensor.has_storage() || tensor.storage_offset() != 0 ||
              tensor.storage().nbytes() != static_cast<size_t>(nbytes);
  return PyBool_FromLong(differs);
  END_HANDLE_TH_ERRORS
}

// A wrapper made only of allocations, kernel launches and a return of the buffers it
// allocated (`runtime/native_program.py` reads them off its source), run in one call: no Python
// frame, line or argument list per call.
struct Allocation {
  std::vector<int64_t> sizes, strides;
  at::TensorOptions options;
};

struct Launch {
  PackedEntry entry;
  std::vector<int64_t> operands;  // >= 0: that input; < 0: buffer -(operand + 1)
};

struct Program {
  Py_ssize_t inputs = 0;
  std::vector<Allocation> allocations;
  std::vector<Launch> launches;
  std::vector<int64_t> outputs;  // buffer indices
  int mode = 0;                   // the result: 0 a list, 1 a tuple, 2 the one output itself
  PyObject* kernel_error = nullptr;  // called with a launch's non-zero status; raises
};

const char* PROGRAM = "inductor.runtime._native.Program";

void free_program(PyObject* capsule) {
  auto* program = static_cast<Program*>(PyCapsule_GetPointer(capsule, PROGRAM));
  if (program == nullptr) return;
  Py_XDECREF(program->kernel_error);
  delete program;
}

bool read_allocation(PyObject* item, Allocation& allocation) {
  PyObject *sizes = nullptr, *strides = nullptr, *dtype = nullptr, *device = nullptr;
  if (!PyArg_ParseTuple(item, "OOOO", &sizes, &strides, &dtype, &device)) return false;
  if (!THPDtype_Check(dtype) || !THPDevice_Check(device)) {
    PyErr_SetString(PyExc_TypeError, "program: an allocation's dtype and device must be a "
                                     "torch.dtype and a torch.device");
    return false;
  }
  if (!read_ints(sizes, allocation.sizes, "program: sizes must be ints") ||
      !read_ints(strides, allocation.strides, "program: strides must be ints"))
    return false;
  if (allocation.sizes.size() != allocation.strides.size()) {
    PyErr_SetString(PyExc_ValueError, "program: sizes and strides differ in length");
    return false;
  }
  allocation.options = at::TensorOptions()
                           .dtype(reinterpret_cast<THPDtype*>(dtype)->scalar_type)
                           .device(reinterpret_cast<THPDevice*>(device)->device);
  return true;
}

bool read_launch(PyObject* item, Launch& launch, const Program& program) {
  PyObject *address = nullptr, *operands = nullptr;
  if (!PyArg_ParseTuple(item, "OO", &address, &operands)) return false;
  launch.entry = reinterpret_cast<PackedEntry>(PyLong_AsVoidPtr(address));
  if (launch.entry == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "program: a null entry address");
    return false;
  }
  if (!read_ints(operands, launch.operands, "program: operands must be ints")) return false;
  auto buffers = static_cast<int64_t>(program.allocations.size());
  for (int64_t operand : launch.operands)
    if (operand >= program.inputs || operand < -buffers) {
      PyErr_SetString(PyExc_ValueError, "program: an operand names no input or buffer");
      return false;
    }
  return true;
}

// program(inputs, allocations, launches, outputs, mode, kernel_error): inputs, the number of
// tensors a call takes; allocations ((sizes, strides, dtype, device), ...); launches ((entry
// address, operands), ...); outputs, buffer indices.
PyObject* make_program(PyObject*, PyObject* args) {
  Py_ssize_t inputs = 0;
  PyObject *allocations = nullptr, *launches = nullptr, *outputs = nullptr, *error = nullptr;
  int mode = 0;
  if (!PyArg_ParseTuple(args, "nOOOiO", &inputs, &allocations, &launches, &outputs, &mode,
                        &error))
    return nullptr;
  auto program = std::make_unique<Program>();
  program->inputs = inputs;
  program->mode = mode;
  PyObject* fast = PySequence_Fast(allocations, "program: allocations must be a sequence");
  if (fast == nullptr) return nullptr;
  program->allocations.resize(static_cast<size_t>(PySequence_Fast_GET_SIZE(fast)));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++)
    if (!read_allocation(PySequence_Fast_GET_ITEM(fast, i),
                         program->allocations[static_cast<size_t>(i)])) {
      Py_DECREF(fast);
      return nullptr;
    }
  Py_DECREF(fast);
  fast = PySequence_Fast(launches, "program: launches must be a sequence");
  if (fast == nullptr) return nullptr;
  program->launches.resize(static_cast<size_t>(PySequence_Fast_GET_SIZE(fast)));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++)
    if (!read_launch(PySequence_Fast_GET_ITEM(fast, i),
                     program->launches[static_cast<size_t>(i)], *program)) {
      Py_DECREF(fast);
      return nullptr;
    }
  Py_DECREF(fast);
  if (!read_ints(outputs, program->outputs, "program: outputs must be ints")) return nullptr;
  std::vector<bool> returned(program->allocations.size(), false);
  for (int64_t output : program->outputs) {
    if (output < 0 || output >= static_cast<int64_t>(program->allocations.size()) ||
        returned[static_cast<size_t>(output)]) {
      PyErr_SetString(PyExc_ValueError, "program: an output names no buffer, or one twice");
      return nullptr;
    }
    returned[static_cast<size_t>(output)] = true;
  }
  if (mode < 0 || mode > 2 || (mode == 2 && program->outputs.size() != 1)) {
    PyErr_SetString(PyExc_ValueError, "program: mode 0 (list), 1 (tuple) or 2 (one output)");
    return nullptr;
  }
  program->kernel_error = Py_NewRef(error);
  PyObject* capsule = PyCapsule_New(program.get(), PROGRAM, free_program);
  if (capsule != nullptr) program.release();
  return capsule;
}

PyObject* run_program(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  auto* program = nargs > 0 ? static_cast<Program*>(PyCapsule_GetPointer(args[0], PROGRAM))
                            : nullptr;
  if (program == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "run_program(program, *inputs)");
    return nullptr;
  }
  if (nargs - 1 != program->inputs) {
    PyErr_Format(PyExc_TypeError, "a compiled graph taking %zd inputs called with %zd",
                 program->inputs, nargs - 1);
    return nullptr;
  }
  for (Py_ssize_t i = 1; i < nargs; i++)
    if (!THPVariable_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "a compiled graph's input is not a tensor");
      return nullptr;
    }
  HANDLE_TH_ERRORS
  std::vector<at::Tensor> buffers;
  buffers.reserve(program->allocations.size());
  for (const Allocation& allocation : program->allocations)
    buffers.push_back(at::empty_strided(allocation.sizes, allocation.strides,
                                        allocation.options));
  constexpr size_t kInline = 32;
  void* pointer_storage[kInline];
  std::vector<void*> pointer_heap;
  int64_t no_sizes[1] = {0};
  for (const Launch& launch : program->launches) {
    void** pointers = pointer_storage;
    if (launch.operands.size() > kInline) {
      pointer_heap.resize(launch.operands.size());
      pointers = pointer_heap.data();
    }
    for (size_t i = 0; i < launch.operands.size(); i++) {
      int64_t operand = launch.operands[i];
      pointers[i] = operand >= 0 ? THPVariable_Unpack(args[1 + operand]).data_ptr()
                                 : buffers[static_cast<size_t>(-operand - 1)].data_ptr();
    }
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    status = launch.entry(pointers, no_sizes);
    Py_END_ALLOW_THREADS
    if (status != 0) {
      PyObject* raised = PyObject_CallFunction(program->kernel_error, "i", status);
      Py_XDECREF(raised);
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "compiled kernel failed with status %d", status);
      return nullptr;
    }
  }
  if (program->mode == 2)
    return THPVariable_Wrap(std::move(buffers[static_cast<size_t>(program->outputs[0])]));
  auto count = static_cast<Py_ssize_t>(program->outputs.size());
  PyObject* result = program->mode == 1 ? PyTuple_New(count) : PyList_New(count);
  if (result == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < count; i++) {
    PyObject* value =
        THPVariable_Wrap(std::move(buffers[static_cast<size_t>(program->outputs[i])]));
    if (value == nullptr) {
      Py_DECREF(result);
      return nullptr;
    }
    if (program->mode == 1) PyTuple_SET_ITEM(result, i, value);
    else PyList_SET_ITEM(result, i, value);
  }
  return result;
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"empty_strided", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(empty_strided)),
     METH_FASTCALL,
     "empty_strided(sizes, strides, dtype, device): torch.empty_strided without the Python "
     "argument parser."},
    {"storages_shared", storages_shared, METH_O,
     "storages_shared(values): whether two tensors of the sequence share a storage."},
    {"size_binder", size_binder, METH_VARARGS,
     "size_binder(reads, checks, exception): the size binding of a symbolic wrapper."},
    {"bind_sizes", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(bind_sizes)),
     METH_FASTCALL,
     "bind_sizes(binder, *tensors): the symbols' values; raises the binder's exception where "
     "a checked input's strides differ."},
    {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(launch)), METH_FASTCALL,
     "launch(entry_address, *values): call a packed kernel entry with the tensors' data "
     "pointers and the ints, in order; its status."},
    {"own_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(own_tensor)),
     METH_FASTCALL,
     "own_tensor(memory, sizes, strides, offset): a tensor of its own (no view) over the "
     "memory's storage."},
    {"view_of", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(view_of)), METH_FASTCALL,
     "view_of(base, sizes, strides, offset): torch.as_strided(base, sizes, strides, "
     "base.storage_offset() + offset)."},
    {"layout_differs", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(layout_differs)),
     METH_FASTCALL,
     "layout_differs(tensor, dims, strides, nbytes): whether a result's strides along dims "
     "differ, or (nbytes >= 0) it does not start a storage of nbytes."},
    {"program", make_program, METH_VARARGS,
     "program(inputs, allocations, launches, outputs, mode, kernel_error): a wrapper made of "
     "allocations and launches, for run_program."},
    {"run_program", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(run_program)),
     METH_FASTCALL, "run_program(program, *inputs): allocate, launch, return the outputs."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_native",
                          "Host-side helpers of inductor's generated wrappers.", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module_def); }
