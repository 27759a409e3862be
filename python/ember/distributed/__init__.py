"""ember.distributed: collectives between processes, as torch.distributed,
on MPI (Open MPI).

    # mpirun -np 2 python3 train.py
    import ember.distributed as dist
    dist.init_process_group("mpi")
    t = ember.ones(4) * dist.get_rank()
    dist.all_reduce(t)                     # every rank: 0 + 1 = 1.0 each

Ranks and the world size come from the MPI launcher (mpirun, or a batch
scheduler's MPI launch); a Python started alone is a world of one.
Collectives work on the tensors' own memory (a non-contiguous tensor goes
through a contiguous copy) and run on one communication thread per process,
so async_op=True returns a Work at once: wait() blocks until it finished.

Failures are errors, never hangs (DistBackendError, a RuntimeError):
- every wait gives up after the group's timeout (init_process_group's
  timeout=, 30 minutes by default, as torch's) when a rank died, hangs or
  never made the call; the message names the collective, and the process
  group is unusable after it (as in torch, where a timeout ends the job);
- ranks that pass different shapes or dtypes, or call different
  collectives, all fail at once with a message naming what each passed.

`src`, `dst` and the ranks of new_group are ranks in the world, as torch's.
Only the MPI backend exists: backend="nccl" needs ember's CUDA device,
which is not built yet, and "gloo" is not ember's.
"""
import atexit
import datetime
import enum
import os

from .. import _C, empty, stack

__all__ = [
    "Backend", "DistBackendError", "GroupMember", "ReduceOp", "Work", "all_gather", "all_gather_into_tensor",
    "all_reduce", "barrier", "broadcast", "destroy_process_group", "functional_all_reduce", "gather", "get_backend", "get_rank",
    "get_global_rank", "get_process_group_ranks", "get_world_size", "group", "init_process_group", "irecv", "is_available", "is_gloo_available",
    "is_initialized", "is_mpi_available", "is_nccl_available", "isend", "new_group", "recv", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "scatter", "send",
]

DistBackendError = getattr(_C, "DistBackendError", RuntimeError)
_ALL_REDUCE = _C._op_ids()["all_reduce"]
default_pg_timeout = datetime.timedelta(minutes=30)


class ReduceOp(enum.IntEnum):
    """How all_reduce, reduce and reduce_scatter combine (torch's names).
    AVG is for floating-point tensors; on bool SUM and MAX are "any",
    PRODUCT and MIN "all"; float MIN and MAX propagate NaN."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4


class Backend(str):
    MPI = "mpi"
    NCCL = "nccl"
    GLOO = "gloo"


def is_available():
    """ember.distributed works (ember was built with MPI)."""
    return bool(_C._dist_available())


def is_mpi_available():
    return is_available()


def is_nccl_available():
    return False


def is_gloo_available():
    return False


class ProcessGroup:
    """A group of processes (an MPI communicator). `ranks` are world ranks."""

    def __init__(self, handle):
        self._handle = handle
        self._refresh()

    def _refresh(self):
        self._rank, self._size, self.ranks, self.timeout_s, self._id = _C._dist_group_info(self._handle)

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def __repr__(self):
        return f"ProcessGroup(mpi, ranks={self.ranks}, rank={self._rank})"


class _NonMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    WORLD = None  # the default group, once initialized
    NON_GROUP_MEMBER = _NonMember()


class group:  # noqa: N801 (torch's spelling)
    WORLD = None


_group_namespace = group  # (functions take an argument named group)


_state = {"world": None, "groups": []}


def _world():
    if _state["world"] is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to call "
                           "init_process_group.")
    return _state["world"]


def _group(g, what):
    if g is None or g is GroupMember.WORLD:
        return _world()
    if g is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup from new_group() or None, got {type(g).__name__}")
    if g._handle is None:
        raise RuntimeError(f"{what}: the group was destroyed")
    _world()
    return g


def _group_rank(g, global_rank, role, what):
    if global_rank is None:
        return -1
    try:
        return g.ranks.index(int(global_rank))
    except ValueError:
        raise ValueError(f"{what}: {role} rank {global_rank} is not in {g!r}") from None


def _seconds(timeout, what):
    if timeout is None:
        return None
    s = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    if not s > 0:
        raise ValueError(f"{what}: timeout must be positive, got {timeout!r}")
    return s


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None):
    """Joins this process to the job MPI started. backend: "mpi" (or None).
    init_method "env://" (or None) reads RANK and WORLD_SIZE from the
    environment, which must then agree with MPI's; so must rank= and
    world_size= when given. timeout bounds every wait on the group."""
    what = "init_process_group"
    if _state["world"] is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    b = (backend or "mpi").lower()
    if b == "nccl":
        raise NotImplementedError(f"{what}(backend='nccl'): ember has no CUDA device yet, so no NCCL; "
                                  f"use backend='mpi' with CPU tensors")
    if b != "mpi":
        raise NotImplementedError(f"{what}(backend={backend!r}): ember's backend is 'mpi' (Open MPI); "
                                  f"launch with mpirun -np N")
    if init_method not in (None, "env://"):
        raise NotImplementedError(f"{what}(init_method={init_method!r}): with MPI the launcher forms the job; "
                                  f"use None or 'env://'")
    if store is not None:
        raise NotImplementedError(f"{what}(store=...): MPI needs no store; leave it None")
    if not is_available():
        raise RuntimeError(f"{what}: ember was built without MPI: install libopenmpi-dev (and openmpi-bin) and "
                           f"rebuild")
    seconds = _seconds(timeout, what) or default_pg_timeout.total_seconds()
    pg = ProcessGroup(_C._dist_init(seconds))
    expected = []
    if init_method == "env://":
        for var, mine in (("RANK", pg.rank()), ("WORLD_SIZE", pg.size())):
            if var in os.environ:
                expected.append((f"{var}={os.environ[var]} in the environment", int(os.environ[var]), mine))
    if rank != -1:
        expected.append((f"rank={rank}", rank, pg.rank()))
    if world_size != -1:
        expected.append((f"world_size={world_size}", world_size, pg.size()))
    for said, value, mine in expected:
        if value != mine:
            _C._dist_finalize()  # (an MPI process must finish MPI before it exits)
            raise ValueError(f"{what}: {said}, but MPI made this process rank {pg.rank()} of {pg.size()}: "
                             f"with backend='mpi' the launcher (mpirun -np N) sets ranks")
    _state["world"] = pg
    GroupMember.WORLD = _group_namespace.WORLD = pg


def is_initialized():
    return _state["world"] is not None


def get_backend(group=None):
    _group(group, "get_backend")
    return Backend.MPI


def get_rank(group=None):
    """This process's rank in `group` (-1 outside it)."""
    g = _group(group, "get_rank")
    return -1 if g is None else g.rank()


def get_world_size(group=None):
    g = _group(group, "get_world_size")
    return -1 if g is None else g.size()


def get_global_rank(group, group_rank):
    """The world rank of rank `group_rank` of `group`."""
    g = _group(group, "get_global_rank")
    if g is None or not 0 <= group_rank < g.size():
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in {g!r}")
    return g.ranks[group_rank]


def get_process_group_ranks(group):
    g = _group(group, "get_process_group_ranks")
    return [] if g is None else list(g.ranks)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A group of the world ranks `ranks` (all when None). Every process of
    the world must call it, members or not; non-members get
    GroupMember.NON_GROUP_MEMBER."""
    world = _world()
    if backend not in (None, "mpi"):
        raise NotImplementedError(f"new_group(backend={backend!r}): only 'mpi'")
    ranks = list(range(world.size())) if ranks is None else sorted(int(r) for r in ranks)
    for a, b in zip(ranks, ranks[1:]):
        if a == b:
            raise ValueError(f"new_group: rank {a} appears twice in the ranks")
    for r in ranks:
        if not 0 <= r < world.size():
            raise ValueError(f"new_group: rank {r} is not in the world of {world.size()}")
    seconds = _seconds(timeout, "new_group") or world.timeout_s
    handle = _C._dist_new_group(world._handle, ranks, seconds)
    if handle is None:
        return GroupMember.NON_GROUP_MEMBER
    g = ProcessGroup(handle)
    _state["groups"].append(g)
    return g


def destroy_process_group(group=None):
    """Frees `group`; with None, every group and MPI itself (which cannot
    start again in this process)."""
    if group is None or group is GroupMember.WORLD:
        if _state["world"] is None:
            return
        for g in _state["groups"]:
            if g._handle is not None:
                _C._dist_destroy_group(g._handle)
                g._handle = None
        _state["groups"].clear()
        _state["world"] = None
        GroupMember.WORLD = _group_namespace.WORLD = None
        _C._dist_finalize()
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    g = _group(group, "destroy_process_group")
    _C._dist_destroy_group(g._handle)
    g._handle = None
    _state["groups"].remove(g)


@atexit.register
def _finalize_at_exit():
    # an MPI process that ends without MPI_Finalize makes mpirun fail the job
    if _state["world"] is not None:
        destroy_process_group()


class Work:
    """A queued collective (async_op=True): wait() blocks until it finished
    and raises its error; is_completed() asks."""

    def __init__(self, c_work, then=None):
        self._work = c_work
        self._then = then

    def wait(self, timeout=None):
        if timeout is not None:
            raise NotImplementedError("Work.wait(timeout=...): the group's timeout (init_process_group, "
                                      "new_group) bounds every wait; pass none here")
        self._work.wait()
        if self._then is not None:
            then, self._then = self._then, None
            then()
        return True

    def is_completed(self):
        return self._work.is_completed()

    def is_success(self):
        if not self.is_completed():
            return False
        try:
            self.wait()
        except RuntimeError:
            return False
        return True

    def source_rank(self):
        return self._source

    def __repr__(self):
        return f"Work(completed={self.is_completed()})"


def _run(kind, g, a, b, root, op, async_op, then=None):
    if isinstance(op, enum.Enum) or isinstance(op, int):
        op = int(op)
    else:
        raise TypeError(f"{kind}: op must be a ReduceOp, got {op!r}")
    work = Work(_C._dist_collective(kind, g._handle, a, b, root, op), then)
    if async_op:
        return work
    work.wait()
    return None


def _not_member(g):
    return g is None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Combines `tensor` across the ranks with `op`; every rank gets the
    result in `tensor`."""
    g = _group(group, "all_reduce")
    if _not_member(g):
        return None
    return _run("all_reduce", g, tensor, None, 0, op, async_op)


def functional_all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """A new tensor: `tensor` combined across the group's ranks with `op`
    (as torch.distributed._functional_collectives.all_reduce). It is an op
    of ember's op table, so a traced function records it as a node and its
    compiled graph runs the collective in its place; all_reduce, which
    writes into its argument from the communication thread, ends a trace
    instead. Synchronous; not differentiable."""
    g = _group(group, "functional_all_reduce")
    if _not_member(g):
        raise ValueError(f"functional_all_reduce: this rank is not in {group!r}")
    if not isinstance(op, int):
        raise TypeError(f"functional_all_reduce: op must be a ReduceOp, got {op!r}")
    return _C._op(_ALL_REDUCE, [tensor], {"reduce_op": int(op), "process_group": g._id})


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """all_reduce whose result only rank `dst` gets (the others' tensors
    are left as they were)."""
    g = _group(group, "reduce")
    if _not_member(g):
        return None
    return _run("reduce", g, tensor, None, _group_rank(g, dst, "destination", "reduce"), op, async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Every rank's `tensor` gets rank `src`'s."""
    g = _group(group, "broadcast")
    if _not_member(g):
        return None
    return _run("broadcast", g, tensor, None, _group_rank(g, src, "source", "broadcast"), 0, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (world_size * input's elements: [n*k] or [n, ...])
    gets every rank's input_tensor in rank order."""
    g = _group(group, "all_gather_into_tensor")
    if _not_member(g):
        return None
    return _run("all_gather", g, output_tensor, input_tensor, 0, 0, async_op)


def _fill_list(tensor_list, flat, what):
    def then():
        for dst, src in zip(tensor_list, flat.unbind(0)):
            dst.copy_(src)
    return then


def _check_list(tensor_list, n, tensor, what, role):
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != n:
        got = len(tensor_list) if isinstance(tensor_list, (list, tuple)) else type(tensor_list).__name__
        raise ValueError(f"{what}: {role} must be a list of {n} tensors (one per rank), got {got}")
    for i, t in enumerate(tensor_list):
        if tuple(t.shape) != tuple(tensor.shape):
            raise ValueError(f"{what}: {role}[{i}] has shape {list(t.shape)}, the tensor {list(tensor.shape)}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] gets rank r's `tensor`."""
    g = _group(group, "all_gather")
    if _not_member(g):
        return None
    _check_list(tensor_list, g.size(), tensor, "all_gather", "tensor_list")
    flat = empty((g.size(),) + tuple(tensor.shape), dtype=tensor.dtype)
    return _run("all_gather", g, flat, tensor, 0, 0, async_op, _fill_list(tensor_list, flat, "all_gather"))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """input holds world_size blocks of output's elements; rank r's output
    gets block r combined across the ranks."""
    g = _group(group, "reduce_scatter_tensor")
    if _not_member(g):
        return None
    return _run("reduce_scatter", g, output, input, 0, op, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """rank r's output gets input_list[r] combined across the ranks."""
    g = _group(group, "reduce_scatter")
    if _not_member(g):
        return None
    _check_list(input_list, g.size(), output, "reduce_scatter", "input_list")
    return _run("reduce_scatter", g, output, stack(list(input_list)), 0, op, async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Rank dst's gather_list[r] gets rank r's tensor (gather_list only on dst)."""
    g = _group(group, "gather")
    if _not_member(g):
        return None
    root = _group_rank(g, dst, "destination", "gather")
    flat, then = None, None
    if g.rank() == root:
        _check_list(gather_list, g.size(), tensor, "gather", "gather_list")
        flat = empty((g.size(),) + tuple(tensor.shape), dtype=tensor.dtype)
        then = _fill_list(gather_list, flat, "gather")
    elif gather_list:
        raise ValueError(f"gather: gather_list is for the destination rank {dst} only")
    return _run("gather", g, flat, tensor, root, 0, async_op, then)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """Rank r's tensor gets rank src's scatter_list[r] (scatter_list only on src)."""
    g = _group(group, "scatter")
    if _not_member(g):
        return None
    root = _group_rank(g, src, "source", "scatter")
    flat = None
    if g.rank() == root:
        _check_list(scatter_list, g.size(), tensor, "scatter", "scatter_list")
        flat = stack(list(scatter_list))
    elif scatter_list:
        raise ValueError(f"scatter: scatter_list is for the source rank {src} only")
    return _run("scatter", g, flat, tensor, root, 0, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Returns when every rank of the group has called it."""
    g = _group(group, "barrier")
    if _not_member(g):
        return None
    return _run("barrier", g, None, None, 0, 0, async_op)


def _p2p(kind, tensor, peer, role, group, tag):
    g = _group(group, kind)
    if _not_member(g):
        return None
    if not isinstance(tag, int):
        raise TypeError(f"{kind}: tag must be an int, got {type(tag).__name__}")
    p = _group_rank(g, peer, role, kind)
    work = Work(_C._dist_collective("send" if kind in ("send", "isend") else "recv", g._handle, tensor, None, p,
                                    tag))
    work._group = g
    work._source = None
    return work


def _recv_source(work):
    src = work._work._source()
    work._source = None if src < 0 else work._group.ranks[src]
    return work._source


def isend(tensor, dst, group=None, tag=0):
    """Sends tensor to rank dst; returns a Work."""
    return _p2p("isend", tensor, dst, "destination", group, tag)


def irecv(tensor, src=None, group=None, tag=0):
    """Receives into tensor from rank src (any rank when None); returns a
    Work whose source_rank() says which, after wait()."""
    work = _p2p("irecv", tensor, src, "source", group, tag)
    if work is not None:
        work._then = lambda: _recv_source(work)
    return work


def send(tensor, dst, group=None, tag=0):
    work = isend(tensor, dst, group, tag)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag=0):
    """Receives into tensor; returns the sender's rank."""
    work = irecv(tensor, src, group, tag)
    if work is None:
        return -1
    work.wait()
    return work._source
