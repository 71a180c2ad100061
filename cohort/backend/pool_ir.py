"""The native worker pool, in LLVM IR (JIT-compiled once per process).

Python publishes a job (entry, argument block, block count, grain) into the
pool record and calls `cohort_pool_launch`, which wakes the workers and
takes part itself; everything from there to completion is native, without
the GIL. Blocks are claimed `grain` at a time from one 64-bit word holding
(job generation << 32 | next block), so a worker that wakes late for an old
job can never claim a block of a newer one. Workers spin briefly with
sched_yield, then sleep on a 32-bit word (NOTES-llvmlite.md: the most robust mix on
a shared 2-vCPU machine) with the target's wait/wake primitive (target.py: the
futex system call on Linux, by the ISA's syscall number; libSystem's compare-and-wait
on macOS), which `ir(target)` splices in as @pool_wait and @pool_wake.

Pool record (int64 slots):
  [0] generation (i32 wait word)     [1] stop flag        [2] entry
  [3] block count                   [4] grain            [5] claim word
  [6] blocks remaining              [7] done (i32 wait word)
  [8] participants                  [9] scratch base     [10] scratch bytes each
  [11] argument slots used          [12] workers asleep (i32)   [13] caller asleep (i32)
  [14] OpenMP fork (GOMP_parallel) or 0   [15] omp_get_thread_num
  [16..16+MAX_ARGS) the argument block template
With [14] set, `cohort_pool_launch` hands the job to the process's OpenMP runtime
instead of the pool's own threads: GOMP_parallel runs @cohort_omp_share on a team of
`participants` threads (the caller is thread 0), each claiming tasks as a worker does,
and returns when all have left, so every block is done. runtime.py uses this record
(a second one; the pool's threads never look at it) when torch or another library has
loaded an OpenMP runtime: its threads spin after each parallel region, and a second
pool beside them loses its core to the spinner (benchmarks/pool_after_torch.py).
A wake is a system call; it is made only when someone sleeps (the
sleeper announces itself, then re-checks before sleeping: seq_cst on both
sides, so either the waker sees the sleeper or the sleeper sees the news).
Worker record (int64 slots): [0] pool, [1] participant id (1..), [2] first generation.
@cohort_worker is dso_local: pthread_create takes its address, which on AArch64 would
otherwise go through a GOT entry the JIT's default linker cannot place within ADRP's
+-4 GB (RuntimeDyld aborts the process).

`cohort_runtime_launch` is the runtime's launch entry (DESIGN §6, runtime
E2E): from a runtime record prepared once, each call cuts the launch into
tasks by the grain policy, runs it on the caller when that gives one task
(or the policy is `caller`, or one worker), else publishes the job to the
pool and takes part; it returns when every block is done. No Python runs
between launches, so the native timer can call it in its loop.
Runtime record (int64 slots):
  [0] pool record     [1] entry            [2] block count
  [3] policy: -1 caller, -2 legacy (ceil(blocks / workers)), 0 the runtime's
      pick (ceil(blocks / (4 workers))), N >= 1 blocks per task
  [4] workers         [5] argument block   [6] argument slots used
  [7] scratch base of the pool's participants   [8] scratch bytes each
"""

MAX_ARGS = 64
POOL_SLOTS = 16 + MAX_ARGS
SPIN = 64

_IR = r"""
WAIT_WAKE
declare i32 @sched_yield()
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define internal ptr @slot(ptr %pool, i64 %i) {
  %p = getelementptr i64, ptr %pool, i64 %i
  ret ptr %p
}

; The waker's side of a wait word: store the news, then wake only if someone announced
; sleeping on it (%asleep: a count or a flag). seq_cst here and on the sleeper's side.
define internal void @publish(ptr %word, i32 %news, ptr %asleep) {
entry:
  store atomic i32 %news, ptr %word seq_cst, align 8
  %n = load atomic i32, ptr %asleep seq_cst, align 8
  %any = icmp ne i32 %n, 0
  br i1 %any, label %wake, label %out
wake:
  call void @pool_wake(ptr %word)
  br label %out
out:
  ret void
}

; Blocks of job %gen, claimed until none are left (or the job is gone).
define internal void @run_share(ptr %pool, i64 %id, i32 %gen) {
entry:
  %args = alloca [MAX_ARGS x i64], align 16
  %nsp = call ptr @slot(ptr %pool, i64 11)
  %ns = load i64, ptr %nsp
  %bytes = mul i64 %ns, 8
  %tmpl = call ptr @slot(ptr %pool, i64 16)
  call void @llvm.memcpy.p0.p0.i64(ptr %args, ptr %tmpl, i64 %bytes, i1 false)
  %sbp = call ptr @slot(ptr %pool, i64 9)
  %sb = load i64, ptr %sbp
  %szp = call ptr @slot(ptr %pool, i64 10)
  %sz = load i64, ptr %szp
  %off = mul i64 %id, %sz
  %mine = add i64 %sb, %off
  %a4 = getelementptr i64, ptr %args, i64 4
  store i64 %mine, ptr %a4
  %a5 = getelementptr i64, ptr %args, i64 5
  store i64 %sz, ptr %a5
  %fnp = call ptr @slot(ptr %pool, i64 2)
  %fn = load ptr, ptr %fnp
  %nbp = call ptr @slot(ptr %pool, i64 3)
  %nb = load i64, ptr %nbp
  %gp = call ptr @slot(ptr %pool, i64 4)
  %grain = load i64, ptr %gp
  %claimp = call ptr @slot(ptr %pool, i64 5)
  %remp = call ptr @slot(ptr %pool, i64 6)
  %donep = call ptr @slot(ptr %pool, i64 7)
  %gen64 = zext i32 %gen to i64
  br label %claim
claim:
  %w = load atomic i64, ptr %claimp acquire, align 8
  %wgen = lshr i64 %w, 32
  %same = icmp eq i64 %wgen, %gen64
  br i1 %same, label %check, label %out
check:
  %b = and i64 %w, 4294967295
  %left = icmp ult i64 %b, %nb
  br i1 %left, label %take, label %out
take:
  %w2 = add i64 %w, %grain
  %cx = cmpxchg ptr %claimp, i64 %w, i64 %w2 acq_rel acquire
  %ok = extractvalue { i64, i1 } %cx, 1
  br i1 %ok, label %run, label %claim
run:
  %e0 = add i64 %b, %grain
  %short = icmp ult i64 %e0, %nb
  %e = select i1 %short, i64 %e0, i64 %nb
  %a1 = getelementptr i64, ptr %args, i64 1
  store i64 %b, ptr %a1
  %a2 = getelementptr i64, ptr %args, i64 2
  store i64 %e, ptr %a2
  call void %fn(ptr %args)
  %k = sub i64 %e, %b
  %old = atomicrmw sub ptr %remp, i64 %k acq_rel
  %last = icmp eq i64 %old, %k
  br i1 %last, label %finish, label %claim
finish:
  %cwp = call ptr @slot(ptr %pool, i64 13)
  call void @publish(ptr %donep, i32 1, ptr %cwp)
  br label %claim
out:
  ret void
}

define dso_local ptr @cohort_worker(ptr %rec) {
entry:
  %pool = load ptr, ptr %rec
  %idp = getelementptr i64, ptr %rec, i64 1
  %id = load i64, ptr %idp
  %g0p = getelementptr i64, ptr %rec, i64 2
  %g0w = load i64, ptr %g0p
  %g0 = trunc i64 %g0w to i32
  %genp = call ptr @slot(ptr %pool, i64 0)
  %stopp = call ptr @slot(ptr %pool, i64 1)
  br label %wait
wait:
  %seen = phi i32 [%g0, %entry], [%g, %work]
  br label %spin
spin:
  %i = phi i32 [0, %wait], [%i1, %yield]
  %gs = load atomic i32, ptr %genp acquire, align 8
  %new = icmp ne i32 %gs, %seen
  br i1 %new, label %woke, label %yield
yield:
  %i1 = add i32 %i, 1
  call i32 @sched_yield()
  %more = icmp slt i32 %i1, SPIN
  br i1 %more, label %spin, label %sleep
sleep:
  %slp = call ptr @slot(ptr %pool, i64 12)
  atomicrmw add ptr %slp, i32 1 seq_cst
  %gq = load atomic i32, ptr %genp seq_cst, align 8
  %news = icmp ne i32 %gq, %seen
  br i1 %news, label %awake, label %dowait
dowait:
  call void @pool_wait(ptr %genp, i32 %seen)
  br label %awake
awake:
  atomicrmw sub ptr %slp, i32 1 seq_cst
  br label %spin2
spin2:
  %gz = load atomic i32, ptr %genp acquire, align 8
  %new2 = icmp ne i32 %gz, %seen
  br i1 %new2, label %woke, label %sleep
woke:
  %g = load atomic i32, ptr %genp acquire, align 8
  %stop = load atomic i64, ptr %stopp acquire, align 8
  %halt = icmp ne i64 %stop, 0
  br i1 %halt, label %exit, label %enlisted
enlisted:
  %pp = call ptr @slot(ptr %pool, i64 8)
  %parts = load atomic i64, ptr %pp acquire, align 8
  %mine = icmp slt i64 %id, %parts
  br i1 %mine, label %share, label %work
share:
  call void @run_share(ptr %pool, i64 %id, i32 %g)
  br label %work
work:
  br label %wait
exit:
  ret ptr null
}

; One member of the OpenMP team: its thread number is its participant id.
define dso_local void @cohort_omp_share(ptr %pool) {
entry:
  %tnp = call ptr @slot(ptr %pool, i64 15)
  %tn = load ptr, ptr %tnp
  %id32 = call i32 %tn()
  %id = zext i32 %id32 to i64
  %genp = call ptr @slot(ptr %pool, i64 0)
  %g = load atomic i32, ptr %genp acquire, align 8
  call void @run_share(ptr %pool, i64 %id, i32 %g)
  ret void
}

; The job's fields are set; start it, take part, return when every block is done.
define void @cohort_pool_launch(ptr %pool) {
entry:
  %genp = call ptr @slot(ptr %pool, i64 0)
  %nbp = call ptr @slot(ptr %pool, i64 3)
  %nb = load i64, ptr %nbp
  %remp = call ptr @slot(ptr %pool, i64 6)
  %donep = call ptr @slot(ptr %pool, i64 7)
  %claimp = call ptr @slot(ptr %pool, i64 5)
  %none = icmp eq i64 %nb, 0
  br i1 %none, label %exit, label %go
go:
  %g = load atomic i32, ptr %genp acquire, align 8
  %g1 = add i32 %g, 1
  %g1w = zext i32 %g1 to i64
  %word = shl i64 %g1w, 32
  store atomic i64 %word, ptr %claimp release, align 8
  store atomic i64 %nb, ptr %remp release, align 8
  store atomic i32 0, ptr %donep release, align 8
  %forkp = call ptr @slot(ptr %pool, i64 14)
  %fork = load ptr, ptr %forkp
  %viaomp = icmp ne ptr %fork, null
  br i1 %viaomp, label %omp, label %own
omp:
  ; the process's OpenMP team runs the job (no thread of ours sleeps on this record)
TEAM_JOB
  br label %exit
own:
  %slp = call ptr @slot(ptr %pool, i64 12)
  call void @publish(ptr %genp, i32 %g1, ptr %slp)
  br label %share
share:
  call void @run_share(ptr %pool, i64 0, i32 %g1)
  br label %spin
spin:
  %i = phi i32 [0, %share], [%i1, %yield]
  %r = load atomic i64, ptr %remp acquire, align 8
  %fin = icmp eq i64 %r, 0
  br i1 %fin, label %exit, label %yield
yield:
  %i1 = add i32 %i, 1
  call i32 @sched_yield()
  %more = icmp slt i32 %i1, SPIN
  br i1 %more, label %spin, label %sleep
sleep:
  %cwp = call ptr @slot(ptr %pool, i64 13)
  store atomic i32 1, ptr %cwp seq_cst, align 8
  %d = load atomic i32, ptr %donep seq_cst, align 8
  %isdone = icmp ne i32 %d, 0
  br i1 %isdone, label %woken, label %block
block:
  call void @pool_wait(ptr %donep, i32 0)
  br label %sleep
woken:
  store atomic i32 0, ptr %cwp seq_cst, align 8
  br label %exit
exit:
  ret void
}

; The runtime's launch entry (see the module notes for the record).
define void @cohort_runtime_launch(ptr %rec) {
entry:
  %pool = load ptr, ptr %rec
  %fp = getelementptr i64, ptr %rec, i64 1
  %fn = load ptr, ptr %fp
  %nbp = getelementptr i64, ptr %rec, i64 2
  %nb = load i64, ptr %nbp
  %polp = getelementptr i64, ptr %rec, i64 3
  %pol = load i64, ptr %polp
  %wp = getelementptr i64, ptr %rec, i64 4
  %w0 = load i64, ptr %wp
  %wlow = icmp slt i64 %w0, 1
  %w = select i1 %wlow, i64 1, i64 %w0
  %ap = getelementptr i64, ptr %rec, i64 5
  %args = load ptr, ptr %ap
  %wm1 = sub i64 %w, 1
  %legn = add i64 %nb, %wm1
  %leg = udiv i64 %legn, %w
  %w4 = mul i64 %w, 4
  %w4m1 = sub i64 %w4, 1
  %zn = add i64 %nb, %w4m1
  %zg = udiv i64 %zn, %w4
  %iszero = icmp eq i64 %pol, 0
  %isleg = icmp eq i64 %pol, -2
  %g1 = select i1 %iszero, i64 %zg, i64 %pol
  %g2 = select i1 %isleg, i64 %leg, i64 %g1
  %small = icmp slt i64 %g2, 1
  %g = select i1 %small, i64 1, i64 %g2
  %iscaller = icmp eq i64 %pol, -1
  %alone = icmp sle i64 %w, 1
  %onetask = icmp sge i64 %g, %nb
  %c1 = or i1 %iscaller, %alone
  %c = or i1 %c1, %onetask
  br i1 %c, label %caller, label %pooled
caller:
  %b = getelementptr i64, ptr %args, i64 1
  store i64 0, ptr %b
  %e = getelementptr i64, ptr %args, i64 2
  store i64 %nb, ptr %e
  call void %fn(ptr %args)
  ret void
pooled:
  %p2 = call ptr @slot(ptr %pool, i64 2)
  store ptr %fn, ptr %p2
  %p3 = call ptr @slot(ptr %pool, i64 3)
  store i64 %nb, ptr %p3
  %p4 = call ptr @slot(ptr %pool, i64 4)
  store i64 %g, ptr %p4
  %p8 = call ptr @slot(ptr %pool, i64 8)
  store i64 %w, ptr %p8
  %sbp = getelementptr i64, ptr %rec, i64 7
  %sb = load i64, ptr %sbp
  %p9 = call ptr @slot(ptr %pool, i64 9)
  store i64 %sb, ptr %p9
  %szp = getelementptr i64, ptr %rec, i64 8
  %sz = load i64, ptr %szp
  %p10 = call ptr @slot(ptr %pool, i64 10)
  store i64 %sz, ptr %p10
  %nsp = getelementptr i64, ptr %rec, i64 6
  %ns = load i64, ptr %nsp
  %p11 = call ptr @slot(ptr %pool, i64 11)
  store i64 %ns, ptr %p11
  %bytes = mul i64 %ns, 8
  %tmpl = call ptr @slot(ptr %pool, i64 16)
  call void @llvm.memcpy.p0.p0.i64(ptr %tmpl, ptr %args, i64 %bytes, i1 false)
  call void @cohort_pool_launch(ptr %pool)
  ret void
}

; Start `n` workers described by `recs` (3 slots each); their pthread ids go to `tids`.
define i32 @cohort_pool_start(i64 %n, ptr %recs, ptr %tids) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %next]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %off = mul i64 %i, 3
  %rec = getelementptr i64, ptr %recs, i64 %off
  %tid = getelementptr i64, ptr %tids, i64 %i
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @cohort_worker, ptr %rec)
  %bad = icmp ne i32 %rc, 0
  br i1 %bad, label %fail, label %next
next:
  %i1 = add i64 %i, 1
  br label %loop
fail:
  ret i32 %rc
done:
  ret i32 0
}

; Ask the workers to leave and wait for them.
define void @cohort_pool_stop(ptr %pool, i64 %n, ptr %tids) {
entry:
  %genp = call ptr @slot(ptr %pool, i64 0)
  %stopp = call ptr @slot(ptr %pool, i64 1)
  store atomic i64 1, ptr %stopp release, align 8
  %g = load atomic i32, ptr %genp acquire, align 8
  %g1 = add i32 %g, 1
  store atomic i32 %g1, ptr %genp release, align 8
  call void @pool_wake(ptr %genp)
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %body]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %tp = getelementptr i64, ptr %tids, i64 %i
  %t = load i64, ptr %tp
  call i32 @pthread_join(i64 %t, ptr null)
  %i1 = add i64 %i, 1
  br label %loop
done:
  ret void
}
""".replace("MAX_ARGS", str(MAX_ARGS)).replace("SPIN", str(SPIN))
_TEAM_PUBLISH = "  store atomic i32 %g1, ptr %genp release, align 8\n"
_TEAM_FORK = """  %pp = call ptr @slot(ptr %pool, i64 8)
  %parts = load i64, ptr %pp
  %pt = trunc i64 %parts to i32
  call void %fork(ptr @cohort_omp_share, ptr %pool, i32 %pt, i32 0)
"""
_IR = _IR.replace("TEAM_JOB\n", _TEAM_PUBLISH + _TEAM_FORK)   # (the plant below swaps the two)


def ir(tgt) -> str:
    """The pool module for target `tgt` (target.Target): its wait/wake primitive spliced in."""
    from . import inject
    # planted runtime_caller_one_task: built once per process, live when the pool is first built
    text = _IR.replace("WAIT_WAKE", tgt.wait_wake_ir())
    if inject.runtime_planted("openmp_publish_late"):    # the generation stored after the team has run
        text = text.replace(_TEAM_PUBLISH + _TEAM_FORK, _TEAM_FORK + _TEAM_PUBLISH)
    return text.replace("store i64 %nb, ptr %e\n", "store i64 %g, ptr %e\n") if inject.runtime_planted(
        "runtime_caller_one_task") else text
