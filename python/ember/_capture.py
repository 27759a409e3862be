"""What a compiled function's trace reads from Python state, and what it
does to it.

ember.compile traces a call by running the function once, eagerly; a
replay of the recorded ops is right only while everything the function
read from outside its arguments is what it was. python/csrc/capture.c
watches the trace instruction by instruction (frames outside ember's own
package) and calls a Recorder at each instruction that reads or changes
such state:

- reads become guards, checked before every compiled call: a global (or
  builtin) by name, a closure cell, an attribute (the instance's __dict__
  item, the class's attribute, a __slots__ member), a dict item, a list
  item, a whole list, dict or set that was iterated, measured, searched,
  unpacked or used as an operand;
  numbers, strings, bytes and tuples by value, anything else by identity
  (a tensor, a module, a function). A guard that fails traces the call
  again (or, past the cache limit, runs it eagerly, saying which value);
- changes a replay would skip are side effects: a global or nonlocal
  store, an attribute or item store on, or a mutating method of, an object
  that outlives the call; print, logging, warnings, Python's random and
  time, NumPy's random, ember.manual_seed. The call then runs eagerly, as
  every later call with those guards does, with one warning naming the
  line. So do reads of the contents of a NumPy array, bytearray,
  memoryview, array.array or deque that outlives the call: no guard
  watches them (a NumPy array's shape and dtype are guarded).

What counts as outliving the call: every object but those the call is
seen to make (the result of a call, a list, dict or set display, a binary
operation or a function definition in code it runs, unless that object
was reached through state first). Objects the call makes are its own:
reading or changing them needs no guard. Tensors are the tracer's: their
values are graph inputs, their metadata guarded apart.

Guard kinds (python/csrc/capture.c, ORDER GUARD KIND): DICT (dict, key,
value or ABSENT), CELL (cell, None, value), LIST_ITEM (list, index, value),
LIST (list, None, tuple of its items), DICT_ALL (dict, None, a copy),
TYPE (type, name, what its MRO holds), MEMBER (object, name, value), SET
(set, None, a frozenset copy)."""

import array
import collections
import os
import sys
import types

from . import _C
from ._tensor import Tensor

DICT, CELL, LIST_ITEM, LIST, DICT_ALL, TYPE, MEMBER, SET = range(8)  # ORDER GUARD KIND


class _Absent:
    def __repr__(self):
        return "<absent>"


ABSENT = _Absent()

# values compared by value (the rest by identity), as capture.c's same_value
_BY_VALUE = (int, float, str, bytes, tuple, bool, type(None))
_MUTATING = {
    list: {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
           "__delitem__", "__iadd__", "__imul__"},
    dict: {"update", "pop", "popitem", "clear", "setdefault", "__setitem__", "__delitem__", "__ior__"},
    set: {"add", "discard", "remove", "pop", "clear", "update", "difference_update", "intersection_update",
          "symmetric_difference_update", "__ior__", "__iand__", "__isub__", "__ixor__"},
    bytearray: {"append", "extend", "insert", "pop", "remove", "clear", "reverse", "__setitem__", "__delitem__"},
}


# a NumPy array's attributes read as metadata, guarded by value
_ARRAY_METADATA = {"shape", "ndim", "size", "dtype", "strides", "itemsize", "nbytes"}


def _unguarded(obj):
    """Is obj a container whose contents can change and no guard kind
    watches (reading them makes the call run eagerly)?"""
    if isinstance(obj, (bytearray, memoryview, array.array, collections.deque)):
        return True
    np = sys.modules.get("numpy")  # (not imported: no array exists)
    return np is not None and isinstance(obj, np.ndarray)


def _is_ember(fn, owner):
    """Is fn ember's own (its tracer sees what it does with an array)?"""
    mod = getattr(fn, "__module__", None)
    return isinstance(owner, Tensor) or (isinstance(mod, str) and (mod == "ember" or mod.startswith("ember.")))


def _impure_callables():
    """Functions whose call a replay would skip: {object id: what it is}."""
    import builtins
    import random
    import time
    import warnings
    import ember
    out = {}
    for name in ("print", "input", "open", "breakpoint", "exec", "eval"):
        out[id(getattr(builtins, name))] = f"{name}()"
    for name in dir(time):
        f = getattr(time, name)
        if callable(f) and not isinstance(f, type):
            out[id(f)] = f"time.{name}()"
    out[id(warnings.warn)] = "warnings.warn()"
    out[id(ember.manual_seed)] = "ember.manual_seed()"
    for name in ("manual_seed", "seed"):
        if hasattr(_C, name):
            out[id(getattr(_C, name))] = f"ember.{name}()"
    for name in dir(random):
        f = getattr(random, name)
        if callable(f) and not isinstance(f, type) and not name.startswith("_"):
            out[id(f)] = f"random.{name}()"
    return out


_IMPURE = None
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _watched(fn):
    """Is fn Python code the trace watches (not C, not ember's own)?"""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    return code is not None and not code.co_filename.startswith(_OWN_DIR)


def _describe_impure(fn, self_):
    """What calling fn (on self_) does that a replay would skip, or None."""
    global _IMPURE
    if _IMPURE is None:
        _IMPURE = _impure_callables()
    what = _IMPURE.get(id(fn))
    if what:
        return what
    owner = getattr(fn, "__self__", None)
    if owner is None:
        owner = self_
    mod = getattr(fn, "__module__", None) or getattr(type(owner), "__module__", None) or ""
    if isinstance(mod, str) and mod.startswith(("numpy.random", "logging", "random")):
        name = getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))
        return f"{mod}.{name}()"
    import logging
    import random
    if isinstance(owner, (logging.Logger, logging.LoggerAdapter, random.Random)):
        return f"{type(owner).__name__}.{getattr(fn, '__name__', '?')}()"
    return None


def _is_module(obj):
    from .nn.modules.module import Module
    return isinstance(obj, Module)


def _key_text(key):
    """A key for a message, without running any object's __repr__ (a
    tensor's repr would itself be noted as printing)."""
    if isinstance(key, (str, int, float, bool, type(None))):
        return repr(key)[:60]
    return f"<a {type(key).__name__}>"


class Recorder:
    """One trace's reads (guards) and its first side effect."""

    def __init__(self):
        self.guards = []
        self._seen = set()
        # id -> object (held, so that ids stay unique while the trace runs):
        # objects reached through state, and objects the call made
        self._outside, self._made = {}, {}
        self.effect = None  # "what (file:line)"
        self.failure = None

    # ---- bookkeeping

    def _mark(self, v):
        """v was reached through state: it outlives the call. (Not one the
        call made before: reached again through a container of unknown
        origin, as a *args tuple, it is still the call's own; putting it
        into state would have been a side effect.)"""
        if v is not ABSENT and not isinstance(v, (Tensor, int, float, str, bytes, type(None))) and \
                id(v) not in self._made:
            self._outside[id(v)] = v

    def _is_outside(self, v):
        return id(v) in self._outside or id(v) not in self._made

    def _guard(self, kind, container, key, value, what):
        k = (kind, id(container), key if isinstance(key, (str, int)) else id(key))
        if k in self._seen:
            return
        self._seen.add(k)
        self.guards.append((kind, container, key, value, what))

    def _effect(self, what, where):
        if self.effect is None:
            self.effect = f"{what} ({where})"

    def _read_unguarded(self, obj, where):
        self._effect(f"it reads the contents of a {type(obj).__name__} that outlives the call, which no guard "
                     "watches (pass it as an argument, or share it with ember.from_numpy)", where)

    def finish(self):
        """Lets go of the objects held while the trace ran (a tensor the call
        made and dropped must not look kept alive)."""
        self._outside.clear()
        self._made.clear()

    def guard_items(self, d, keys):
        """d[k] for k in keys, read by ember's own code (which is not
        watched): module modes and tensors, optimizer settings."""
        for k in keys:
            self._guard(DICT, d, k, d[k], f"item {_key_text(k)} of ember's own state")

    # ---- called by capture.c, with the instruction's operands and its place

    def broken(self, method, error):
        self.failure = f"recording what it reads failed in {method}: {error!r}"

    def made(self, obj, where):
        if id(obj) not in self._outside:
            self._made[id(obj)] = obj

    def load_global(self, globals_, builtins, name, where):
        v = globals_.get(name, ABSENT)
        self._guard(DICT, globals_, name, v, f"global {name} ({where})")
        if v is ABSENT and isinstance(builtins, dict):
            v = builtins.get(name, ABSENT)
            self._guard(DICT, builtins, name, v, f"builtin {name} ({where})")
        self._mark(v)

    def load_deref(self, cell, fn, name, where):
        if id(cell) in self._made:  # (a cell of a frame the call ran: the call's own)
            return
        try:
            v = cell.cell_contents
        except ValueError:
            v = ABSENT
        self._guard(CELL, cell, None, v, f"closure variable {name} ({where})")
        self._mark(v)

    def store_deref(self, cell, fn, name, where):
        if id(cell) not in self._made:
            self._effect(f"it assigns the closure variable {name} (nonlocal)", where)

    def load_attr(self, obj, name, where):
        if isinstance(obj, Tensor) or not isinstance(name, str):
            return
        if isinstance(obj, types.ModuleType):
            d = obj.__dict__
            v = d.get(name, ABSENT)
            self._guard(DICT, d, name, v, f"{obj.__name__}.{name} ({where})")
            self._mark(v)
            return
        if isinstance(obj, type):
            v = _C._type_lookup(obj, name, ABSENT)
            self._guard(TYPE, obj, name, v, f"{obj.__name__}.{name} ({where})")
            self._mark(v)
            return
        if not self._is_outside(obj):
            return
        t = type(obj)
        descr = _C._type_lookup(t, name, ABSENT)
        if _unguarded(obj):
            # a C attribute: a NumPy array's metadata guarded, a view (.T,
            # .real) outlives the call as its base does; methods are calls
            if isinstance(descr, (types.GetSetDescriptorType, types.MemberDescriptorType)):
                v = getattr(obj, name, ABSENT)
                if name in _ARRAY_METADATA:
                    self._guard(MEMBER, obj, name, v, f"attribute {t.__name__}.{name} ({where})")
                self._mark(v)
            return
        what = f"{t.__name__}.{name} ({where})"
        self._guard(TYPE, t, name, descr, f"the class attribute {what}")
        dt = type(descr)
        if descr is not ABSENT and (hasattr(dt, "__set__") or hasattr(dt, "__delete__")):
            if isinstance(descr, types.MemberDescriptorType):  # (__slots__: mutable state)
                v = getattr(obj, name, ABSENT)
                self._guard(MEMBER, obj, name, v, f"attribute {what}")
                self._mark(v)
            return  # (a property's getter runs as code of its own, watched in turn)
        d = _C._instance_dict(obj)
        if d is not None:
            v = d.get(name, ABSENT)
            self._guard(DICT, d, name, v, f"attribute {what}")
            if v is not ABSENT:
                self._mark(v)
                return
        if descr is not ABSENT and not callable(descr):
            self._mark(descr)

    def load_own_attr(self, obj, name, where):
        """ember's own code reading an attribute: guarded when it is a
        module's setting (a dropout's p, a norm's eps), which users change;
        ember's internals are not state."""
        if isinstance(name, str) and not name.startswith("_") and _is_module(obj) and self._is_outside(obj):
            d = _C._instance_dict(obj)
            if d is not None and name in d and isinstance(d[name], _BY_VALUE):
                self._guard(DICT, d, name, d[name], f"attribute {type(obj).__name__}.{name} ({where})")

    def subscr(self, container, key, where):
        if not self._is_outside(container):
            return
        if isinstance(key, Tensor):
            return  # (indexing by a tensor: the tracer's)
        if _unguarded(container):
            self._read_unguarded(container, where)
            return
        if type(container) is dict or (isinstance(container, dict) and
                                       type(container).__getitem__ is dict.__getitem__):
            try:
                v = container.get(key, ABSENT)
            except TypeError:  # (unhashable: the call raises anyway)
                return
            self._guard(DICT, container, key, v, f"item {_key_text(key)} of a dict ({where})")
            self._mark(v)
        elif type(container) is list and isinstance(key, int):
            try:
                v = container[key]
            except IndexError:
                return
            self._guard(LIST_ITEM, container, key, v, f"item {key} of a list ({where})")
            self._mark(v)
        elif type(container) is list:
            self.iterate(container, where)
        elif type(container) is tuple:
            for x in container:
                self._mark(x)

    def iterate(self, obj, where):
        """The whole of obj read: iterated, measured or searched."""
        if not self._is_outside(obj):
            return
        if type(obj) is list:
            self._guard(LIST, obj, None, tuple(obj), f"the items of a list ({where})")
            for x in obj:
                self._mark(x)
        elif type(obj) is dict:
            self._guard(DICT_ALL, obj, None, dict(obj), f"the items of a dict ({where})")
            for x in obj.values():
                self._mark(x)
            for x in obj:
                self._mark(x)
        elif type(obj) is set:
            self._guard(SET, obj, None, frozenset(obj), f"the items of a set ({where})")
            for x in obj:
                self._mark(x)
        elif type(obj) is tuple:
            for x in obj:
                self._mark(x)
        elif _unguarded(obj):
            self._read_unguarded(obj, where)

    def _read_whole(self, obj, where, depth):
        """An outside list or dict (or a tuple of them) handed to code that
        is not watched: its contents are read, to the depth given."""
        if depth > 0 and _unguarded(obj):
            self.iterate(obj, where)
        if depth <= 0 or not isinstance(obj, (list, dict, tuple, set)):
            return
        self.iterate(obj, where)
        if self._is_outside(obj) or type(obj) is tuple:
            for x in (obj.values() if isinstance(obj, dict) else list(obj)):
                self._read_whole(x, where, depth - 1)

    def store_attr(self, obj, name, where):
        if isinstance(obj, Tensor):
            return  # (the tracer's: .grad, .data and friends)
        if isinstance(obj, (types.ModuleType, type)) or self._is_outside(obj):
            self._effect(f"it sets the attribute {name} of a {type(obj).__name__} that outlives the call", where)

    def store_subscr(self, container, where):
        if not isinstance(container, Tensor) and self._is_outside(container):
            self._effect(f"it stores into a {type(container).__name__} that outlives the call", where)

    def store_global(self, name, where):
        self._effect(f"it assigns the global {name}", where)

    def call(self, fn, self_, args, where):
        owner = getattr(fn, "__self__", None)
        target = self_ if self_ is not None else owner
        name = getattr(fn, "__name__", None)
        # a mutating method of a container that outlives the call
        for kind, names in _MUTATING.items():
            if isinstance(target, kind) and name in names and self._is_outside(target):
                self._effect(f"it calls {kind.__name__}.{name} on a {kind.__name__} that outlives the call", where)
                return
        if name == "__setattr__" or fn is setattr or fn is delattr:
            if args and (self._is_outside(args[0]) or isinstance(args[0], types.ModuleType)):
                self._effect(f"it calls {name or fn.__name__} on an object that outlives the call", where)
            return
        impure = _describe_impure(fn, self_)
        if impure:
            self._effect(f"it calls {impure}", where)
            return
        if _unguarded(target) and self._is_outside(target):  # (a method of an array: it reads it)
            self._read_unguarded(target, where)
            return
        # reads by builtins and methods, which no opcode shows
        if not _watched(fn):  # (C, or ember's code: what it reads of a list or dict it is given)
            own = _is_ember(fn, owner)
            for a in args:
                if not (own and _unguarded(a)):  # (ember's tracer sees an array turned into a tensor)
                    self._read_whole(a, where, 3)
        if fn is getattr or fn is hasattr:
            if len(args) >= 2:
                self.load_attr(args[0], args[1], where)
        elif fn is len or fn is sorted or fn is sum or fn is any or fn is all or fn is max or fn is min:
            if args:
                self.iterate(args[0], where)
        elif isinstance(target, dict) and name in ("get", "keys", "values", "items", "copy", "__contains__"):
            self.iterate(target, where)
        elif isinstance(target, list) and name in ("index", "count", "copy", "__contains__"):
            self.iterate(target, where)
        elif isinstance(target, set):  # (its mutating methods are side effects, above)
            self.iterate(target, where)


