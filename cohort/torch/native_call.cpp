// cohort.torch's native call path (native_call.py builds, loads and drives this file).
//
// One generic launcher, registered with the dispatcher for CPU and AutogradCPU under each op
// that native_call.py describes (from its TorchOp record: binding.NativeCall). A call whose
// arguments pass the fast-path checks (float32 or bool CPU tensors, contiguous, sizes as the
// op's roles say, eps finite in [0, FLT_MAX], no gradient to record, plain dispatch keys) and
// whose launch shape has a pooled argument block takes that block, writes the tensors' data
// pointers at the plan's pointer slots, calls the native entry and checks the error word: no
// Python. Everything else calls the op's Python implementation with the GIL (the same function
// the Python path registers), so results, errors and exception types are the Python path's:
// a first launch of a shape (Python runs it and hands one of its pooled blocks over), a recorded
// error (Python raises it, or reruns the checked build), any other dtype, layout or key.
//
// The blocks are Python's (PreparedLaunch objects kept alive by native_call.py); this file only
// borrows their addresses. A block is used by one call at a time (popped from its pool under the
// lock): two threads launching one shape take two blocks.
#include <Python.h>

#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using Stack = std::vector<c10::IValue>;
using Entry = void (*)(void*);

constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1024;   // checks.MAX_ELEMENTS
constexpr size_t kMaxPools = 4096;     // launch shapes with native blocks (then new shapes run in Python)

struct Block {
  int64_t* args;   // the argument block (PreparedLaunch.args)
  int64_t* err;    // its error word
  Entry fn;        // the entry run on the calling thread
  int64_t handle;  // native_call.py's index of the PreparedLaunch
};

struct Pool {                                // one launch shape of one op in one variant
  std::vector<Block> idle;
  std::vector<std::pair<int, int>> writes;   // (pointer slot, tensor: argument index, nargs = output)
  std::vector<int64_t> out_sizes;            // the output's sizes (ops whose first role is 't')
  int owned = 0;                             // blocks handed over (idle or in use)
};

constexpr int kKeyWords = 40;

struct Key {                                 // op, variant, then what the roles put in: shape and scalars
  int64_t n = 0;
  int64_t w[kKeyWords];
  bool put(int64_t v) {
    if (n == kKeyWords) return false;
    w[n++] = v;
    return true;
  }
  bool operator==(const Key& o) const { return n == o.n && std::memcmp(w, o.w, n * sizeof(int64_t)) == 0; }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < k.n; ++i) h = (h ^ static_cast<uint64_t>(k.w[i])) * 1099511628211ull;
    return h ^ (h >> 29);
  }
};

// Roles, one character per schema argument (binding.NativeCall): x (the first tensor: the output
// is empty_like(x)), v (1-D, x's last dimension), s (x's shape), m (x's shape, bool), e (float,
// finite, 0 <= e <= FLT_MAX), t (a tensor of any shape: its sizes are part of the key, and the
// output's sizes were recorded with the pool), b (bool), f (float or None), i (int or None),
// n (None only). Every tensor is float32 except m; a non-contiguous one is copied first.
struct Op {
  int64_t id;
  std::string name, roles;
  bool row;            // x needs a dimension; the key holds its last one
  PyObject* impl;      // the Python implementation (the CPU kernel of the Python path)
  PyObject* autograd;  // the Python AutogradCPU kernel: f(keyset raw repr, *args)
  PyObject* miss;      // native_call._miss(pool address, variant token, *args)
  PyObject* recover;   // native_call._recover(handle) -> the entry address from now on
  const Op* rope = nullptr;   // rope_hf's composite (run_rope_hf): the native rope op it launches through
  std::string message;        // ... and the ValueError it raises when a table's two halves differ
};

std::mutex mu;
std::unordered_map<Key, Pool*, KeyHash> pools;        // never erased while registered: blocks are borrowed
std::vector<std::unique_ptr<Op>> ops;
std::unique_ptr<torch::Library> library;
PyObject* contextvar = nullptr;                       // launch._current
std::atomic<uintptr_t> default_variant{0};           // id(launch._default[0])
std::atomic<bool> scoped{false};                      // a `with variant(...)` was entered: read the contextvar
std::atomic<int> paused{0};                           // launch.recording() blocks open: every call in Python
std::atomic<int64_t> native_launches{0};

uintptr_t variant_token() {
  uintptr_t dflt = default_variant.load(std::memory_order_acquire);
  if (!scoped.load(std::memory_order_acquire)) return dflt;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* v = nullptr;
  uintptr_t token = dflt;
  if (PyContextVar_Get(contextvar, nullptr, &v) == 0 && v != nullptr) {
    if (v != Py_None) token = reinterpret_cast<uintptr_t>(v);
    Py_DECREF(v);
  } else {
    PyErr_Clear();
  }
  PyGILState_Release(g);
  return token;
}

PyObject* to_python(const c10::IValue& v) {
  if (v.isTensor()) return THPVariable_Wrap(v.toTensor());
  if (v.isDouble()) return PyFloat_FromDouble(v.toDouble());
  if (v.isBool()) return PyBool_FromLong(v.toBool());
  if (v.isInt()) return PyLong_FromLongLong(v.toInt());
  if (v.isNone()) Py_RETURN_NONE;
  PyErr_Format(PyExc_TypeError, "cohort native call: an argument of type %s", v.tagKind().c_str());
  return nullptr;
}

[[noreturn]] void raise_python(PyGILState_STATE g) {
  python_error e;
  e.persist();
  PyGILState_Release(g);
  throw std::move(e);
}

// fn(*head, *args) with the GIL; the stack's arguments replaced by its result: a Tensor, or a
// tuple of Tensors (rope_hf's (q', k')), each one a return of the op.
void call_python(PyObject* fn, std::initializer_list<PyObject*> head, size_t nargs, Stack* stack) {
  PyGILState_STATE g = PyGILState_Ensure();
  size_t base = stack->size() - nargs;
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(head.size() + nargs));
  if (tuple == nullptr) raise_python(g);
  Py_ssize_t i = 0;
  for (PyObject* h : head) PyTuple_SET_ITEM(tuple, i++, h);   // steals
  for (size_t a = 0; a < nargs; ++a) {
    PyObject* o = to_python((*stack)[base + a]);
    if (o == nullptr) {
      Py_DECREF(tuple);
      raise_python(g);
    }
    PyTuple_SET_ITEM(tuple, i++, o);
  }
  PyObject* r = PyObject_Call(fn, tuple, nullptr);
  Py_DECREF(tuple);
  if (r == nullptr) raise_python(g);
  std::vector<at::Tensor> ys;
  const bool many = PyTuple_Check(r);
  const Py_ssize_t n = many ? PyTuple_GET_SIZE(r) : 1;
  for (Py_ssize_t j = 0; j < n; ++j) {
    PyObject* item = many ? PyTuple_GET_ITEM(r, j) : r;
    if (!THPVariable_Check(item)) {
      Py_DECREF(r);
      PyErr_SetString(PyExc_TypeError, "cohort native call: the Python implementation returned no Tensor");
      raise_python(g);
    }
    ys.push_back(THPVariable_Unpack(item));
  }
  Py_DECREF(r);
  PyGILState_Release(g);
  stack->erase(stack->end() - static_cast<std::ptrdiff_t>(nargs), stack->end());
  for (auto& y : ys) stack->emplace_back(std::move(y));
}

bool plain_tensor(const c10::IValue& v, c10::ScalarType dtype) {
  if (!v.isTensor()) return false;
  const at::Tensor& t = v.toTensor();
  return t.defined() && t.scalar_type() == dtype && t.layout() == c10::kStrided && t.device().is_cpu() &&
         !t.is_neg() && !t.is_conj() && t.numel() <= kMaxElements;
}

// Copies the elements of a strided view in row-major order (bits, as T of the element's size).
template <typename T>
T* copy_rows(const T* src, T* dst, c10::IntArrayRef sizes, c10::IntArrayRef strides, size_t d) {
  const int64_t n = sizes[d], st = strides[d];
  if (d + 1 == sizes.size()) {
    if (st == 1) {   // rows of contiguous elements (a transposed view's last dimension)
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
      return dst + n;
    }
    for (int64_t i = 0; i < n; ++i) *dst++ = src[i * st];
    return dst;
  }
  for (int64_t i = 0; i < n; ++i) dst = copy_rows(src + i * st, dst, sizes, strides, d + 1);
  return dst;
}

constexpr int64_t kSmallCopy = int64_t(1) << 16;   // elements: below it a plain loop, above it ATen's copy

// A non-contiguous tensor argument replaced by its contiguous copy (the copy the Python
// implementation makes first; the same values, so the same launch). A small one (the q, k and
// v views of transformers' attention at one token or a short prompt) is copied by a loop here:
// ATen's contiguous() of a transposed 4-D view costs several microseconds at any size
// (docs/torch/call_path.md, "The Llama example").
void make_contiguous(c10::IValue& v) {
  const at::Tensor& t = v.toTensor();
  if (t.is_contiguous()) return;
  if (t.numel() > kSmallCopy) {
    v = t.contiguous();
    return;
  }
  at::Tensor out = at::detail::empty_cpu(t.sizes(), t.scalar_type(), false, std::nullopt);
  if (t.element_size() == 4)
    copy_rows(static_cast<const uint32_t*>(t.const_data_ptr()), static_cast<uint32_t*>(out.data_ptr()), t.sizes(),
              t.strides(), 0);
  else if (t.element_size() == 1)
    copy_rows(static_cast<const uint8_t*>(t.const_data_ptr()), static_cast<uint8_t*>(out.data_ptr()), t.sizes(),
              t.strides(), 0);
  else
    out = t.contiguous();
  v = std::move(out);
}

uint64_t bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof(double));   // -0.0 is its own key
  return u;
}

enum class Fast { done, miss, python };

// The fast path; on a miss, `pool_out` and `token_out` say which pool may get a block.
Fast fast(const Op& op, Stack* stack, Pool** pool_out, uintptr_t* token_out) {
  if (paused.load(std::memory_order_relaxed)) return Fast::python;
  const size_t nargs = op.roles.size();
  const size_t base = stack->size() - nargs;
  Key key;
  key.put(op.id);
  key.put(0);   // the variant, below
  const bool like_x = op.roles[0] == 'x';
  if (like_x) {
    c10::IValue& xv = (*stack)[base];
    if (!plain_tensor(xv, c10::kFloat)) return Fast::python;
    if ((op.row && xv.toTensor().dim() == 0) || xv.toTensor().numel() == 0) return Fast::python;
    make_contiguous(xv);
    key.put(xv.toTensor().numel());
    key.put(op.row ? xv.toTensor().size(-1) : 0);
  }
  for (size_t a = like_x ? 1 : 0; a < nargs; ++a) {
    c10::IValue& v = (*stack)[base + a];
    const char role = op.roles[a];
    switch (role) {
      case 'v':
      case 's':
      case 'm':
      case 't': {
        if (!plain_tensor(v, role == 'm' ? c10::kBool : c10::kFloat)) return Fast::python;
        const at::Tensor& t = v.toTensor();
        if (role == 'v' && (t.dim() != 1 || t.size(0) != key.w[3])) return Fast::python;
        if ((role == 's' || role == 'm') && t.sizes() != (*stack)[base].toTensor().sizes()) return Fast::python;
        if (role == 't') {
          if (t.numel() == 0 || !key.put(t.dim())) return Fast::python;
          for (int64_t d : t.sizes())
            if (!key.put(d)) return Fast::python;
        }
        make_contiguous(v);
        break;
      }
      case 'e': {
        if (!v.isDouble()) return Fast::python;
        double e = v.toDouble();
        if (!(e >= 0.0 && e <= static_cast<double>(FLT_MAX))) return Fast::python;   // NaN fails too
        key.put(static_cast<int64_t>(bits(e)));
        break;
      }
      case 'b':
        if (!v.isBool()) return Fast::python;
        key.put(v.toBool());
        break;
      case 'f':
      case 'i':
        if (v.isNone()) {
          key.put(0);
          key.put(0);
        } else if (role == 'f' ? v.isDouble() : v.isInt()) {
          key.put(1);
          if (!key.put(role == 'f' ? static_cast<int64_t>(bits(v.toDouble())) : v.toInt())) return Fast::python;
        } else {
          return Fast::python;
        }
        break;
      case 'n':
        if (!v.isNone()) return Fast::python;
        break;
      default:
        return Fast::python;
    }
  }
  key.w[1] = static_cast<int64_t>(variant_token());
  Block b;
  Pool* pool;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = pools.find(key);
    if (it == pools.end()) {
      if (pools.size() >= kMaxPools) return Fast::python;
      it = pools.emplace(key, new Pool()).first;
    }
    pool = it->second;
    if (pool->idle.empty()) {
      *pool_out = pool;
      *token_out = static_cast<uintptr_t>(key.w[1]);
      return Fast::miss;
    }
    b = pool->idle.back();
    pool->idle.pop_back();
  }
  const at::Tensor& first = (*stack)[base].toTensor();
  at::Tensor y = at::detail::empty_cpu(like_x ? first.sizes() : c10::IntArrayRef(pool->out_sizes), c10::kFloat,
                                       false, std::nullopt);
  for (const auto& [slot, src] : pool->writes) {
    const at::Tensor& t = src == static_cast<int>(nargs) ? y : (*stack)[base + src].toTensor();
    b.args[slot] = reinterpret_cast<int64_t>(t.data_ptr());
  }
  b.fn(b.args);
  native_launches.fetch_add(1, std::memory_order_relaxed);
  if (b.err[0] != 0) {   // an error recorded, or a launch the proof did not cover: Python raises or reruns
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* r = PyObject_CallFunction(op.recover, "L", static_cast<long long>(b.handle));
    if (r == nullptr) {
      {
        std::lock_guard<std::mutex> lock(mu);
        pool->owned -= 1;   // dropped, as the Python path drops a block whose launch raised
      }
      raise_python(g);
    }
    b.fn = reinterpret_cast<Entry>(PyLong_AsVoidPtr(r));   // the checked build, after a fallback
    Py_DECREF(r);
    PyGILState_Release(g);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    pool->idle.push_back(b);
  }
  stack->erase(stack->end() - static_cast<std::ptrdiff_t>(nargs), stack->end());
  stack->emplace_back(std::move(y));
  return Fast::done;
}

void run_rope_hf(const Op& op, Stack* stack);

void run(const Op& op, Stack* stack) {
  if (op.rope != nullptr) return run_rope_hf(op, stack);
  Pool* pool = nullptr;
  uintptr_t token = 0;
  switch (fast(op, stack, &pool, &token)) {
    case Fast::done:
      return;
    case Fast::miss: {   // Python runs the launch and may hand this shape one of its blocks
      PyGILState_STATE g = PyGILState_Ensure();
      PyObject* address = PyLong_FromVoidPtr(pool);
      PyObject* variant = PyLong_FromSize_t(token);
      PyGILState_Release(g);
      call_python(op.miss, {address, variant}, op.roles.size(), stack);
      return;
    }
    case Fast::python:
      call_python(op.impl, {}, op.roles.size(), stack);
      return;
  }
}

// rope_hf(q, k, cos, sin) -> (q', k') with transformers' rotate-half tables, in C++: what
// checks.rope_hf and rope_hf_impl (attention_ops.py) do for one table shared by every row
// (cos/sin [S, R] or [1, S, R], float32, q/k 4-D and non-empty), the rest going to the Python
// implementation, which raises its errors. The two halves of each table must be equal (a
// property of the data, checked on every call): compared element by element as torch.equal
// compares them (==: NaN differs from itself, -0.0 equals 0.0), so this path accepts and
// rejects exactly the tables the Python path does, with its ValueError. The first halves are
// copied into [S, R/2] tables (the contiguous tables rope_impl is given there), then q and k
// each go through the native rope op (run: its pooled blocks, or its Python miss handler on
// a first launch), as rope_impl(q, c, s, False) and rope_impl(k, c, s, False).
bool shared_table(const at::Tensor& cos, int64_t S, int64_t D) {
  const int64_t R = cos.size(-1);
  return (cos.dim() == 2 || (cos.dim() == 3 && cos.size(0) == 1)) && cos.size(-2) == S && R > 0 && R % 2 == 0 &&
         R <= D;
}

// The first halves of `table` ([S, R] rows, contiguous) into `half` ([S, R/2]); false when a
// row's two halves differ.
bool halves_equal(const at::Tensor& table, at::Tensor& half, int64_t S, int64_t h) {
  const float* t = table.data_ptr<float>();
  float* o = half.data_ptr<float>();
  bool same = true;
  for (int64_t i = 0; i < S; ++i) {
    const float* row = t + i * 2 * h;
    for (int64_t j = 0; j < h; ++j) {
      same &= row[j] == row[h + j];
      o[i * h + j] = row[j];
    }
  }
  return same;
}

void run_rope_hf(const Op& op, Stack* stack) {
  const size_t base = stack->size() - 4;
  auto python = [&] { call_python(op.impl, {}, 4, stack); };
  if (paused.load(std::memory_order_relaxed)) return python();
  for (size_t a = 0; a < 4; ++a)
    if (!plain_tensor((*stack)[base + a], c10::kFloat)) return python();
  const at::Tensor& q = (*stack)[base].toTensor();
  const at::Tensor& k = (*stack)[base + 1].toTensor();
  if (q.dim() != 4 || k.dim() != 4 || q.numel() == 0 || k.numel() == 0) return python();
  const int64_t S = q.size(2), D = q.size(3);
  if (k.size(0) != q.size(0) || k.size(2) != S || k.size(3) != D) return python();
  c10::IValue& cv = (*stack)[base + 2];
  c10::IValue& sv = (*stack)[base + 3];
  if (cv.toTensor().sizes() != sv.toTensor().sizes() || !shared_table(cv.toTensor(), S, D)) return python();
  make_contiguous(cv);
  make_contiguous(sv);
  const int64_t h = cv.toTensor().size(-1) / 2;
  at::Tensor c = at::detail::empty_cpu({S, h}, c10::kFloat, false, std::nullopt);
  at::Tensor s = at::detail::empty_cpu({S, h}, c10::kFloat, false, std::nullopt);
  const bool same_cos = halves_equal(cv.toTensor(), c, S, h);
  if (!(same_cos && halves_equal(sv.toTensor(), s, S, h))) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyErr_SetString(PyExc_ValueError, op.message.c_str());
    raise_python(g);
  }
  at::Tensor out[2];
  for (int i = 0; i < 2; ++i) {
    Stack one;
    one.reserve(4);
    one.emplace_back((*stack)[base + i]);
    one.emplace_back(c);
    one.emplace_back(s);
    one.emplace_back(false);
    run(*op.rope, &one);
    out[i] = one.back().toTensor();
  }
  stack->erase(stack->end() - 4, stack->end());
  stack->emplace_back(std::move(out[0]));
  stack->emplace_back(std::move(out[1]));
}

const c10::DispatchKeySet kPlain = c10::DispatchKeySet(c10::DispatchKey::CPU).add(c10::DispatchKey::AutogradCPU);

struct CpuKernel final : c10::OperatorKernel {
  const Op* op;
  explicit CpuKernel(const Op* o) : op(o) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, Stack* stack) { run(*op, stack); }
};

// binding.fast_autograd in C++: plain keys and no gradient to record run the op here; anything
// else goes to the Python AutogradCPU kernel (custom_op's autograd when it needs it).
struct AutogradKernel final : c10::OperatorKernel {
  const Op* op;
  explicit AutogradKernel(const Op* o) : op(o) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet ks, Stack* stack) {
    const size_t nargs = op->roles.size();
    bool plain = ks == kPlain;
    if (plain && at::GradMode::is_enabled()) {
      for (size_t a = stack->size() - nargs; a < stack->size(); ++a) {
        const c10::IValue& v = (*stack)[a];
        if (v.isTensor() && v.toTensor().defined() && v.toTensor().requires_grad()) {
          plain = false;
          break;
        }
      }
    }
    if (plain) return run(*op, stack);
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* raw = PyLong_FromUnsignedLongLong(ks.raw_repr());
    PyGILState_Release(g);
    call_python(op->autograd, {raw}, nargs, stack);
  }
};

}  // namespace

extern "C" {

// launch._current (borrowed for the process: the module keeps it).
int cohort_native_init(PyObject* var) {
  contextvar = var;
  return 0;
}

void cohort_native_set_default(uintptr_t token) { default_variant.store(token, std::memory_order_release); }
void cohort_native_scoped() { scoped.store(true, std::memory_order_release); }
// For the benchmark's comparison only (native_call.measure_contextvar_read): false is exact only
// while no `with variant(...)` block is open in any thread or context.
void cohort_native_set_scoped(int on) { scoped.store(on != 0, std::memory_order_release); }
void cohort_native_pause(int delta) { paused.fetch_add(delta); }
int64_t cohort_native_launches() { return native_launches.load(); }

// Registers op `name`'s CPU and AutogradCPU kernels (the Python ones must be gone). 0, or -1 with
// a Python exception set. Called with the GIL (ctypes.PyDLL).
int cohort_native_register(const char* name, const char* roles, int row, PyObject* impl, PyObject* autograd,
                           PyObject* miss, PyObject* recover) {
  try {
    if (!library) library = std::make_unique<torch::Library>(torch::Library::IMPL, "cohort", std::nullopt,
                                                             __FILE__, __LINE__);
    auto op = std::make_unique<Op>();
    op->id = static_cast<int64_t>(ops.size());
    op->name = name;
    op->roles = roles;
    op->row = row != 0;
    for (PyObject* o : {impl, autograd, miss, recover}) Py_INCREF(o);
    op->impl = impl;
    op->autograd = autograd;
    op->miss = miss;
    op->recover = recover;
    library->impl(name, torch::dispatch(c10::DispatchKey::CPU,
                                        torch::CppFunction::makeFromBoxedFunctor(std::make_unique<CpuKernel>(op.get()))));
    library->impl(name, torch::dispatch(c10::DispatchKey::AutogradCPU,
                                        torch::CppFunction::makeFromBoxedFunctor(
                                            std::make_unique<AutogradKernel>(op.get()))));
    ops.push_back(std::move(op));
    return 0;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return -1;
  }
}

// Registers `name` as rope_hf's composite (run_rope_hf) over the native op `rope` (registered
// before it), raising ValueError(message) when a table's halves differ. 0, or -1 with a Python
// exception set. Called with the GIL.
int cohort_native_register_rope_hf(const char* name, PyObject* impl, PyObject* autograd, const char* rope,
                                   const char* message) {
  const Op* via = nullptr;
  for (const auto& op : ops)
    if (op->name == rope && op->rope == nullptr) via = op.get();
  if (via == nullptr) {
    PyErr_Format(PyExc_RuntimeError, "cohort native call: %s needs the native op %s, not registered", name, rope);
    return -1;
  }
  if (cohort_native_register(name, "tttt", 0, impl, autograd, Py_None, Py_None) != 0) return -1;
  ops.back()->rope = via;
  ops.back()->message = message;
  return 0;
}

// Removes every registration; the pools go (native_call.py drops its blocks after this).
void cohort_native_unregister() {
  library.reset();
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [k, p] : pools) delete p;
  pools.clear();
  for (auto& op : ops) {
    for (PyObject* o : {op->impl, op->autograd, op->miss, op->recover}) Py_DECREF(o);
  }
  ops.clear();
}

// Whether the pool at `address` takes another block (at most `limit` per shape).
int cohort_native_wants(void* address, int limit) {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<Pool*>(address)->owned < limit;
}

// Hands a block over: its argument block, error word, entry, Python handle, the pointer slots
// (writes: nwrites pairs of slot, tensor index) and the output's sizes.
void cohort_native_donate(void* address, int64_t* args, int64_t* err, void* fn, int64_t handle, const int32_t* writes,
                          int nwrites, const int64_t* out_sizes, int out_dim) {
  std::lock_guard<std::mutex> lock(mu);
  Pool* pool = static_cast<Pool*>(address);
  if (pool->owned == 0) {
    pool->writes.clear();
    for (int i = 0; i < nwrites; ++i) pool->writes.emplace_back(writes[2 * i], writes[2 * i + 1]);
    pool->out_sizes.assign(out_sizes, out_sizes + out_dim);
  }
  pool->owned += 1;
  pool->idle.push_back(Block{args, err, reinterpret_cast<Entry>(fn), handle});
}

}  // extern "C"
