// The size-relation step of a guard program (stage: guard; included by tensor_match.cpp).
//
// Input: tensors in registers and the integer reads a `ShapeGuard` binds (`x.shape[0]`,
// `x.stride(1)`, `x.storage_offset()`), with its relations in linear form. Output: whether every
// relation holds. A relation is
//
//     (sum(coefficient * read) + constant) [% modulus]  <op>  right
//
// with Python's semantics (exact integers: 128-bit here, a result beyond that fails the check;
// `%` takes the divisor's sign), so the verdict is the generated Python condition's
// (tests/guards/test_symbolic_native_relations.py compares the two on random sizes). Exact
// `torch.Tensor`s and `Parameter`s are read from the TensorImpl (~2 ns a read, against 40-80 ns
// for `x.shape[0]`); any other tensor type through its Python attributes, as the Python check
// reads it.
#pragma once

#include <Python.h>

#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <vector>

namespace size_relations {

enum ReadKind : int { kSize = 0, kStride = 1, kStorageOffset = 2 };
enum Comparison : int { kEq = 0, kNe = 1, kGe = 2, kGt = 3, kLe = 4, kLt = 5 };

struct Read {
  int slot = 0;  // index into the step's tensor registers
  int kind = kSize;
  int64_t index = 0;
};

struct Relation {
  int comparison = kEq;
  int64_t modulus = 0;  // 0: none
  int64_t constant = 0, right = 0;
  std::vector<std::pair<int64_t, int>> terms;  // (coefficient, read)
};

struct Relations {
  std::vector<Read> reads;
  std::vector<Relation> relations;
};

// Through Python: what the generated check reads for a tensor of another type.
inline bool read_through_python(PyObject* tensor, const Read& read, int64_t& out) {
  PyObject* value = nullptr;
  if (read.kind == kStorageOffset) {
    value = PyObject_CallMethod(tensor, "storage_offset", nullptr);
  } else if (read.kind == kStride) {
    value = PyObject_CallMethod(tensor, "stride", "L", static_cast<long long>(read.index));
  } else {
    PyObject* shape = PyObject_GetAttrString(tensor, "shape");
    if (shape != nullptr) {
      value = PySequence_GetItem(shape, static_cast<Py_ssize_t>(read.index));
      Py_DECREF(shape);
    }
  }
  if (value == nullptr) return false;
  int overflow = 0;
  out = PyLong_Check(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
  bool ok = PyLong_Check(value) && overflow == 0 && !(out == -1 && PyErr_Occurred());
  Py_DECREF(value);
  if (!ok) PyErr_Clear();  // not an int we can compare: the check fails
  return ok;
}

// One read; false when it cannot be made (the check then fails, as the Python one would).
inline bool read_value(PyObject* tensor, const Read& read, int64_t& out) {
  if (!THPVariable_CheckExact(tensor)) return read_through_python(tensor, read, out);
  try {
    const at::Tensor& unpacked = THPVariable_Unpack(tensor);
    if (!unpacked.defined()) return false;
    c10::TensorImpl* impl = unpacked.unsafeGetTensorImpl();
    if (read.kind == kStorageOffset) {
      out = impl->storage_offset();
      return true;
    }
    c10::IntArrayRef entries = read.kind == kSize ? impl->sizes() : impl->strides();
    if (read.index < 0 || read.index >= static_cast<int64_t>(entries.size())) return false;
    out = entries[read.index];
    return true;
  } catch (...) {  // symbolic or nested sizes: not the tensor we compiled for
    return false;
  }
}

inline __int128 python_modulo(__int128 value, __int128 modulus) {
  __int128 remainder = value % modulus;
  if (remainder != 0 && ((remainder < 0) != (modulus < 0))) remainder += modulus;
  return remainder;
}

inline bool compare(int comparison, __int128 left, __int128 right) {
  switch (comparison) {
    case kEq: return left == right;
    case kNe: return left != right;
    case kGe: return left >= right;
    case kGt: return left > right;
    case kLe: return left <= right;
    default: return left < right;
  }
}

// 1: every relation holds for the tensors in `registers` (indexed by the step's tensor list).
inline int holds(const Relations& relations, const std::vector<int>& tensor_registers,
                 PyObject** registers) {
  constexpr __int128 kLimit = static_cast<__int128>(1) << 100;
  thread_local std::vector<int64_t> values;
  values.resize(relations.reads.size());
  for (size_t i = 0; i < relations.reads.size(); i++) {
    const Read& read = relations.reads[i];
    if (!read_value(registers[tensor_registers[read.slot]], read, values[i])) return 0;
  }
  for (const Relation& relation : relations.relations) {
    __int128 left = relation.constant;
    for (const auto& [coefficient, read] : relation.terms) {
      left += static_cast<__int128>(coefficient) * values[read];
      if (left > kLimit || left < -kLimit) return 0;  // beyond any real size: fail, recompile
    }
    if (relation.modulus != 0) left = python_modulo(left, relation.modulus);
    if (!compare(relation.comparison, left, relation.right)) return 0;
  }
  return 1;
}

// ---- building a step's relations from Python --------------------------------------------

inline bool parse_read(PyObject* item, size_t tensor_count, Read& out) {
  long long index;
  if (!PyArg_ParseTuple(item, "iiL;a size read is (tensor slot, kind, index)", &out.slot,
                        &out.kind, &index))
    return false;
  out.index = index;
  if (out.slot < 0 || static_cast<size_t>(out.slot) >= tensor_count || out.kind < kSize ||
      out.kind > kStorageOffset || out.index < 0) {
    PyErr_SetString(PyExc_ValueError, "GuardProgram: a size read is out of range");
    return false;
  }
  return true;
}

inline bool parse_relation(PyObject* item, size_t read_count, Relation& out) {
  long long modulus, constant, right;
  PyObject* terms;
  if (!PyArg_ParseTuple(item, "iLLO!L;a relation is (comparison, modulus, constant, terms, "
                        "right)", &out.comparison, &modulus, &constant, &PyTuple_Type, &terms,
                        &right))
    return false;
  out.modulus = modulus;
  out.constant = constant;
  out.right = right;
  if (out.comparison < kEq || out.comparison > kLt) {
    PyErr_SetString(PyExc_ValueError, "GuardProgram: unknown comparison");
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(terms); i++) {
    long long coefficient;
    int read;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(terms, i), "Li;a term is (coefficient, read)",
                          &coefficient, &read))
      return false;
    if (read < 0 || static_cast<size_t>(read) >= read_count) {
      PyErr_SetString(PyExc_ValueError, "GuardProgram: a term's read is out of range");
      return false;
    }
    out.terms.emplace_back(coefficient, read);
  }
  return true;
}

// operand: (reads, relations), both tuples.
inline bool parse(PyObject* operand, size_t tensor_count, Relations& out) {
  PyObject *reads, *relations;
  if (!PyArg_ParseTuple(operand, "O!O!;a sizes step's operand is (reads, relations)",
                        &PyTuple_Type, &reads, &PyTuple_Type, &relations))
    return false;
  out.reads.resize(PyTuple_GET_SIZE(reads));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(reads); i++)
    if (!parse_read(PyTuple_GET_ITEM(reads, i), tensor_count, out.reads[i])) return false;
  out.relations.resize(PyTuple_GET_SIZE(relations));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(relations); i++)
    if (!parse_relation(PyTuple_GET_ITEM(relations, i), out.reads.size(), out.relations[i]))
      return false;
  return true;
}

}  // namespace size_relations
