"""ember.distributed under real MPI jobs: the scripts in distributed/ run
under `mpirun -np 2` and `-np 3` (oversubscribed on a 2-core machine) and
fail their job when a rank's check fails. Also: a rank that hangs or dies
makes the others fail with the message within the timeout.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import ember
import ember.distributed as dist

from conftest import subprocess_env

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed")
MPIRUN = shutil.which("mpirun")

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and MPIRUN),
    reason="ember was built without MPI, or mpirun is missing (Debian: libopenmpi-dev, openmpi-bin)")


def _kill_session(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # nothing was left
        pass


def run_job(cmd, env, timeout):
    """Runs an MPI job (mpirun, or a singleton that forks its own orted) in
    a session of its own, and kills what is left in that session when it
    ends: a rank mpirun did not reap (the "hang" case's sleeper), a daemon.
    Nothing of a job outlives its test or shares pytest's process group,
    so no signal meant for the job's group can reach pytest."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)
        proc.communicate()
        raise
    finally:
        _kill_session(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def mpirun(script, n, *args, recovery=False, timeout=240, extra_env=None):
    """Runs distributed/<script> on n ranks; returns the CompletedProcess."""
    cmd = [MPIRUN, "-np", str(n), "--oversubscribe"]
    if recovery:  # mpirun leaves the other ranks running when one dies
        cmd.append("--enable-recovery")
    cmd += [sys.executable, os.path.join(HERE, script), *map(str, args)]
    env = subprocess_env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,
                         OMPI_MCA_btl_vader_single_copy_mechanism="none", **(extra_env or {}))
    return run_job(cmd, env, timeout)


def expect_ok(proc, n, marker):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    for r in range(n):
        assert f"rank {r} of {n}: {marker}" in out, out[-6000:]


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_against_numpy(n):
    expect_ok(mpirun("collectives.py", n), n, "collectives ok")


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_equals_training_on_the_global_batch(n):
    """MLP and CNN, 20 steps, to 1e-6 relative; no_sync; unused parameters;
    DistributedSampler (distributed/ddp.py)."""
    expect_ok(mpirun("ddp.py", n), n, "ddp ok")


@pytest.mark.parametrize("n", [2, 3])
def test_sync_batch_norm_equals_batch_norm_on_the_global_batch(n):
    """Outputs, input and parameter gradients, running statistics, over
    slices of unequal sizes (distributed/sync_bn.py)."""
    expect_ok(mpirun("sync_bn.py", n), n, "sync_bn ok")


def test_collectives_in_a_world_of_one():
    """A Python started without mpirun is a world of one (MPI's singleton)."""
    proc = run_job([sys.executable, os.path.join(HERE, "collectives.py")], subprocess_env(), 120)
    expect_ok(proc, 1, "collectives ok")


@pytest.mark.parametrize("how", ["hang", "die"])
def test_a_lost_rank_fails_the_others_within_the_timeout(how, tmp_path):
    """Rank 1 hangs (sleeps) or dies (SIGKILL) after a first all_reduce;
    rank 0's next all_reduce fails within its 3 s timeout with a message
    naming it, and rank 0 exits non-zero. A hang fails the whole job;
    a death is run with --enable-recovery, so that mpirun does not kill
    rank 0 first, and rank 0 reports through a file."""
    report = tmp_path / "rank0.txt"
    start = time.monotonic()
    proc = mpirun("lost_rank.py", 2, how, report, recovery=how == "die", timeout=120)
    took = time.monotonic() - start
    text = report.read_text()
    assert "exit 1" in text, text + proc.stdout + proc.stderr
    assert "all_reduce of float32[1000]" in text and "timeout of 3 s" in text, text
    assert "DistBackendError" in text, text
    assert float(text.split("after ")[1].split(" s")[0]) < 3 + 2, text
    if how == "hang":
        assert proc.returncode != 0
    assert took < 60, took


def test_without_init():
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(ember.ones(2))
    assert not dist.is_initialized()


def test_backends_other_than_mpi_say_why():
    with pytest.raises(NotImplementedError, match="CUDA"):
        dist.init_process_group("nccl")
    with pytest.raises(NotImplementedError, match="mpi"):
        dist.init_process_group("gloo")
    with pytest.raises(NotImplementedError, match="init_method"):
        dist.init_process_group("mpi", init_method="tcp://10.0.0.1:23456")
    assert not dist.is_initialized()


def test_env_and_arguments_must_agree_with_mpi():
    """init_method="env://" reads RANK and WORLD_SIZE, which (like rank= and
    world_size=) must agree with what MPI made this process; a world of one
    here (no mpirun)."""
    code = ("import ember.distributed as dist\n"
            "import sys\n"
            "kw = eval(sys.argv[1])\n"
            "try:\n"
            "    dist.init_process_group('mpi', **kw)\n"
            "    print('ok', dist.get_rank(), dist.get_world_size())\n"
            "except ValueError as e:\n"
            "    print('ValueError:', e)\n")
    cases = [({"init_method": "env://"}, {"RANK": "0", "WORLD_SIZE": "1"}, "ok 0 1"),
             ({"init_method": "env://"}, {"RANK": "1", "WORLD_SIZE": "2"}, "RANK=1 in the environment"),
             ({"rank": 2}, {}, "rank=2, but MPI made this process rank 0 of 1"),
             ({"world_size": 4}, {}, "world_size=4")]
    for kwargs, env, want in cases:
        proc = run_job([sys.executable, "-c", code, repr(kwargs)], subprocess_env(**env), 120)
        assert want in proc.stdout, (kwargs, env, proc.stdout + proc.stderr)
