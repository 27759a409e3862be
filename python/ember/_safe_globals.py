"""The globals a weights_only load may name besides tensors and plain
containers, as PyTorch 2.4+'s torch.serialization allowlist: classes (and
functions) the user trusts, whose instances a checkpoint may then hold
(a whole model saved with save(model)). Allowlisting a class lets a file
make its instances and set their state through the class's own
__setstate__; nothing the user did not name is imported or called."""

_ALLOWED = []  # objects, or (object, "module.qualname") pairs


def _names(entry):
    obj, name = entry if isinstance(entry, tuple) else (entry, None)
    if name is not None:
        return obj, {name}
    full = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    names = {full}
    if full.startswith("ember."):  # (a file PyTorch wrote names ember's classes under torch's modules)
        names.add("torch." + full[len("ember."):])
    return obj, names


def add_safe_globals(safe_globals):
    """Allows these globals (objects, or (object, "module.name") pairs) in
    loads with weights_only=True, from now on."""
    for entry in safe_globals:
        if isinstance(entry, tuple) and not (len(entry) == 2 and isinstance(entry[1], str)):
            raise TypeError(f"add_safe_globals: expected objects or (object, 'module.name') pairs, got {entry!r}")
        _ALLOWED.append(entry)


def get_safe_globals():
    """The globals allowed so far."""
    return list(_ALLOWED)


def clear_safe_globals():
    """Allows no globals beyond tensors and plain containers again."""
    _ALLOWED.clear()


class safe_globals:
    """A context manager: the globals allowed inside its block only.

        with ember.serialization.safe_globals([MyModel, ember.nn.Linear]):
            model = ember.load(f)
    """

    def __init__(self, safe_globals):
        self._globals = list(safe_globals)

    def __enter__(self):
        self._saved = list(_ALLOWED)
        add_safe_globals(self._globals)
        return self

    def __exit__(self, *exc):
        _ALLOWED[:] = self._saved
        return False


def lookup(module, name):
    """The allowed object a file names as module.name, or None."""
    want = f"{module}.{name}"
    for entry in _ALLOWED:
        obj, names = _names(entry)
        if want in names:
            return obj
    return None


def allowed_objects():
    """(classes, ids of every allowed object) for the loader's checks."""
    objs = [_names(e)[0] for e in _ALLOWED]
    return tuple(o for o in objs if isinstance(o, type)), {id(o) for o in objs}
