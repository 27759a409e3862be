"""A restricted pickle machine for files ember does not trust.

Python's own Unpickler, even with find_class overridden, still executes
every opcode on whatever objects find_class handed out: BUILD sets
attributes (a file could set `__defaults__` on a function, or forge a
field of an object the loader relies on), REDUCE calls any callable that
reached the stack, and the memo hands the same object out twice. So this
machine is written from scratch, as PyTorch's weights_only unpickler is,
over a whitelist of opcodes with a policy for each:

- globals are resolved only by the caller's `resolve(module, name)`, which
  returns an object or raises Refused; nothing is imported or looked up;
- REDUCE and NEWOBJ call only objects `resolve` returned, never anything
  built from the file's data;
- BUILD applies only to a collections.OrderedDict (a state_dict's
  `_metadata`), and only a dict of str keys, into its instance __dict__,
  or to an instance of a class the user allowlisted
  (ember.serialization.add_safe_globals, as PyTorch's), through its
  __setstate__ or __dict__; NEWOBJ of such a class is cls.__new__(cls,
  *args), as pickle's;
- APPEND(S) only to lists, SETITEM(S) only to dicts, ADDITEMS only to sets;
- the text opcodes of protocol 0 and 1, EXT, INST, OBJ, NEWOBJ_EX and the
  out-of-band buffers of protocol 5 are refused by name.

Every malformation (truncation, an empty stack, an unknown memo index) is
Malformed (a ValueError); every refusal is Refused (pickle.UnpicklingError,
as torch.load(weights_only=True) raises). Nothing recurses, so depth is
bounded by the caller's walk of the result, not by Python's stack."""

import collections
import pickle
import struct

__all__ = ["Refused", "Malformed", "load"]


class Refused(pickle.UnpicklingError):
    """A file ember will not read: it names something other than tensors and
    plain containers, or asks for an operation on an object that could
    change more than the data being read."""


class Malformed(ValueError):
    """A pickle that is not well formed."""


_MARK = object()  # (the stack's mark; never reaches a result)
# Tuples and frozensets hash and compare their items recursively in C with
# no depth check, so one nested 100,000 deep as a dict key would overflow
# the C stack; lists and dicts cannot be keys, so only these two are
# bounded, at creation (they are immutable: their depth never changes).
_MAX_TUPLE_DEPTH = 100

# Opcodes refused by name (see the module's docstring for why).
_REFUSED = {
    b"I": "INT", b"L": "LONG", b"F": "FLOAT", b"S": "STRING", b"V": "UNICODE", b"P": "PERSID",
    b"p": "PUT", b"g": "GET", b"T": "BINSTRING", b"U": "SHORT_BINSTRING", b"i": "INST", b"o": "OBJ",
    b"\x82": "EXT1", b"\x83": "EXT2", b"\x84": "EXT4", b"\x92": "NEWOBJ_EX", b"\x97": "NEXT_BUFFER",
    b"\x98": "READONLY_BUFFER",
}


class _Machine:
    def __init__(self, data, resolve, persistent_load, user_classes=()):
        self.user_classes = tuple(user_classes)  # (allowlisted by the user: see build and _newobj)
        self.raw = bytes(data)
        self.data, self.pos = memoryview(self.raw), 0
        self.resolve, self.persistent_load = resolve, persistent_load
        self.stack, self.marks, self.memo = [], [], {}
        # objects resolve() returned, the only things REDUCE may call: by id,
        # each held so its id stays its own (a set: a file may name globals
        # a million times)
        self.callables, self.callable_ids = [], set()
        self.depths = {}  # id -> (tuple or frozenset, its nesting depth); holds them, so ids stay unique

    # ---- reading the opcode stream

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise Malformed(f"truncated at byte {self.pos}: {n} bytes wanted, {len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def uint(self, n):
        return int.from_bytes(self.take(n), "little")

    def line(self):
        end = self.raw.find(b"\n", self.pos)
        if end < 0:
            raise Malformed(f"truncated at byte {self.pos}: a line without its end")
        text = bytes(self.take(end + 1 - self.pos)[:-1])
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError:
            raise Malformed(f"a global name that is not UTF-8 at byte {self.pos}") from None

    # ---- the stack

    def pop(self):
        if not self.stack or self.stack[-1] is _MARK:
            raise Malformed(f"an opcode at byte {self.pos} pops an empty stack")
        return self.stack.pop()

    def top(self):
        if not self.stack or self.stack[-1] is _MARK:
            raise Malformed(f"an opcode at byte {self.pos} needs a value on the stack")
        return self.stack[-1]

    def pop_mark(self):
        if not self.marks:
            raise Malformed(f"an opcode at byte {self.pos} needs a mark that is not there")
        at = self.marks.pop()
        items = self.stack[at + 1:]
        del self.stack[at:]
        return items

    def push_global(self, module, name):
        obj = self.resolve(module, name)
        if callable(obj) and id(obj) not in self.callable_ids:
            self.callables.append(obj)
            self.callable_ids.add(id(obj))
        self.stack.append(obj)

    def push_nested(self, kind, items):
        """Pushes kind(items) (tuple or frozenset), its depth checked."""
        depth = 1
        for x in items:
            if type(x) in (tuple, frozenset):
                depth = max(depth, 1 + self.depths[id(x)][1] if id(x) in self.depths else 2)
        if depth > _MAX_TUPLE_DEPTH:
            raise Malformed(f"tuples nested more than {_MAX_TUPLE_DEPTH} deep at byte {self.pos}")
        try:
            obj = kind(items)
        except TypeError as e:
            raise Malformed(f"a set item that cannot be one ({e})") from None
        self.depths[id(obj)] = (obj, depth)
        self.stack.append(obj)

    def call(self, func, args, what):
        if id(func) not in self.callable_ids:
            raise Refused(f"{what} of a {type(func).__name__}: a checkpoint may call only the rebuild functions "
                          f"it names as globals")
        if not isinstance(args, tuple):
            raise Malformed(f"{what} with arguments that are a {type(args).__name__}, not a tuple")
        return func(*args)

    def build(self):
        state = self.pop()
        inst = self.top()
        if type(inst) in self.user_classes:
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None:
                setstate(state)
                return
            slots = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slots = state
            if state:
                if not (isinstance(state, dict) and all(type(k) is str for k in state)):
                    raise Refused(f"BUILD on a {type(inst).__name__} with a state of {type(state).__name__}")
                inst.__dict__.update(state)
            for k, v in (slots or {}).items():
                setattr(inst, k, v)
            return
        if type(inst) is not collections.OrderedDict:
            raise Refused(f"BUILD on a {type(inst).__name__}: a checkpoint may set state only on an OrderedDict "
                          f"(a state_dict's _metadata), never on the objects it names as globals")
        if state is None:
            return
        if not (isinstance(state, dict) and all(type(k) is str for k in state)):
            raise Refused(f"BUILD on an OrderedDict with a state of {type(state).__name__}; only a dict of "
                          f"str keys is read")
        inst.__dict__.update(state)

    # ---- the loop

    def run(self):
        ops = _OPS
        while True:
            code = bytes(self.take(1))
            if code == b".":
                return self.pop()
            op = ops.get(code)
            if op is None:
                name = _REFUSED.get(code)
                if name:
                    raise Refused(f"the pickle opcode {name} at byte {self.pos - 1} (ember reads the binary "
                                  f"opcodes torch.save writes)")
                raise Malformed(f"unknown pickle opcode {code!r} at byte {self.pos - 1}")
            op(self)


def _memo_get(m, i):
    if i not in m.memo:
        raise Malformed(f"memo index {i} read before it was written")
    m.stack.append(m.memo[i])


def _memo_put(m, i):
    m.memo[i] = m.top()


def _append(m, items):
    seq = m.top()
    if type(seq) is not list:
        raise Refused(f"APPEND to a {type(seq).__name__}: only lists are appended to")
    seq.extend(items)


def _setitems(m, items):
    if len(items) % 2:
        raise Malformed("SETITEMS with an odd number of items")
    d = m.top()
    if not isinstance(d, dict):
        raise Refused(f"SETITEM on a {type(d).__name__}: only dicts get items")
    try:
        for i in range(0, len(items), 2):
            d[items[i]] = items[i + 1]
    except TypeError as e:
        raise Malformed(f"a dict key that cannot be one ({e})") from None


def _additems(m, items):
    s = m.top()
    if type(s) is not set:
        raise Refused(f"ADDITEMS on a {type(s).__name__}: only sets get items")
    try:
        s.update(items)
    except TypeError as e:
        raise Malformed(f"a set item that cannot be one ({e})") from None


def _text(m, n):
    try:
        m.stack.append(str(m.take(n), "utf-8"))
    except UnicodeDecodeError as e:
        raise Malformed(f"a string that is not UTF-8 ({e})") from None


def _stack_global(m):
    name, module = m.pop(), m.pop()
    if not (isinstance(module, str) and isinstance(name, str)):
        raise Malformed("STACK_GLOBAL with a module or name that is not a string")
    m.push_global(module, name)


def _tuple_n(n):
    def op(m):
        items = [m.pop() for _ in range(n)]
        m.push_nested(tuple, items[::-1])
    return op


def _reduce(m):
    args = m.pop()
    m.stack.append(m.call(m.pop(), args, "REDUCE"))


def _newobj(m):
    args, cls = m.pop(), m.pop()
    if not isinstance(cls, type):
        raise Refused(f"NEWOBJ of a {type(cls).__name__}, which is not a class")
    if cls in m.user_classes:  # (pickle's NEWOBJ: the object made, its state set by BUILD)
        if not isinstance(args, tuple):
            raise Malformed(f"NEWOBJ with arguments that are a {type(args).__name__}, not a tuple")
        m.stack.append(cls.__new__(cls, *args))
        return
    m.stack.append(m.call(cls, args, "NEWOBJ"))


def _persid(m):
    m.stack.append(m.persistent_load(m.pop()))


def _dup(m):
    m.stack.append(m.top())


def _pop(m):
    if m.stack and m.stack[-1] is _MARK:  # (POP removes a mark as well as a value)
        m.marks.pop()
        m.stack.pop()
    else:
        m.pop()


def _dict(m):
    items = m.pop_mark()
    m.stack.append({})
    _setitems(m, items)


def _mark(m):
    m.marks.append(len(m.stack))
    m.stack.append(_MARK)


def _proto(m):
    if m.uint(1) > pickle.HIGHEST_PROTOCOL:
        raise Malformed("an unsupported pickle protocol")


_OPS = {
    b"\x80": _proto,
    b"\x95": lambda m: m.take(8),  # FRAME: a length hint only
    b"(": _mark,
    b"0": _pop,
    b"1": lambda m: m.pop_mark(),  # POP_MARK
    b"2": _dup,
    b"N": lambda m: m.stack.append(None),
    b"\x88": lambda m: m.stack.append(True),
    b"\x89": lambda m: m.stack.append(False),
    b"J": lambda m: m.stack.append(struct.unpack("<i", m.take(4))[0]),  # BININT
    b"K": lambda m: m.stack.append(m.uint(1)),  # BININT1
    b"M": lambda m: m.stack.append(m.uint(2)),  # BININT2
    b"\x8a": lambda m: m.stack.append(int.from_bytes(m.take(m.uint(1)), "little", signed=True)),  # LONG1
    b"\x8b": lambda m: m.stack.append(int.from_bytes(m.take(struct.unpack("<i", m.take(4))[0]), "little",
                                                     signed=True)),  # LONG4
    b"G": lambda m: m.stack.append(struct.unpack(">d", m.take(8))[0]),  # BINFLOAT
    b"X": lambda m: _text(m, m.uint(4)),  # BINUNICODE
    b"\x8c": lambda m: _text(m, m.uint(1)),  # SHORT_BINUNICODE
    b"\x8d": lambda m: _text(m, m.uint(8)),  # BINUNICODE8
    b"B": lambda m: m.stack.append(bytes(m.take(m.uint(4)))),  # BINBYTES
    b"C": lambda m: m.stack.append(bytes(m.take(m.uint(1)))),  # SHORT_BINBYTES
    b"\x8e": lambda m: m.stack.append(bytes(m.take(m.uint(8)))),  # BINBYTES8
    b"\x96": lambda m: m.stack.append(bytearray(m.take(m.uint(8)))),  # BYTEARRAY8
    b")": lambda m: m.stack.append(()),
    b"t": lambda m: m.push_nested(tuple, m.pop_mark()),
    b"\x85": _tuple_n(1),
    b"\x86": _tuple_n(2),
    b"\x87": _tuple_n(3),
    b"]": lambda m: m.stack.append([]),
    b"l": lambda m: m.stack.append(m.pop_mark()),  # LIST
    b"a": lambda m: _append(m, [m.pop()]),
    b"e": lambda m: _append(m, m.pop_mark()),
    b"}": lambda m: m.stack.append({}),
    b"d": _dict,
    b"s": lambda m: _setitems(m, list(reversed([m.pop(), m.pop()]))),
    b"u": lambda m: _setitems(m, m.pop_mark()),
    b"\x8f": lambda m: m.stack.append(set()),
    b"\x90": lambda m: _additems(m, m.pop_mark()),
    b"\x91": lambda m: m.push_nested(frozenset, m.pop_mark()),
    b"c": lambda m: m.push_global(m.line(), m.line()),  # GLOBAL
    b"\x93": _stack_global,
    b"R": _reduce,
    b"\x81": _newobj,
    b"b": lambda m: m.build(),
    b"Q": _persid,  # BINPERSID
    b"q": lambda m: _memo_put(m, m.uint(1)),  # BINPUT
    b"r": lambda m: _memo_put(m, m.uint(4)),  # LONG_BINPUT
    b"\x94": lambda m: _memo_put(m, len(m.memo)),  # MEMOIZE
    b"h": lambda m: _memo_get(m, m.uint(1)),  # BINGET
    b"j": lambda m: _memo_get(m, m.uint(4)),  # LONG_BINGET
}


def load(data, resolve, persistent_load, user_classes=()):
    """The object the pickle `data` describes. `resolve(module, name)`
    returns what a global stands for (or raises Refused); only those
    objects may be called, by REDUCE or NEWOBJ. `persistent_load(pid)`
    returns what a persistent id stands for. `user_classes`: classes the
    user allowlisted, whose instances are made and given state as pickle
    does."""
    return _Machine(data, resolve, persistent_load, user_classes).run()
