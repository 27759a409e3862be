"""Constants of ember's namespace known by their names (torch.layout's
strided, torch.memory_format's channels_last): printed as ember.<name>,
compared by identity, and pickled as a reference to the one constant of
that name, so a pickled module or tensor option comes back as the same
object."""


class NamedConstant:
    """Each subclass keeps its constants by name in its own `_all`."""

    __slots__ = ("_name",)
    _all = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._all = {}

    def __init__(self, name):
        self._name = name
        type(self)._all[name] = self

    def __repr__(self):
        return f"ember.{self._name}"

    def __reduce__(self):
        return (_constant, (type(self), self._name))


def _constant(cls, name):
    return cls._all[name]
