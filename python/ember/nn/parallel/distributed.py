"""nn.parallel.DistributedDataParallel: data-parallel training on
ember.distributed, as torch's.

Each rank runs the same model on its own part of the batch. At construction
the parameters and buffers are broadcast from rank 0, so every rank starts
equal. During backward, gradients are averaged across the ranks in buckets:
the parameters are grouped in reverse order (about the order backward
reaches them), a bucket per dtype up to bucket_cap_mb (the first 1 MiB, so
that communication starts early). A large gradient (from 256 KiB times the
ranks less one) is reduced alone, in its own memory: one more all_reduce
call costs less than copying it into a bucket and back. When backward has
accumulated the last gradient of a bucket (a post-accumulate-grad hook),
the bucket's small gradients are copied into its slice of one flat tensor
(per dtype), and that slice and the bucket's large gradients are queued on
the communication thread, which reduces them while backward goes on
computing the gradients of the next bucket. When the last bucket is queued,
the hook waits for all of them and writes the flat tensor's averages back
into the small gradients' .grad. That overlap needs a core for the
communication thread: when the process has no more cores (its CPU affinity)
than ember's compute threads (ember.set_num_threads), the buckets are only
filled during backward and everything is reduced at its end (the large
gradients, then one flat tensor per dtype), which measured faster there
(bench/RESULTS.md, issue 18); to overlap, leave a core free:
ember.set_num_threads(cores - 1). After backward every rank holds the same
gradients, so the optimizers stay equal.

- no_sync(): backward accumulates locally, with no communication; the next
  backward outside it averages the accumulated gradients.
- find_unused_parameters=True: forward walks the autograd graph from its
  outputs and counts parameters it does not reach as ready (their share is
  zero); a parameter no rank used keeps .grad None, as torch's. Without
  it, a parameter without a gradient leaves its bucket unfinished, and the
  next forward raises naming it.
- broadcast_buffers: buffers (running statistics) are broadcast from rank 0
  at every forward.
- gradient_as_bucket_view=True: every gradient is packed (none is reduced
  alone); after backward each .grad is a view of its bucket rather than a
  copy (no copy back; with zero_grad(set_to_none=False) the next backward
  accumulates into the bucket itself, so nothing is copied in either). A
  .grad kept across steps then changes with the bucket, as torch's.

Compiled: DistributedDataParallel(ember.compile(model)) compiles the
model's forward and backward; the gradient hooks run in the real backward,
so bucketing and overlap are as eager. A whole training step under
ember.compile (forward, backward and the optimizer) holds the reduction as
nodes: while such a step is traced, DDP's hooks average each large
gradient alone and the small ones concatenated (one tensor per dtype) with
the all_reduce op (ember.distributed.functional_all_reduce, a collective
in the op table), whose nodes the compiled graph runs between backward
and the optimizer, in the same order on every rank. No overlap there: the
graph's nodes run one after another. A traced step with
find_unused_parameters or buffers to broadcast runs eagerly (explain says
why).
"""
import contextlib
import os
import weakref

from ... import _C
from ... import distributed as dist
from ... import cat, get_num_threads, int32, tensor, zeros, zeros_like
from ...autograd import is_grad_enabled, no_grad
from ..modules.module import Module

_FIRST_BUCKET_BYTES = 1 << 20
# A gradient from this size times (ranks - 1) on is all_reduced alone, in
# its own memory: packing it costs two copies (into the flat tensor and
# back), and copying 256 KiB in and out (about 35 us) costs more than the
# fixed cost of one more all_reduce call between 2 processes (17-25 us;
# bench/RESULTS.md, issue 18). A call's fixed cost grows with the ranks (a
# ring's latency is 2 (ranks - 1) hops), the copies' does not: on many
# ranks only very large gradients are worth a call of their own.
_ALONE_MIN_BYTES = 256 << 10


class _Bucket:
    def __init__(self, index, params):
        self.index = index
        self.params = params  # indices into the reducer's parameter list
        self.packed = params  # those whose gradients are copied into `flat`
        self.alone = []  # those whose gradients are reduced in their own memory
        self.ready = 0
        self.flat = None  # its slice of its dtype's flat tensor (None: nothing packed)


def _core_to_spare():
    """Has this process a core beyond ember's compute threads, for the
    communication thread? Without one, a bucket's all_reduce during
    backward only takes turns with the computation on the same cores
    (measured: slower than reducing everything at the end)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores > get_num_threads()


def _graph_leaves(outputs):
    """The leaves an autograd graph from `outputs` accumulates into."""
    # grad_fn objects are made afresh on each access: keep those seen alive
    # (in `seen`), so that no id is reused for another node
    seen, found, stack = {}, set(), []
    for t in outputs:
        if getattr(t, "grad_fn", None) is not None:
            stack.append(t.grad_fn)
        elif getattr(t, "requires_grad", False):
            found.add(id(t))
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        var = getattr(node, "variable", None)
        if var is not None:
            found.add(id(var))
        for nxt, _ in node.next_functions:
            if nxt is not None:
                stack.append(nxt)
    return found


def _tensors_in(obj):
    if hasattr(obj, "grad_fn"):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors_in(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors_in(o)


class DistributedDataParallel(Module):
    """Wraps `module` for data-parallel training over `process_group` (the
    world by default); see the module's documentation."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if device_ids is not None or output_device is not None:
            raise ValueError("DistributedDataParallel: device_ids and output_device must be None for CPU "
                             "modules (ember has no CUDA device yet)")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        object.__setattr__(self, "process_group", process_group)
        object.__setattr__(self, "_group_size", dist.get_world_size(process_group))
        if self._group_size < 1:
            raise ValueError("DistributedDataParallel: this rank is not in process_group")
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.bucket_cap_mb = bucket_cap_mb
        self.gradient_as_bucket_view = gradient_as_bucket_view
        params, seen = [], set()
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any "
                               "parameter that requires a gradient.")
        object.__setattr__(self, "_params", params)
        self._sync_from_rank0(list(module.parameters()) + list(module.buffers()))
        object.__setattr__(self, "_buckets", self._make_buckets(params, bucket_cap_mb))
        object.__setattr__(self, "_bucket_of", {})
        alone_min = _ALONE_MIN_BYTES * max(1, self._group_size - 1)
        for b in self._buckets:
            if not gradient_as_bucket_view:
                b.alone = [i for i in b.params if params[i].numel() * params[i].element_size() >= alone_min]
                b.packed = [i for i in b.params if i not in b.alone]
            for i in b.params:
                self._bucket_of[i] = b
        # one flat tensor per dtype for the packed gradients; each bucket's
        # packed gradients are a slice of its dtype's
        spans, used = [], {}  # (bucket, dtype, start, numel); numel per dtype
        for b in self._buckets:
            if b.packed:
                dt, n = params[b.packed[0]].dtype, sum(params[i].numel() for i in b.packed)
                spans.append((b, dt, used.get(dt, 0), n))
                used[dt] = used.get(dt, 0) + n
        flats = {dt: zeros(n, dtype=dt) for dt, n in used.items()}
        for b, dt, start, n in spans:
            b.flat = flats[dt][start:start + n]
        object.__setattr__(self, "_flats", flats)
        object.__setattr__(self, "_works", [])
        object.__setattr__(self, "_stand_ins", {})  # param index -> the tensor reduced for its gradient
        object.__setattr__(self, "_overlap", True)
        object.__setattr__(self, "_traced", False)
        object.__setattr__(self, "_unused", set())
        object.__setattr__(self, "_armed", False)  # a forward ran that a backward will reduce
        object.__setattr__(self, "_done", set())  # params ready in this backward
        ref = weakref.ref(self)
        handles = []
        for i, p in enumerate(params):
            handles.append(p.register_post_accumulate_grad_hook(
                lambda _p, i=i: ref() is not None and ref()._grad_ready(i)))
        object.__setattr__(self, "_handles", handles)

    def __del__(self):
        for h in getattr(self, "_handles", ()):
            h.remove()

    # ---- construction ----

    def _sync_from_rank0(self, tensors):
        src = dist.get_global_rank(self.process_group, 0) if self.process_group is not None else 0
        with no_grad():
            works = [dist.broadcast(t.detach(), src=src, group=self.process_group, async_op=True)
                     for t in tensors]
            for w in works:
                if w is not None:
                    w.wait()

    @staticmethod
    def _make_buckets(params, cap_mb):
        buckets, cap = [], _FIRST_BUCKET_BYTES
        open_by_dtype = {}  # dtype -> (indices, bytes)
        for i in reversed(range(len(params))):
            p = params[i]
            idx, size = open_by_dtype.get(p.dtype, ([], 0))
            nbytes = p.numel() * p.element_size()
            if idx and size + nbytes > cap:
                buckets.append(_Bucket(len(buckets), idx))
                cap = int(cap_mb * (1 << 20))
                idx, size = [], 0
            idx.append(i)
            open_by_dtype[p.dtype] = (idx, size + nbytes)
        for idx, _ in open_by_dtype.values():
            if idx:
                buckets.append(_Bucket(len(buckets), idx))
        return buckets

    # ---- forward ----

    def forward(self, *inputs, **kwargs):
        traced = bool(_C._is_tracing()) and self.require_backward_grad_sync and is_grad_enabled()
        if traced and (self.find_unused_parameters or self.broadcast_buffers and any(True for _ in self.module.buffers())):
            _C._dist_end_trace("DistributedDataParallel with find_unused_parameters or buffers to broadcast "
                               "(a compiled step holds only its gradient reduction)")
        object.__setattr__(self, "_traced", traced)
        if self._done:
            missing = [i for i in range(len(self._params)) if i not in self._done and i not in self._unused]
            names = self._names_of(missing)
            self._reset()
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. This "
                "error indicates that your module has parameters that were not used in producing loss. You can "
                "enable unused parameter detection by passing the keyword argument "
                "`find_unused_parameters=True` to `DistributedDataParallel`. Parameters that did not receive "
                f"a gradient on rank {dist.get_rank()}: {', '.join(names)}")
        if self.broadcast_buffers:
            bufs = list(self.module.buffers())
            if bufs:
                self._sync_from_rank0(bufs)
        out = self.module(*inputs, **kwargs)
        sync = self.require_backward_grad_sync and is_grad_enabled()
        object.__setattr__(self, "_armed", sync)
        object.__setattr__(self, "_overlap", _core_to_spare())
        if sync and self.find_unused_parameters:
            reached = _graph_leaves(list(_tensors_in(out)))
            object.__setattr__(self, "_unused", {i for i, p in enumerate(self._params) if id(p) not in reached})
            for i in self._unused:
                self._grad_ready(i)
        else:
            object.__setattr__(self, "_unused", set())
        return out

    def _names_of(self, indices):
        by_id = {id(p): name for name, p in self.module.named_parameters()}
        return [by_id.get(id(self._params[i]), f"#{i}") for i in indices]

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside accumulates gradients locally, without
        communication; the first backward after it averages them."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ---- backward: the reducer ----

    def _grad_ready(self, i):
        if not self._armed or i in self._done:
            return
        self._done.add(i)
        if self._traced:  # a compiled step: one functional reduction at the end
            if len(self._done) == len(self._params):
                self._finish_traced()
            return
        b = self._bucket_of[i]
        b.ready += 1
        if b.ready == len(b.params):
            self._fill(b)
            if self._overlap:
                self._reduce_bucket(b)
        if len(self._done) == len(self._params):
            if not self._overlap:  # no core to overlap on: everything at the end, a flat tensor per dtype
                for b in self._buckets:
                    self._reduce_bucket(b, packed=False)
                for flat in self._flats.values():
                    self._reduce(flat)
            self._finish()

    def _reduce_bucket(self, b, packed=True):
        for i in b.alone:  # (the same calls in the same order on every rank)
            self._reduce(self._stand_ins.get(i, self._params[i].grad))
        if packed and b.flat is not None:
            self._reduce(b.flat)

    def _reduce(self, flat):
        self._works.append(dist.all_reduce(flat, op=dist.ReduceOp.AVG, group=self.process_group, async_op=True))

    def _fill(self, b):
        """Copies the bucket's packed gradients into its slice of the flat
        tensor. A gradient to reduce alone is reduced in place when this
        rank used its parameter and it is contiguous; else a stand-in is
        reduced (zeros, or a contiguous copy), and _finish writes it back."""
        with no_grad():
            for i in b.alone:
                p = self._params[i]
                if p.grad is None:
                    self._stand_ins[i] = zeros_like(p)
                elif i in self._unused:  # (its gradient stays as it was if no rank used it)
                    self._stand_ins[i] = p.grad.clone()
                elif not p.grad.is_contiguous():
                    self._stand_ins[i] = p.grad.contiguous()
            params = [self._params[i] for i in b.packed]
            at = 0
            for i, p in zip(b.packed, params):
                n = p.numel()
                piece = b.flat[at:at + n]
                if p.grad is None:
                    piece.zero_()
                elif p.grad.data_ptr() != piece.data_ptr():  # (a bucket view accumulated in place)
                    piece.copy_(p.grad.reshape(-1))
                at += n

    def _finish(self):
        used_anywhere = None
        if self.find_unused_parameters:
            # which parameters some rank used: those keep None nowhere
            used = tensor([0 if i in self._unused else 1 for i in range(len(self._params))], dtype=int32)
            dist.all_reduce(used, op=dist.ReduceOp.MAX, group=self.process_group)
            used_anywhere = used.tolist()
        try:
            for w in self._works:
                w.wait()
            with no_grad():
                for i, stand_in in self._stand_ins.items():
                    p = self._params[i]
                    if used_anywhere is None or used_anywhere[i]:
                        if p.grad is None:
                            p.grad = stand_in
                        else:
                            p.grad.copy_(stand_in)
                for b in self._buckets:
                    at = 0
                    for i in b.packed:
                        p = self._params[i]
                        n = p.numel()
                        if used_anywhere is None or used_anywhere[i]:
                            avg = b.flat[at:at + n].view(p.shape)
                            if self.gradient_as_bucket_view:
                                if p.grad is None or p.grad.data_ptr() != avg.data_ptr():
                                    p.grad = avg
                            elif p.grad is None:
                                p.grad = avg.clone()
                            else:
                                p.grad.copy_(avg)
                        at += n
        finally:
            self._reset()

    def _finish_traced(self):
        """Inside a trace (a compiled training step): the gradients of each
        dtype concatenated, averaged by the all_reduce op (a node of the
        graph), and the averages made the .grad values, all as ops the
        trace records; the compiled step runs them in its place."""
        try:
            def grad_of(p):
                return p.grad if p.grad is not None else zeros_like(p)

            with no_grad():
                for b in self._buckets:
                    for i in b.alone:
                        p = self._params[i]
                        p.grad = dist.functional_all_reduce(grad_of(p), dist.ReduceOp.AVG, self.process_group)
                for dt in self._flats:
                    ps = [self._params[i] for b in self._buckets for i in b.packed if self._params[i].dtype == dt]
                    flat = cat([grad_of(p).reshape(-1) for p in ps])
                    avg = dist.functional_all_reduce(flat, dist.ReduceOp.AVG, self.process_group)
                    at = 0
                    for p in ps:
                        n = p.numel()
                        p.grad = avg[at:at + n].view(p.shape)
                        at += n
        finally:
            self._reset()

    def _reset(self):
        for b in self._buckets:
            b.ready = 0
        self._works.clear()
        self._stand_ins.clear()
        self._done.clear()
        object.__setattr__(self, "_armed", False)

