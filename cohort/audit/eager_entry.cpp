// Eager PyTorch at the native entry: each operator written as inductor_refs.py writes it in
// eager torch, here as the same ATen calls from C++ - through the dispatcher to ATen's CPU
// kernels, with no Python in the loop. The timer calls cohort_eager_run(state) like any
// entry. tests/test_eager.py checks each function against its Python twin bit for bit.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <vector>

namespace {

using Inputs = std::vector<at::Tensor>;
using Fn = at::Tensor (*)(const Inputs&, const std::vector<int64_t>&);

at::Tensor rmsnorm(const Inputs& a, const std::vector<int64_t>&) {
  const at::Tensor& x = a[0];
  return x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * a[1];
}

at::Tensor layernorm(const Inputs& a, const std::vector<int64_t>&) {
  return at::layer_norm(a[0], {a[0].size(-1)}, a[1], a[2], 1e-5);
}

at::Tensor masked_softmax(const Inputs& a, const std::vector<int64_t>&) {
  at::Tensor off = a[1].bitwise_not();
  return at::softmax(a[0].masked_fill(off, -std::numeric_limits<double>::infinity()), -1)
      .masked_fill(off, 0.0);
}

at::Tensor swiglu(const Inputs& a, const std::vector<int64_t>&) { return at::silu(a[0]) * a[1]; }

at::Tensor gelu_residual(const Inputs& a, const std::vector<int64_t>&) { return at::gelu(a[0]) + a[1]; }

at::Tensor gelu(const Inputs& a, const std::vector<int64_t>&) { return at::gelu(a[0]); }

at::Tensor gelu_tanh(const Inputs& a, const std::vector<int64_t>&) { return at::gelu(a[0], "tanh"); }

at::Tensor rope(const Inputs& a, const std::vector<int64_t>&) {
  std::vector<at::Tensor> xs = a[0].unflatten(-1, {-1, 2}).unbind(-1);
  const at::Tensor &x0 = xs[0], &x1 = xs[1], &c = a[1], &s = a[2];
  return at::stack({x0 * c - x1 * s, x0 * s + x1 * c}, -1).flatten(-2);
}

at::Tensor rope_half(const Inputs& a, const std::vector<int64_t>&) {
  const at::Tensor &x = a[0], &c = a[1], &s = a[2];
  int64_t h = c.size(-1);
  at::Tensor x0 = x.slice(-1, 0, h), x1 = x.slice(-1, h, 2 * h);
  return at::cat({x0 * c - x1 * s, x0 * s + x1 * c, x.slice(-1, 2 * h)}, -1);
}

at::Tensor rope_pairs(const Inputs& a, const std::vector<int64_t>&) {
  const at::Tensor &x = a[0], &c = a[1], &s = a[2];
  int64_t h = c.size(-1);
  at::Tensor x0 = x.slice(-1, 0, 2 * h, 2), x1 = x.slice(-1, 1, 2 * h, 2);
  at::Tensor rot = at::stack({x0 * c - x1 * s, x0 * s + x1 * c}, -1).flatten(-2);
  return at::cat({rot, x.slice(-1, 2 * h)}, -1);
}

at::Tensor attention(const Inputs& a, const std::vector<int64_t>&) {
  int64_t rep = a[0].size(1) / a[1].size(1);
  return at::scaled_dot_product_attention(a[0], a[1].repeat_interleave(rep, 1), a[2].repeat_interleave(rep, 1));
}

at::Tensor attention_causal(const Inputs& a, const std::vector<int64_t>&) {
  int64_t rep = a[0].size(1) / a[1].size(1);
  int64_t sq = a[0].size(2), skv = a[1].size(2);
  at::Tensor keep = at::ones({sq, skv}, at::kBool).tril(skv - sq);
  return at::scaled_dot_product_attention(a[0], a[1].repeat_interleave(rep, 1), a[2].repeat_interleave(rep, 1),
                                          keep);
}

at::Tensor matmul(const Inputs& a, const std::vector<int64_t>&) { return at::matmul(a[0], a[1]); }

at::Tensor cumsum(const Inputs& a, const std::vector<int64_t>&) { return at::cumsum(a[0], -1); }

at::Tensor transpose(const Inputs& a, const std::vector<int64_t>&) { return a[0].transpose(-1, -2).contiguous(); }

at::Tensor histogram(const Inputs& a, const std::vector<int64_t>& shape) {
  int64_t bins = shape.at(1);
  const at::Tensor& idx = a[0];
  at::Tensor valid = idx.ge(0).logical_and(idx.lt(bins));
  at::Tensor slot = at::where(valid, idx, bins).to(at::kLong);
  return at::zeros({bins + 1}, at::kInt).scatter_add(0, slot, at::ones_like(idx)).slice(0, 0, bins);
}

struct Entry {
  const char* name;
  Fn fn;
};

const Entry kOps[] = {
    {"rmsnorm", rmsnorm},       {"layernorm", layernorm},         {"masked_softmax", masked_softmax},
    {"swiglu", swiglu},         {"gelu_residual", gelu_residual}, {"gelu", gelu},
    {"gelu_tanh", gelu_tanh},   {"rope", rope},                   {"rope_half", rope_half},
    {"rope_pairs", rope_pairs}, {"attention", attention},         {"attention_causal", attention_causal},
    {"matmul", matmul},         {"cumsum", cumsum},               {"transpose", transpose},
    {"histogram", histogram},
};

struct State {
  Fn fn;
  Inputs inputs;
  std::vector<int64_t> shape;
  at::Tensor out;
  int64_t errors = 0;
  std::string error;
  volatile int64_t touched = 0;
};

at::ScalarType scalar_type(int code) {
  switch (code) {
    case 0: return at::kFloat;
    case 1: return at::kInt;
    case 2: return at::kBool;
    case 3: return at::kBFloat16;
    case 4: return at::kHalf;
    default: throw std::invalid_argument("unknown dtype code " + std::to_string(code));
  }
}

void set_error(char* err, int64_t len, const std::string& text) {
  if (err && len > 0) {
    std::strncpy(err, text.c_str(), static_cast<size_t>(len - 1));
    err[len - 1] = '\0';
  }
}

}  // namespace

extern "C" {

// The names this build knows, comma-separated (for the Python side's check).
const char* cohort_eager_ops() {
  static std::string names = [] {
    std::string s;
    for (const Entry& e : kOps) s += (s.empty() ? "" : ",") + std::string(e.name);
    return s;
  }();
  return names.c_str();
}

// A state for one operator on caller-owned input buffers (wrapped, not copied). ndims[i] dims
// of input i follow one another in dims; dtypes are the codes of scalar_type. NULL on error
// (the reason in err).
void* cohort_eager_new(const char* op, int64_t n_inputs, void* const* data, const int64_t* ndims,
                       const int64_t* dims, const int32_t* dtypes, const int64_t* shape, int64_t shape_len,
                       char* err, int64_t err_len) {
  try {
    Fn fn = nullptr;
    for (const Entry& e : kOps)
      if (std::strcmp(e.name, op) == 0) fn = e.fn;
    if (!fn) throw std::invalid_argument(std::string("no eager entry for operator ") + op);
    auto* st = new State();
    st->fn = fn;
    st->shape.assign(shape, shape + shape_len);
    const int64_t* d = dims;
    for (int64_t i = 0; i < n_inputs; ++i) {
      std::vector<int64_t> sizes(d, d + ndims[i]);
      d += ndims[i];
      st->inputs.push_back(at::from_blob(data[i], sizes, at::TensorOptions().dtype(scalar_type(dtypes[i]))));
    }
    return st;
  } catch (const std::exception& e) {
    set_error(err, err_len, e.what());
    return nullptr;
  }
}

// One eager call, as a Python loop `y = f(*xs)` under torch.inference_mode() does it: the
// output is allocated by the call, and the previous one is released when the new one replaces it.
void cohort_eager_run(void* state) {
  auto* st = static_cast<State*>(state);
  try {
    c10::InferenceMode guard;
    st->out = st->fn(st->inputs, st->shape);
  } catch (const std::exception& e) {
    st->errors += 1;
    st->error = e.what();
  }
}

// The timer's own per-call cost through the same call shape, nothing else.
void cohort_eager_overhead(void* state) { static_cast<State*>(state)->touched += 1; }

int64_t cohort_eager_errors(void* state, char* err, int64_t err_len) {
  auto* st = static_cast<State*>(state);
  set_error(err, err_len, st->error);
  return st->errors;
}

// The last output: copied into dst (nbytes of it, contiguous) when its size matches; returns
// its byte count (-1: no output yet).
int64_t cohort_eager_output(void* state, void* dst, int64_t nbytes) {
  auto* st = static_cast<State*>(state);
  if (!st->out.defined()) return -1;
  try {
    c10::InferenceMode guard;
    at::Tensor c = st->out.contiguous();
    int64_t have = static_cast<int64_t>(c.numel()) * static_cast<int64_t>(c.element_size());
    if (dst && have == nbytes) std::memcpy(dst, c.data_ptr(), static_cast<size_t>(nbytes));
    return have;
  } catch (const std::exception& e) {
    st->errors += 1;
    st->error = e.what();
    return -2;
  }
}

// Fill the last output with a value (a poison before timed rounds); 0 if there is none, 2 if it
// is a view of an input (not filled).
int64_t cohort_eager_fill(void* state, double value) {
  auto* st = static_cast<State*>(state);
  if (!st->out.defined()) return 0;
  // eager may return a view of an input (transpose of a 1x1 matrix is already contiguous):
  // poisoning it would write into the input, so such an output is left alone
  for (const at::Tensor& in : st->inputs)
    if (st->out.is_alias_of(in)) return 2;
  try {
    c10::InferenceMode guard;   // the output is an inference tensor: written in inference mode only
    st->out.fill_(value);
    return 1;
  } catch (const std::exception& e) {
    st->errors += 1;
    st->error = e.what();
    return -1;
  }
}

void cohort_eager_free(void* state) { delete static_cast<State*>(state); }

}  // extern "C"
