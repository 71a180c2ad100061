"""Single-thread memory bandwidth of this machine, measured with the same
native timer as our kernels: a read kernel (sum of squares, 4 independent
<8 x float> accumulators) and a copy kernel (<8 x float> loads and stores),
on buffers sized for L1/L2, L3 and DRAM. These are the physical limits the
row operators are compared with.

    python benchmarks/bandwidth.py
"""
import numpy as np

from cohort.backend import jit, target, timer

IR = r"""
define void @bw_read(ptr %args) {
entry:
  %pp = getelementptr i64, ptr %args, i64 0
  %p64 = load i64, ptr %pp
  %p = inttoptr i64 %p64 to ptr
  %np = getelementptr i64, ptr %args, i64 1
  %n = load i64, ptr %np
  %outp = getelementptr i64, ptr %args, i64 3
  %out64 = load i64, ptr %outp
  %out = inttoptr i64 %out64 to ptr
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %a0 = phi <8 x float> [zeroinitializer, %entry], [%b0, %loop]
  %a1 = phi <8 x float> [zeroinitializer, %entry], [%b1, %loop]
  %a2 = phi <8 x float> [zeroinitializer, %entry], [%b2, %loop]
  %a3 = phi <8 x float> [zeroinitializer, %entry], [%b3, %loop]
  %q0 = getelementptr float, ptr %p, i64 %i
  %v0 = load <8 x float>, ptr %q0, align 4
  %i8 = add i64 %i, 8
  %q1 = getelementptr float, ptr %p, i64 %i8
  %v1 = load <8 x float>, ptr %q1, align 4
  %i16 = add i64 %i, 16
  %q2 = getelementptr float, ptr %p, i64 %i16
  %v2 = load <8 x float>, ptr %q2, align 4
  %i24 = add i64 %i, 24
  %q3 = getelementptr float, ptr %p, i64 %i24
  %v3 = load <8 x float>, ptr %q3, align 4
  %s0 = fmul <8 x float> %v0, %v0
  %s1 = fmul <8 x float> %v1, %v1
  %s2 = fmul <8 x float> %v2, %v2
  %s3 = fmul <8 x float> %v3, %v3
  %b0 = fadd <8 x float> %a0, %s0
  %b1 = fadd <8 x float> %a1, %s1
  %b2 = fadd <8 x float> %a2, %s2
  %b3 = fadd <8 x float> %a3, %s3
  %i1 = add i64 %i, 32
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  %c0 = fadd <8 x float> %b0, %b1
  %c1 = fadd <8 x float> %b2, %b3
  %c = fadd <8 x float> %c0, %c1
  store <8 x float> %c, ptr %out, align 4
  ret void
}

define void @bw_copy(ptr %args) {
entry:
  %pp = getelementptr i64, ptr %args, i64 0
  %p64 = load i64, ptr %pp
  %p = inttoptr i64 %p64 to ptr
  %np = getelementptr i64, ptr %args, i64 1
  %n = load i64, ptr %np
  %qp = getelementptr i64, ptr %args, i64 2
  %q64 = load i64, ptr %qp
  %q = inttoptr i64 %q64 to ptr
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %src = getelementptr float, ptr %p, i64 %i
  %v = load <8 x float>, ptr %src, align 4
  %dst = getelementptr float, ptr %q, i64 %i
  store <8 x float> %v, ptr %dst, align 4
  %i1 = add i64 %i, 8
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


def main(rounds: int = 5):
    lib = jit.compile_module(IR, ["bw_read", "bw_copy"])
    print(target.host().summary())
    print(f"{'size':>10s} {'read GB/s':>10s} {'copy GB/s (read+write)':>24s}")
    for nbytes in (32 << 10, 256 << 10, 4 << 20, 64 << 20):
        n = nbytes // 4
        src = np.ones(n, np.float32)
        dst = np.zeros(n, np.float32)
        out = np.zeros(8, np.float32)
        args = np.array([src.ctypes.data, n, dst.ctypes.data, out.ctypes.data], np.int64)
        res = {}
        for name in ("bw_read", "bw_copy"):
            fn = lib.addresses[name]
            iters = timer.calibrate_iters(fn, args.ctypes.data, target_ns=5e6)
            best = [float(np.median(timer.time_entry(fn, args.ctypes.data, iters, 5))) for _ in range(rounds)]
            moved = nbytes * (2 if name == "bw_copy" else 1)
            res[name] = moved / float(np.median(best))
        print(f"{nbytes >> 10:>8d}KB {res['bw_read']:10.1f} {res['bw_copy']:24.1f}", flush=True)


if __name__ == "__main__":
    main()
