"""A block reduction written the way a CUDA author writes it (docs/kernels.md's worked example):
one thread per element, the load guarded, staged in shared memory, a tree of barriers, each
block's sum stored.

    cohort check examples/block_sum.py::block_sum --n 100003 --arg sums=3126
    python examples/block_sum.py          # the same kernel as a torch op (needs torch)
"""
from cohort import Buffer, barrier, block_id, global_id, i32, kernel, shared, thread_id

B = 32


@kernel(block=B)
def block_sum(x: Buffer[i32], sums: Buffer[i32]):
    t = thread_id()
    g = global_id()
    s = shared(i32, B)
    s[t] = x[g] if g < len(x) else 0      # every thread of the last block runs: guard the load
    barrier()
    for k in range(5):                     # h = 16, 8, 4, 2, 1
        h = (B // 2) >> k
        if t < h:
            s[t] = s[t] + s[t + h]
        barrier()
    if t == 0:
        sums[block_id()] = s[0]


if __name__ == "__main__":
    import torch

    import cohort.torch as ct

    sums = ct.kernel_op("examples::block_sum", block_sum, inputs=("x",), output="sums",
                        shape=lambda x: (-(-x.numel() // B),), launch=lambda x: (x.numel(), {}))
    x = torch.randint(-1000, 1000, (100_003,), dtype=torch.int32)
    s = sums(x)            # the first call of this shape is checked against the interpreter
    print(s.shape, int(s.sum()) == int(x.sum()), bool((s[-1] == x[-(100_003 % B):].sum())))
