"""Triton kernels as a Triton user writes them for a GPU, launched with CPU tensors.

    python -m cohort.triton examples/triton_kernels.py     # on cohort's exact reference
    TRITON_INTERPRET=1 python examples/triton_kernels.py   # on Triton's own interpreter

The tutorials' kernels (vector add, fused softmax, matmul with masked edges and
grouped ordering, low-memory dropout, layer norm forward and backward, fused
attention forward, causal and not) and library-style kernels (RMSNorm, SwiGLU,
rotary embedding, cross-entropy), each at small odd sizes so every mask edge is
exercised, each compared with torch: one line per kernel with the largest
absolute error and OK or FAIL; exit status 1 if any kernel fails. Under Triton's
interpreter every kernel but rmsnorm runs and passes: rmsnorm's `eps.to(...)`
fails there (see the kernel's comment), so that run exits 1.

Nothing here knows about cohort: the kernels and launches are plain Triton. The
cases are also importable (CASES, each taking its sizes as keywords) by
benchmarks/bench_triton.py.
"""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step):
        row_ptr = in_ptr + row_idx * in_row_stride
        col = tl.arange(0, BLOCK_SIZE)
        mask = col < n_cols
        row = tl.load(row_ptr + col, mask=mask, other=-float("inf"))
        z = row - tl.max(row, axis=0)
        num = tl.exp(z)
        den = tl.sum(num, axis=0)
        tl.store(out_ptr + row_idx * out_row_stride + col, num / den, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_bn[None, :] < N), other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    keep = random > p
    tl.store(out_ptr + offsets, tl.where(keep, x / (1 - p), 0.0), mask=mask)


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N, GROUP_SIZE_M: tl.constexpr,
                            BLOCK_SIZE_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = (dy).to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.atomic_xchg(Lock, 0)


@triton.jit
def layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
        db += tl.load(DB + offs, mask=mask, other=0.)
    sum_dw = tl.sum(dw, axis=0)
    sum_db = tl.sum(db, axis=0)
    tl.store(FINAL_DW + cols, sum_dw, mask=cols < N)
    tl.store(FINAL_DB + cols, sum_db, mask=cols < N)


@triton.jit
def attn_fwd(Q, K, V, Out, sm_scale, stride_h, stride_t, T, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    h = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    base = h * stride_h
    q = tl.load(Q + base + offs_m[:, None] * stride_t + offs_d[None, :], mask=offs_m[:, None] < T, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = tl.minimum((start_m + 1) * BLOCK_M, T) if CAUSAL else T
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + base + offs_n[None, :] * stride_t + offs_d[:, None], mask=offs_n[None, :] < T, other=0.0)
        qk = tl.dot(q, k)
        valid = offs_n[None, :] < T
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= offs_n[None, :])
        qk = tl.where(valid, qk * qk_scale, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        qk = qk - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + base + offs_n[:, None] * stride_t + offs_d[None, :], mask=offs_n[:, None] < T, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_t + offs_d[None, :], acc.to(Out.dtype.element_ty),
             mask=offs_m[:, None] < T)


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    # `eps.to(...)` is valid Triton (a float argument is an fp32 scalar tensor in a compiled
    # kernel); Triton's interpreter passes it as a Python float and fails on `.to`.
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps.to(tl.float32))
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = cols < n_cols
        x = tl.load(x_ptr + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m).to(tl.float32)
        tl.store(y_ptr + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def swiglu_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=m, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=m, other=0)
    c = (a * tl.sigmoid(a)).to(b.dtype) * b
    tl.store(c_ptr + row * stride + cols, c, mask=m)


@triton.jit
def rope_kernel(q_ptr, cos_ptr, sin_ptr, q_row_stride, q_head_stride, cs_row_stride, n_heads,
                HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    half = HEAD_DIM // 2
    h = tl.arange(0, BLOCK_H)[:, None]
    d = tl.arange(0, HEAD_DIM // 2)[None, :]
    hm = h < n_heads
    cos = tl.load(cos_ptr + row * cs_row_stride + d)
    sin = tl.load(sin_ptr + row * cs_row_stride + d)
    base = q_ptr + row * q_row_stride + h * q_head_stride
    x1 = tl.load(base + d, mask=hm, other=0.0)
    x2 = tl.load(base + half + d, mask=hm, other=0.0)
    tl.store(base + d, x1 * cos - x2 * sin, mask=hm)
    tl.store(base + half + d, x2 * cos + x1 * sin, mask=hm)


@triton.jit
def cross_entropy_kernel(logits_ptr, labels_ptr, loss_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    logits_ptr += row * stride
    label = tl.load(labels_ptr + row)
    m = -float("inf")
    d = 0.0
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(logits_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new))
        m = m_new
    x_label = tl.load(logits_ptr + label).to(tl.float32)
    tl.store(loss_ptr + row, tl.log(d) + m - x_label)


# ---- cases: each builds its inputs at a size and returns (launch, torch_reference, tolerance).
# launch() runs the Triton kernel(s) and returns the output tensor(s); torch_reference() computes
# the same with torch; errors are max |launch - reference| over all outputs.

def _randn(*shape, g):
    return torch.randn(*shape, generator=g)


def vector_add(g, n=1001):
    x, y = _randn(n, g=g), _randn(n, g=g)
    out = torch.empty(n)

    def launch():
        add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK_SIZE=256)
        return out
    return launch, lambda: x + y, 0.0


def softmax(g, rows=37, cols=100):
    x = _randn(rows, cols, g=g)
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)

    def launch():
        softmax_kernel[(min(rows, 8),)](y, x, x.stride(0), y.stride(0), rows, cols, BLOCK_SIZE=block)
        return y
    return launch, lambda: torch.softmax(x, dim=1), 1e-6


def matmul(g, M=45, N=37, K=53):
    a, b = _randn(M, K, g=g), _randn(K, N, g=g)
    c = torch.empty(M, N)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731

    def launch():
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4)
        return c
    return launch, lambda: a @ b, 1e-4 * K ** 0.5


def dropout(g, n=3001, p=0.3):
    x = _randn(n, g=g)
    out = torch.empty(n)

    def launch():
        dropout_kernel[(triton.cdiv(n, 512),)](x, out, n, p, 123, BLOCK_SIZE=512)
        return out

    def reference():
        # the kernel's mask is its own (Philox from the seed): torch checks the kept values and the rate
        kept = out != 0
        rate = kept.float().mean().item()
        if abs(rate - (1 - p)) > 0.05:
            return torch.full_like(out, float("inf"))       # rate far from 1 - p: report as a failure
        return torch.where(kept, x / (1 - p), 0.0)
    return launch, reference, 1e-6


def layer_norm(g, rows=19, cols=300, eps=1e-5):
    x, w, b = _randn(rows, cols, g=g), _randn(cols, g=g), _randn(cols, g=g)
    y = torch.empty_like(x)
    mean, rstd = torch.empty(rows), torch.empty(rows)

    def launch():
        layer_norm_fwd[(rows,)](x, y, w, b, mean, rstd, x.stride(0), cols, eps, BLOCK_SIZE=128)
        return y, mean
    return launch, lambda: (torch.nn.functional.layer_norm(x, (cols,), w, b, eps), x.mean(1)), 1e-4


def layer_norm_backward(g, rows=23, cols=100, eps=1e-5, group=4):
    x = _randn(rows, cols, g=g)
    w, b, dy = _randn(cols, g=g), _randn(cols, g=g), _randn(rows, cols, g=g)
    mean = x.mean(1)
    rstd = 1 / torch.sqrt(x.var(1, unbiased=False) + eps)
    dx, dw, db = torch.empty(rows, cols), torch.empty(cols), torch.empty(cols)
    block = triton.next_power_of_2(cols)

    def launch():
        locks = torch.zeros(2 * group, dtype=torch.int32)
        _dw, _db = torch.zeros(group, cols), torch.zeros(group, cols)
        layer_norm_bwd_dx_fused[(rows,)](dx, dy, _dw, _db, x, w, mean, rstd, locks, x.stride(0), cols,
                                         GROUP_SIZE_M=group, BLOCK_SIZE_N=block)
        layer_norm_bwd_dwdb[(triton.cdiv(cols, 32),)](_dw, _db, dw, db, group, cols, BLOCK_SIZE_M=group,
                                                      BLOCK_SIZE_N=32)
        return dx, dw, db

    def reference():
        xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
        torch.nn.functional.layer_norm(xr, (cols,), wr, br, eps).backward(dy)
        return xr.grad, wr.grad, br.grad
    return launch, reference, 1e-4


def attention(g, heads=3, T=45, D=16, causal=False):
    q, k, v = (_randn(heads, T, D, g=g) for _ in range(3))
    o = torch.empty_like(q)

    def launch():
        attn_fwd[(triton.cdiv(T, 16), heads)](q, k, v, o, D ** -0.5, q.stride(0), q.stride(1), T, HEAD_DIM=D,
                                              BLOCK_M=16, BLOCK_N=16, CAUSAL=causal)
        return o
    return launch, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal), 1e-5


def attention_causal(g, **sizes):
    return attention(g, causal=True, **sizes)


def rmsnorm(g, rows=13, cols=333, eps=1e-6):
    x, w = _randn(rows, cols, g=g), _randn(cols, g=g)
    y = torch.empty_like(x)

    def launch():
        rmsnorm_kernel[(rows,)](x, w, y, x.stride(0), cols, eps, BLOCK=64)
        return y
    return launch, lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w, 1e-5


def swiglu(g, rows=7, cols=99):
    a, b = _randn(rows, cols, g=g), _randn(rows, cols, g=g)
    c = torch.empty_like(a)
    block = triton.next_power_of_2(cols)

    def launch():
        swiglu_kernel[(rows,)](a, b, c, a.stride(0), cols, BLOCK=block)
        return c
    return launch, lambda: torch.nn.functional.silu(a) * b, 1e-5


def rotary(g, T=11, heads=5, D=32):
    q0 = _randn(heads, T, D, g=g).transpose(0, 1)             # [T, heads, D], not contiguous
    inv = 1.0 / 10000 ** (torch.arange(0, D, 2).float() / D)
    pos = torch.arange(T).float()[:, None] * inv[None, :]
    cos, sin = pos.cos().contiguous(), pos.sin().contiguous()
    q = q0.clone()                                            # same strides; the kernel rotates it in place

    def launch():
        q.copy_(q0)
        rope_kernel[(T,)](q, cos, sin, q.stride(0), q.stride(1), cos.stride(0), heads, HEAD_DIM=D,
                          BLOCK_H=triton.next_power_of_2(heads))
        return q

    def reference():
        x1, x2 = q0[..., :D // 2], q0[..., D // 2:]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    return launch, reference, 1e-5


def cross_entropy(g, rows=9, vocab=1000):
    logits = _randn(rows, vocab, g=g) * 3
    labels = torch.randint(0, vocab, (rows,), generator=g)
    loss = torch.empty(rows)

    def launch():
        cross_entropy_kernel[(rows,)](logits, labels, loss, logits.stride(0), vocab, BLOCK=256)
        return loss
    return launch, lambda: torch.nn.functional.cross_entropy(logits, labels, reduction="none"), 1e-5


CASES = {
    "vector add": vector_add,
    "fused softmax": softmax,
    "matmul (grouped, masked edges)": matmul,
    "low-memory dropout": dropout,
    "layer norm forward": layer_norm,
    "layer norm backward": layer_norm_backward,
    "attention forward": attention,
    "attention forward causal": attention_causal,
    "rmsnorm": rmsnorm,
    "swiglu": swiglu,
    "rotary": rotary,
    "cross-entropy": cross_entropy,
}


def max_abs_error(out, ref) -> float:
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    return max((o.float() - r.float()).abs().max().item() for o, r in zip(outs, refs))


def main() -> int:
    failed = 0
    width = max(map(len, CASES))
    for name, case in CASES.items():
        g = torch.Generator().manual_seed(0)
        try:
            launch, reference, tol = case(g)
            err = max_abs_error(launch(), reference())
            verdict = "OK" if err <= tol else "FAIL"
            print(f"{name:<{width}}  max abs error {err:.3g} (tolerance {tol:.3g})  {verdict}")
        except Exception as e:                            # one kernel's failure must not hide the others
            verdict = "FAIL"
            print(f"{name:<{width}}  {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}  FAIL")
        failed += verdict == "FAIL"
    print(f"{len(CASES) - failed} of {len(CASES)} kernels OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
