"""The fixed cost of a cohort.torch call: eager, through the dispatcher, and inside a
torch.compile'd graph; and the Llama example's model compiled, cohort against eager.

    python benchmarks/bench_torch_call.py                              # this checkout
    python benchmarks/bench_torch_call.py --before /work/main          # paired before/after
    python benchmarks/bench_torch_call.py --before /work/main --part llama
    python benchmarks/bench_torch_call.py --part layers                # one call, piece by piece
    python benchmarks/bench_torch_call.py --part llama_profile         # a compiled Llama forward, piece by piece

Each checkout (this one, and OTHER_ROOT with --before: another checkout of the
package) runs in a child process of its own, put on PYTHONPATH; the children
stay alive and take turns, so the two are paired under the same load: each
figure is measured in one checkout and at once in the other (which goes first
alternates), one process measuring while the other waits. Every figure is the median over rounds, with the range of the rounds'
figures. One thread (torch's intra-op threads and cohort's caller variant).

calls (per op, at a shape): the native entry alone (the JIT timer's loop, no
Python: the kernel, its prologue and bounds proof); `cohort.torch.<op>` (eager);
`torch.ops.cohort.<op>` (the dispatcher); a torch.compile'd function (Inductor,
fullgraph) calling the op once and one calling it 1+K times in a chain (K =
8), so that in-graph = (chain - once) / K is one more op inside a compiled
graph and its fixed cost is in-graph minus the native entry; eager PyTorch's expression, and its
compiled twins likewise. A figure is the median of batches of --calls calls
(per-call mean in a batch), under torch.no_grad(). The last row, "floor", is a
custom op whose Python implementation only allocates its output: the cost of
any Python custom op through the dispatcher (its native entry counted as 0).

layers: layernorm 1x4096 taken apart, each piece timed alone in this checkout:
the native entry, the ctypes call, the argument block refilled whole (as
every launch did before) or pooled (pointers only), the launcher look-up,
the quick checks, .contiguous(), torch.empty_like, direct(), the whole
implementation, the eager function, the dispatcher (positional, with eps as
a keyword as Inductor's generated code passes it, and under inference_mode,
which skips the autograd key), the floor op, the fake implementation under
FakeTensorMode (what tracing pays once per op at compile time), F.layer_norm.

llama: examples/llama.py's model, one forward of --prompt tokens, eager model
(SDPA) and cohort model each under torch.compile (cohort's fullgraph), at the
example's size and at hidden 2048 / 16 heads (4 KV heads, intermediate 5632).

llama_profile: the same forward at the example's size, this checkout only, taken apart
(LlamaProfile): the compiled graph's own call, what is outside it (Dynamo), and each op the
graph calls besides Inductor's own kernels, calls per forward times µs per call.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {"default": dict(layers=2, hidden=64, heads=4, kv_heads=2, intermediate=176),
           "h2048": dict(layers=2, hidden=2048, heads=16, kv_heads=4, intermediate=5632)}


# ---------------------------------------------------------------- the child: measures one checkout

def cases():
    import torch
    import torch.nn.functional as F

    import cohort.torch as ct
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    x4, w4, b4 = r(1, 4096), r(4096), r(4096)
    g11, u11 = r(1, 11008), r(1, 11008)
    x16 = r(1, 16384)
    q, k, v = r(1, 4, 32, 16), r(1, 2, 32, 16), r(1, 2, 32, 16)
    rep = lambda t: t.repeat_interleave(2, dim=1)
    # rope_hf as transformers' attention calls it: q, k views of the projections, tables [1, S, R]
    qh, kh = r(1, 32, 64).view(1, 32, 4, 16).transpose(1, 2), r(1, 32, 32).view(1, 32, 2, 16).transpose(1, 2)
    angle = torch.arange(32.0)[:, None] * torch.rand(8, generator=g)[None]
    emb = torch.cat((angle, angle), -1)[None]
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(x):
        return torch.cat((-x[..., 8:], x[..., :8]), dim=-1)

    def apply_rotary_pos_emb(q_, k_, c, s):              # transformers' (modeling_llama), unsqueeze_dim=1
        c, s = c.unsqueeze(1), s.unsqueeze(1)
        return q_ * c + rotate_half(q_) * s, k_ * c + rotate_half(k_) * s
    rms = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    # (label, op name, args, chain: args of the second call given the first's output, eager expression)
    return [
        ("rmsnorm 1x4096", "rmsnorm", (x4, w4), lambda y, a: (y, a[1]), rms),
        ("layernorm 1x4096", "layernorm", (x4, w4, b4), lambda y, a: (y,) + a[1:],
         lambda x, w, b: F.layer_norm(x, (4096,), w, b, 1e-5)),
        ("swiglu 1x11008", "swiglu", (g11, u11), lambda y, a: (y, a[1]), lambda g_, u: F.silu(g_) * u),
        ("gelu 1x16384", "gelu", (x16,), lambda y, a: (y,), lambda x: F.gelu(x)),
        ("attention 1x4/2x32x32x16 causal", "attention", (q, k, v, True), lambda y, a: (y,) + a[1:],
         lambda q_, k_, v_, c: F.scaled_dot_product_attention(q_, rep(k_), rep(v_), is_causal=c)),
        ("rope_hf 1x4/2x32x16, tables 1x32x16", "rope_hf", (qh, kh, cos, sin), lambda y, a: (*y, *a[2:]),
         apply_rotary_pos_emb),
        ("floor: a custom op that only allocates, 1x4096", None, (x4,), lambda y, a: (y,), lambda x: x.neg()),
    ], ct


K = 8     # the extra ops of the chained compiled function


def chained(f, chain):
    """f applied 1 + K times, each call on the previous one's output."""
    def run(*a):
        y = f(*a)
        for _ in range(K):
            y = f(*chain(y, a))
        return y
    return run


def floor_op():
    """A custom op whose implementation only allocates its output (Python, on CPU):
    what any custom_op costs through the dispatcher, for comparison."""
    import torch

    def alloc(x):
        return torch.empty_like(x)

    alloc = torch.library.custom_op("cohort_bench::alloc", alloc, mutates_args=(), schema="(Tensor x) -> Tensor")

    @alloc.register_fake
    def _(x):
        return torch.empty_like(x)

    return lambda x: torch.ops.cohort_bench.alloc(x)


def per_call_us(fn, calls: int, batches: int = 3) -> float:
    import numpy as np
    for _ in range(max(20, calls // 20)):
        fn()
    ts = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        ts.append((time.perf_counter_ns() - t0) / calls / 1e3)
    return float(np.median(ts))


class Calls:
    def __init__(self, calls: int, only: str = ""):
        import torch

        from cohort.backend.timer import calibrate_iters, time_entry
        from cohort.torch import launch
        self.calls = calls
        self.cols = {}
        cs, ct = cases()
        for label, name, args, chain, eager in cs:
            if only and not any(w in label for w in only.split(",")):
                continue
            fn, op = (getattr(ct, name), getattr(torch.ops.cohort, name)) if name else (None, None)
            native = None
            if fn is not None:
                with launch.recording() as launches:
                    fn(*args)
                preps = [launcher.prepare(n, tensors, scalars) for launcher, n, tensors, scalars in launches]

                def native(preps=preps):        # every launch of the call (rope_hf: q's and k's)
                    import numpy as np
                    total = 0.0
                    for p in preps:
                        iters = calibrate_iters(p.entry, p.address, target_ns=2e5)
                        total += float(np.median(time_entry(p.entry, p.address, iters, 7))) / 1e3
                    return total
            else:
                fn = op = floor_op()

            one = lambda *a, fn=fn: fn(*a)
            c1, c2 = torch.compile(one, fullgraph=True), torch.compile(chained(fn, chain), fullgraph=True)
            e1, e2 = torch.compile(eager), torch.compile(chained(eager, chain))
            with torch.no_grad():
                for f in (c1, e1, e2):
                    f(*args)
                if native is not None:
                    for got, want in ((c1(*args), fn(*args)), (c2(*args), chained(fn, chain)(*args))):
                        pairs = zip(got, want) if isinstance(got, tuple) else ((got, want),)
                        assert all(torch.equal(a, b) for a, b in pairs)
            self.cols[label] = {
                "native entry": native or (lambda: 0.0),
                "cohort.torch (eager)": lambda f=fn, a=args: f(*a),
                "torch.ops.cohort (dispatcher)": lambda f=op, a=args: f(*a),
                "compiled, 1 op": lambda f=c1, a=args: f(*a),
                "compiled, 1+K ops": lambda f=c2, a=args: f(*a),
                "eager PyTorch": lambda f=eager, a=args: f(*a),
                "compiled PyTorch, 1": lambda f=e1, a=args: f(*a),
                "compiled PyTorch, 1+K": lambda f=e2, a=args: f(*a),
            }

    def measure(self, row: str, col: str) -> float:
        import torch
        with torch.no_grad():
            f = self.cols[row][col]
            return f() if col == "native entry" else per_call_us(f, self.calls)


class Llama:
    def __init__(self, prompt: int, repeat: int, which):
        import copy
        import importlib.util

        import torch
        torch.set_num_threads(1)
        spec = importlib.util.spec_from_file_location("cohort_example_llama", ROOT / "examples" / "llama.py")
        ex = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = ex                  # torch.compile looks modules up by name
        spec.loader.exec_module(ex)
        self.repeat, self.models = repeat, {}
        for name in which:
            cfg = ex.config(**CONFIGS[name])
            ref = ex.build_model(cfg)
            model = ex.use_cohort(copy.deepcopy(ref))
            ids = torch.randint(0, cfg.vocab_size, (1, prompt), generator=torch.Generator().manual_seed(1))
            cr, cm = torch.compile(ref), torch.compile(model, fullgraph=True)
            with torch.no_grad():
                for m in (cr, cm):
                    m(ids)
                    m(ids)
            self.models[name] = {"compiled eager model": lambda m=cr, i=ids: m(i),
                                 "compiled cohort model": lambda m=cm, i=ids: m(i)}

        self.cols = self.models

    def measure(self, row: str, col: str) -> float:
        import numpy as np
        import torch
        with torch.no_grad():
            ts = []
            for _ in range(self.repeat):
                t0 = time.perf_counter()
                self.models[row][col]()
                ts.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(ts))


class LlamaProfile:
    """Where a compiled forward of the example Llama (--prompt tokens, the default size) goes, in
    this checkout, for the eager model and the cohort model: the whole forward; the compiled
    graph's own call (Inductor's code, timed by a backend that wraps the graph Inductor compiles:
    what is left is Dynamo's guards and frame); inside it, each op the graph calls outside
    Inductor's own kernels (cohort's ops, SDPA, matmuls), timed one call at a time by wrapping
    the op the generated code looks up at run time. Rows: per forward, µs (ops: calls x µs)."""

    def __init__(self, prompt: int, repeat: int):
        import copy
        import importlib.util

        import torch
        from torch._inductor.compile_fx import compile_fx
        from torch._inductor.select_algorithm import extern_kernels
        torch.set_num_threads(1)
        spec = importlib.util.spec_from_file_location("cohort_example_llama", ROOT / "examples" / "llama.py")
        ex = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = ex
        spec.loader.exec_module(ex)
        self.repeat = max(repeat, 50)
        cfg = ex.config(**CONFIGS["default"])
        ref = ex.build_model(cfg)
        models = {"eager model": ref, "cohort model": ex.use_cohort(copy.deepcopy(ref))}
        ids = torch.randint(0, cfg.vocab_size, (1, prompt), generator=torch.Generator().manual_seed(1))
        self.inside = [0.0]

        def backend(gm, example_inputs):
            f = compile_fx(gm, example_inputs)

            def timed(*a):
                t0 = time.perf_counter_ns()
                try:
                    return f(*a)
                finally:
                    self.inside[0] += time.perf_counter_ns() - t0
            return timed

        self.run = {}
        with torch.no_grad():
            for name, m in models.items():
                c = torch.compile(m, fullgraph=name == "cohort model", backend=backend)
                c(ids)
                c(ids)
                self.run[name] = lambda c=c: c(ids)
        # the ops the generated code calls outside its own kernels: (label, owner, attribute)
        self.ops = [(f"cohort.{n}", getattr(torch.ops.cohort, n), "default")
                    for n in ("rmsnorm", "rope_hf", "attention", "swiglu")]
        self.ops += [("SDPA (flash, CPU)", torch.ops.aten._scaled_dot_product_flash_attention_for_cpu, "default"),
                     ("mm", extern_kernels, "mm")]
        self.calls = {}                  # (model, op label) -> calls per forward
        for name in models:
            spent = self._timed_pass(name, 1)
            for label, acc in spent.items():
                self.calls[name, label] = len(acc)
        self.labels = {label: f"{label} (calls: " + ", ".join(str(self.calls[m, label]) for m in models) + ")"
                       for label, _, _ in self.ops}
        rows = ["forward", "compiled graph", "outside the graph (Dynamo: guards, frame)",
                *self.labels.values(), "the graph's own kernels and Python"]
        self.cols = {row: list(models) for row in rows}
        self._last = {}

    def _timed_pass(self, name, repeat) -> dict:
        """Forwards of model `name` with the ops wrapped: op label -> the ns of each call."""
        import torch
        spent = {label: [] for label, _, _ in self.ops}
        originals = []
        for label, owner, attr in self.ops:
            f = getattr(owner, attr)
            originals.append((owner, attr, f))

            def timed(*a, f=f, acc=spent[label], **k):
                t0 = time.perf_counter_ns()
                try:
                    return f(*a, **k)
                finally:
                    acc.append(time.perf_counter_ns() - t0)
            setattr(owner, attr, timed)
        try:
            with torch.no_grad():
                for _ in range(repeat):
                    self.run[name]()
        finally:
            for owner, attr, f in originals:
                setattr(owner, attr, f)
        return spent

    def measure_model(self, name) -> dict:
        import numpy as np
        import torch
        run, inside = self.run[name], self.inside
        out = {}
        with torch.no_grad():
            ts, ins = [], []
            for _ in range(self.repeat):
                inside[0] = 0
                t0 = time.perf_counter_ns()
                run()
                ts.append((time.perf_counter_ns() - t0) / 1e3)
                ins.append(inside[0] / 1e3)
        out["forward"], out["compiled graph"] = float(np.median(ts)), float(np.median(ins))
        out["outside the graph (Dynamo: guards, frame)"] = out["forward"] - out["compiled graph"]
        timed_ops = 0.0
        for label, acc in self._timed_pass(name, self.repeat).items():
            per_forward = self.calls[name, label] * (float(np.median(acc)) / 1e3 if acc else 0.0)
            out[self.labels[label]] = per_forward
            timed_ops += per_forward
        out["the graph's own kernels and Python"] = out["compiled graph"] - timed_ops
        return out

    def measure(self, row: str, col: str) -> float:
        if row == "forward" or col not in self._last:
            self._last[col] = self.measure_model(col)
        return self._last[col][row]


class Layers:
    """Where one call's time goes, layer by layer, for layernorm 1x4096 (this checkout's
    code; each piece timed alone, in a loop of --calls calls)."""

    def __init__(self, calls: int):
        import ctypes

        import torch
        import torch.nn.functional as F

        import cohort.torch as ct
        from cohort.backend.timer import calibrate_iters, time_entry
        from cohort.torch import launch, ops
        self.calls = calls
        x, w, b = torch.randn(1, 4096), torch.randn(4096), torch.randn(4096)
        k = ops.op_kernel("layernorm")
        run = launch.launcher(k, (("cols", 4096),), True)
        y = torch.empty_like(x)
        tensors, scalars, n = (x, w, b, y), (1e-5,), k.block
        p = run.prepare(n, tensors, scalars)
        fn, address = p.code.entry_fn, ctypes.c_void_p(p.address)
        op = torch.ops.cohort.layernorm.default
        floor = floor_op()
        with torch.inference_mode():
            xi, wi, bi = x.clone(), w.clone(), b.clone()

        def refill():                       # the whole block written again, proof reset (the path before)
            run.plan.write(p, n, [(t.data_ptr(), t.numel()) for t in tensors], scalars)
            fn(address)

        def native():
            import numpy as np
            iters = calibrate_iters(p.entry, p.address, target_ns=2e5)
            return float(np.median(time_entry(p.entry, p.address, iters, 7))) / 1e3

        def inference():
            with torch.inference_mode():
                op(xi, wi, bi, 1e-5)

        def contextvar_read():       # the native path reading the variant with the GIL on every call
            from cohort.torch import native_call
            if ct.stats()["call_path"] != "native":
                return float("nan")
            with native_call.measure_contextvar_read():
                return per_call_us(lambda: op(x, w, b, 1e-5), self.calls)

        def fake():
            from torch._subclasses.fake_tensor import FakeTensorMode
            with FakeTensorMode() as mode:
                fx, fw, fb = mode.from_tensor(x), mode.from_tensor(w), mode.from_tensor(b)
                t0 = time.perf_counter_ns()
                for _ in range(200):
                    op(fx, fw, fb, 1e-5)
                return (time.perf_counter_ns() - t0) / 200 / 1e3

        quick = lambda: (ops.plain_f32(x) and ops.plain_f32(w) and ops.plain_f32(b) and w.dim() == 1 and b.dim() == 1
                         and x.dim() and w.shape[0] == x.shape[-1] and b.shape[0] == x.shape[-1])
        self.cols = {
            "native entry (timer loop, proof kept)": native,
            "ctypes call of the entry (proof kept)": lambda: fn(address),
            "block refilled whole + entry (proof redone)": refill,
            "Launcher call (pooled block: pointers only)": lambda: run(n, tensors, scalars),
            "launcher() look-up": lambda: launch.launcher(k, (("cols", 4096),), True),
            "quick argument checks": quick,
            ".contiguous() x3": lambda: (x.contiguous(), w.contiguous(), b.contiguous()),
            "torch.empty_like": lambda: torch.empty_like(x),
            "direct()": lambda: ops.direct(x, w, b),
            "layernorm_impl": lambda: ops.layernorm_impl(x, w, b, 1e-5),
            "cohort.torch.layernorm (eager)": lambda: ct.layernorm(x, w, b),
            "torch.ops.cohort.layernorm.default": lambda: op(x, w, b, 1e-5),
            "the same, eps as a keyword (as Inductor calls it)": lambda: op(x, w, b, eps=1e-5),
            "the same, inference_mode (no autograd key)": inference,
            "the same, variant read from the contextvar (GIL)": contextvar_read,
            "floor: custom op only allocating (dispatcher)": lambda: floor(x),
            "fake implementation under FakeTensorMode (compile time)": fake,
            "F.layer_norm": lambda: F.layer_norm(x, (4096,), w, b, 1e-5),
        }

        self.cols = {"layernorm 1x4096": self.cols}

    def measure(self, row: str, col: str) -> float:
        f = self.cols[row][col]
        own = ("native entry", "fake implementation", "the same, variant read")
        return f() if col.startswith(own) else per_call_us(f, self.calls)


def child(a):
    import torch
    torch.set_num_threads(1)
    torch._dynamo.config.cache_size_limit = 64
    if a.part == "layers":
        bench = Layers(a.calls)
    elif a.part == "llama_profile":
        bench = LlamaProfile(a.prompt, a.repeat)
    else:
        bench = Calls(a.calls, a.cases) if a.part == "calls" else Llama(a.prompt, a.repeat, a.configs.split(","))
    print("@@" + json.dumps({row: list(cols) for row, cols in bench.cols.items()}), flush=True)
    path = getattr(sys.modules.get("cohort.torch"), "stats", lambda: {})().get("call_path", "python (no native path)")
    print("@@" + json.dumps(path), flush=True)
    for line in sys.stdin:
        row, col = line.rstrip("\n").split("\t")
        print("@@" + json.dumps(bench.measure(row, col)), flush=True)


# ---------------------------------------------------------------- the parent: pairs the checkouts

def spawn(root: str, a):
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--part", a.part, "--calls", str(a.calls),
           "--prompt", str(a.prompt), "--repeat", str(a.repeat), "--configs", a.configs, "--cases", a.cases]
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root)
    p.cells = read(p)
    p.call_path = read(p)
    return p


def read(p):
    for line in p.stdout:
        if line.startswith("@@"):
            return json.loads(line[2:])
    raise RuntimeError(f"child exited with {p.wait()}")


def summary(rounds: list) -> dict:
    """{row: {column: (median, min, max)}} over rounds, and the derived columns."""
    import numpy as np
    out = {}
    for row in rounds[0]:
        cols = {}
        for c in rounds[0][row]:
            vals = [rr[row][c] for rr in rounds]
            cols[c] = vals
        if "compiled, 1+K ops" in cols:
            one, many, nat = cols["compiled, 1 op"], cols["compiled, 1+K ops"], cols["native entry"]
            cols["in-graph op"] = [(b - o) / K for o, b in zip(one, many)]
            cols["in-graph fixed"] = [(b - o) / K - n for o, b, n in zip(one, many, nat)]
            cols["eager fixed"] = [e - n for e, n in zip(cols["cohort.torch (eager)"], nat)]
            cols["dispatcher fixed"] = [e - n for e, n in zip(cols["torch.ops.cohort (dispatcher)"], nat)]
            cols["in-graph PyTorch op"] = [(b - o) / K for o, b in zip(cols["compiled PyTorch, 1"],
                                                                         cols["compiled PyTorch, 1+K"])]
        out[row] = {c: (float(np.median(v)), min(v), max(v)) for c, v in cols.items()}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("calls", "layers", "llama", "llama_profile"), default="calls")
    ap.add_argument("--before", default=None, help="another checkout to pair with this one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000, help="calls per batch (calls)")
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=10, help="forwards per round (llama)")
    ap.add_argument("--configs", default="default,h2048", help="llama sizes: default, h2048")
    ap.add_argument("--cases", default="", help="calls: only the cases whose label contains one of these "
                                                "comma-separated words (e.g. rope_hf,floor)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a)
    trees = {"after": str(ROOT)}
    if a.before and a.part not in ("layers", "llama_profile"):   # (these time this checkout's pieces only)
        trees = {"before": str(Path(a.before).resolve()), "after": str(ROOT)}
    load0 = os.getloadavg()
    kids = {name: spawn(root, a) for name, root in trees.items()}
    res = {name: [] for name in trees}
    cells = kids["after"].cells
    for r in range(a.rounds):                  # each figure: the checkouts back to back, in turn first
        for name in trees:
            res[name].append({row: {} for row in cells})
        i = r
        for row, cols in cells.items():
            for col in (cols if r % 2 == 0 else cols[::-1]):
                i += 1
                for name in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
                    kids[name].stdin.write(f"{row}\t{col}\n")
                    kids[name].stdin.flush()
                    res[name][-1][row][col] = read(kids[name])
    for p in kids.values():
        p.stdin.close()
        p.wait()
    load1 = os.getloadavg()
    print(f"# {a.part}: {a.rounds} rounds, paired ({', '.join(f'{k}={v}' for k, v in trees.items())}); "
          f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end (2-core machine); call path: "
          f"{', '.join(f'{k} {p.call_path}' for k, p in kids.items())}\n")
    sums = {name: summary(rr) for name, rr in res.items()}
    fmt = lambda t: f"{t[0]:.2f} ({t[1]:.2f}–{t[2]:.2f})"
    rows = list(next(iter(sums.values())))
    if a.part == "calls":
        cols = ["native entry", "cohort.torch (eager)", "eager fixed", "torch.ops.cohort (dispatcher)",
                "dispatcher fixed", "in-graph op", "in-graph fixed", "eager PyTorch", "in-graph PyTorch op",
                "compiled, 1 op", "compiled PyTorch, 1"]
        print("µs per call, median over rounds (range). fixed = the figure minus the native entry; in-graph op ="
              f" (compiled(1+K ops) - compiled(1 op)) / K, K = {K}\n")
    elif a.part == "llama_profile":
        models = list(sums["after"][rows[0]])
        print(f"µs per forward of {a.prompt} tokens (median of {max(a.repeat, 50)} per round), median over rounds "
              f"(range); an op's row: its calls per forward times its median µs per call\n")
        print("| compiled forward, piece | " + " | ".join(models) + " |\n|---|" + "---:|" * len(models))
        for row in rows:
            print(f"| {row} | " + " | ".join(fmt(sums["after"][row][m]) for m in models) + " |")
        return
    elif a.part == "layers":
        print("| layernorm 1x4096: one piece of the call | µs per call, median over rounds (range) |\n|---|---:|")
        for c, v in sums["after"]["layernorm 1x4096"].items():
            print(f"| {c} | {fmt(v)} |")
        return
    else:
        cols = ["compiled eager model", "compiled cohort model"]
        print(f"ms per forward of {a.prompt} tokens, median of {a.repeat} per round, median over rounds (range)\n")
    print("| case | checkout | " + " | ".join(cols) + " |")
    print("|---|---|" + "---:|" * len(cols))
    for row in rows:
        for name in trees:
            print(f"| {row} | {name} | " + " | ".join(fmt(sums[name][row][c]) for c in cols) + " |")
    if a.part == "llama":
        print()
        for row in rows:
            for name in trees:
                s = sums[name][row]
                print(f"{row} {name}: compiled cohort / compiled eager = "
                      f"{s['compiled cohort model'][0] / s['compiled eager model'][0]:.2f}")


if __name__ == "__main__":
    main()
