"""Rank 1 hangs or dies (argv[1]: "hang" or "die") after one all_reduce;
rank 0's next all_reduce must fail within the 3 s timeout. Rank 0 writes
what happened to argv[2] (mpirun may not pass its exit status on) and
exits 1."""
import datetime
import os
import signal
import sys
import time

import ember
import ember.distributed as dist

how, report = sys.argv[1], sys.argv[2]
dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=3))
rank = dist.get_rank()
t = ember.ones(1000)
dist.all_reduce(t)
if rank == 1:
    if how == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    # Hangs well past rank 0's timeout; should mpirun not reap it, it ends
    # without MPI calls (its job is gone) and the test kills its session.
    time.sleep(30)
    os._exit(0)
start = time.monotonic()
try:
    dist.all_reduce(t)
    message = "no error"
except RuntimeError as e:
    message = f"{type(e).__name__}: {e}"
with open(report, "w") as f:
    f.write(f"after {time.monotonic() - start:.2f} s: {message}; exit 1\n")
sys.exit(1)
