"""``@dataclass`` for the compile path, without the start-up cost of :mod:`dataclasses`.

``dataclasses.dataclass`` compiles ~6 small functions per class from source text when the class
is *defined*; for the ~70 record classes imported by a compile that was ~30 ms of every
``tilegen-tileiras`` process (plus ~7 ms to import ``dataclasses`` -> ``inspect`` -> ``ast``).
This decorator gives the same classes (the subset of options tilegen uses: ``frozen``, field
defaults, ``field(default=, default_factory=, init=, repr=, hash=, compare=)``, ``__post_init__``,
record bases) with the same generated methods, but compiles each of ``__init__``, ``__repr__``,
``__eq__`` and ``__hash__`` on its first call, so classes a compile never instantiates (or never
compares, prints or hashes) cost next to nothing.

Semantics follow CPython 3.11's ``dataclasses`` (eq=True, order=False, unsafe_hash=False):
``__eq__`` compares the tuple of ``compare`` fields of two instances of the same class, frozen
classes get ``__hash__`` over those fields and raise ``dataclasses.FrozenInstanceError`` on
assignment / deletion, non-frozen ones get ``__hash__ = None`` (unless the class body defines
one), methods the class body defines are kept, ``__match_args__`` is set. What differs: the
classes are not ``dataclasses.is_dataclass`` (no ``__dataclass_fields__``), so use
:func:`replace` / :func:`fields` from this module instead of the ``dataclasses`` ones.
"""

from __future__ import annotations

import sys
from reprlib import recursive_repr

__all__ = ["dataclass", "field", "fields", "replace", "Field", "MISSING"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


class _HasDefaultFactory:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_HAS_DEFAULT_FACTORY = _HasDefaultFactory()
_FIELDS = "__record_fields__"
_obj_setattr = object.__setattr__


class Field:
    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare")

    def __init__(self, default, default_factory, init, repr, hash, compare):  # noqa: A002
        self.name = None
        self.type = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare

    def __repr__(self) -> str:
        return (
            f"Field(name={self.name!r},type={self.type!r},default={self.default!r},"
            f"default_factory={self.default_factory!r},init={self.init!r},repr={self.repr!r},"
            f"hash={self.hash!r},compare={self.compare!r})"
        )


def field(
    *,
    default=MISSING,
    default_factory=MISSING,
    init=True,
    repr=True,  # noqa: A002
    hash=None,  # noqa: A002
    compare=True,
) -> Field:
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, hash, compare)


def fields(class_or_instance) -> tuple:
    try:
        return getattr(class_or_instance, _FIELDS)
    except AttributeError:
        raise TypeError("must be called with a record type or instance") from None


def replace(obj, /, **changes):
    """``dataclasses.replace`` for records (and, passed through, for real dataclasses)."""
    if hasattr(type(obj), "__dataclass_fields__"):
        import dataclasses

        return dataclasses.replace(obj, **changes)
    for f in fields(obj):
        if not f.init:
            if f.name in changes:
                raise ValueError(
                    f"field {f.name} is declared with init=False, it cannot be specified with "
                    "replace()"
                )
            continue
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def _frozen_error(message: str):
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


def _unsupported_annotation(ann) -> bool:
    if isinstance(ann, str):
        return "ClassVar" in ann or "InitVar" in ann or "KW_ONLY" in ann
    return "ClassVar" in repr(ann) or "InitVar" in repr(ann) or "KW_ONLY" in repr(ann)


def _tuple_str(obj: str, flds) -> str:
    if not flds:
        return "()"
    return "(" + ",".join(f"{obj}.{f.name}" for f in flds) + ",)"


def _compile(cls, name: str, args: str, body: list, local: dict):
    """One function from text, as dataclasses._create_fn does (module globals, closure locals)."""
    local_names = ", ".join(local)
    txt = f" def {name}({args}):\n" + "\n".join(f"  {b}" for b in body)
    txt = f"def __create_fn__({local_names}):\n{txt}\n return {name}"
    module = sys.modules.get(cls.__module__)
    glb = module.__dict__ if module is not None else {}
    ns: dict = {}
    exec(txt, glb, ns)  # noqa: S102 - generated from field names, like dataclasses
    fn = ns["__create_fn__"](**local)
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    return fn


def _build_init(cls):
    flds = getattr(cls, _FIELDS)
    frozen = cls.__record_frozen__
    local = {"__setattr": _obj_setattr, "_HAS_DEFAULT_FACTORY": _HAS_DEFAULT_FACTORY}
    params, body = ["self"], []
    for f in flds:
        dflt = f"_dflt_{f.name}"
        if f.default_factory is not MISSING:
            local[dflt] = f.default_factory
            if f.init:
                params.append(f"{f.name}=_HAS_DEFAULT_FACTORY")
                value = f"{dflt}() if {f.name} is _HAS_DEFAULT_FACTORY else {f.name}"
            else:
                value = f"{dflt}()"
        elif f.init:
            if f.default is not MISSING:
                local[dflt] = f.default
                params.append(f"{f.name}={dflt}")
            else:
                params.append(f.name)
            value = f.name
        elif f.default is not MISSING:
            local[dflt] = f.default
            value = dflt
        else:
            continue
        if frozen:
            body.append(f"__setattr(self,{f.name!r},{value})")
        else:
            body.append(f"self.{f.name}={value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    return _compile(cls, "__init__", ", ".join(params), body or ["pass"], local)


def _build_repr(cls):
    flds = [f for f in getattr(cls, _FIELDS) if f.repr]
    text = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in flds)
    fn = _compile(
        cls, "__repr__", "self", [f'return self.__class__.__qualname__ + f"({text})"'], {}
    )
    return recursive_repr()(fn)


def _build_eq(cls):
    flds = [f for f in getattr(cls, _FIELDS) if f.compare]
    body = [
        "if other.__class__ is self.__class__:",
        f" return {_tuple_str('self', flds)}=={_tuple_str('other', flds)}",
        "return NotImplemented",
    ]
    return _compile(cls, "__eq__", "self, other", body, {})


def _build_hash(cls):
    flds = [f for f in getattr(cls, _FIELDS) if (f.compare if f.hash is None else f.hash)]
    return _compile(cls, "__hash__", "self", [f"return hash({_tuple_str('self', flds)})"], {})


def _lazy(cls, name: str, build):
    """A method that compiles the real one on its first call and puts it on ``cls``."""

    def method(self, *args, **kwargs):
        fn = cls.__dict__.get(name)
        if fn is method:
            fn = build(cls)
            setattr(cls, name, fn)
        return fn(self, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    return method


def _frozen_methods(cls, names: tuple):
    def __setattr__(self, name, value):
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for fn in (__setattr__, __delattr__):
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    return __setattr__, __delattr__


def _process(cls, frozen: bool, defaults: dict | None = None):
    all_fields: dict = {}
    for base in cls.__mro__[-1:0:-1]:
        if "__dataclass_fields__" in base.__dict__:
            raise TypeError(f"{cls.__name__}: a record cannot derive from a dataclass")
        base_fields = base.__dict__.get(_FIELDS)
        if base_fields is not None:
            if base.__record_frozen__ != frozen:
                raise TypeError(
                    "cannot inherit frozen dataclass from a non-frozen one"
                    if frozen
                    else "cannot inherit non-frozen dataclass from a frozen one"
                )
            for f in base_fields:
                all_fields[f.name] = f
    annotations = cls.__dict__.get("__annotations__", {})
    for name, ann in annotations.items():
        if _unsupported_annotation(ann):
            raise TypeError(f"{cls.__name__}.{name}: ClassVar / InitVar / KW_ONLY not supported")
        default = defaults.get(name, MISSING) if defaults is not None else MISSING
        if default is MISSING:
            default = cls.__dict__.get(name, MISSING)
        if isinstance(default, Field):
            f = default
            if name in cls.__dict__:
                delattr(cls, name)
            if f.default is not MISSING and defaults is None:
                setattr(cls, name, f.default)
        else:
            f = Field(default, MISSING, True, True, None, True)
        f.name, f.type = name, ann
        if f.default is not MISSING and f.default.__class__.__hash__ is None:
            raise ValueError(
                f"mutable default {type(f.default)} for field {name} is not allowed: "
                "use default_factory"
            )
        all_fields[name] = f
    for name, value in cls.__dict__.items():
        if isinstance(value, Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    flds = tuple(all_fields.values())
    seen_default = False
    for f in flds:
        if f.init:
            if f.default is MISSING and f.default_factory is MISSING:
                if seen_default:
                    raise TypeError(f"non-default argument {f.name!r} follows default argument")
            else:
                seen_default = True

    setattr(cls, _FIELDS, flds)
    cls.__record_frozen__ = frozen
    own = cls.__dict__
    for name, build in (("__init__", _build_init), ("__repr__", _build_repr)):
        if name not in own:
            setattr(cls, name, _lazy(cls, name, build))
    class_hash = own.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in own))
    if "__eq__" not in own:
        setattr(cls, "__eq__", _lazy(cls, "__eq__", _build_eq))
    if not explicit_hash:
        cls.__hash__ = _lazy(cls, "__hash__", _build_hash) if frozen else None
    if frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in own:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
        cls.__setattr__, cls.__delattr__ = _frozen_methods(cls, tuple(f.name for f in flds))
    if "__match_args__" not in own:
        cls.__match_args__ = tuple(f.name for f in flds if f.init)
    if not getattr(cls, "__doc__"):
        cls.__doc__ = cls.__name__ + "(" + ", ".join(_param_doc(f) for f in flds if f.init) + ")"
    return cls


def _param_doc(f: Field) -> str:
    ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", f.type)
    text = f"{f.name}: {ann!r}" if isinstance(ann, str) else f"{f.name}: {ann}"
    if f.default_factory is not MISSING:
        return text + " = <factory>"
    if f.default is not MISSING:
        return text + f" = {f.default!r}"
    return text


def _slotted(cls):
    """``cls`` rebuilt with ``__slots__`` for its own fields (as ``dataclasses`` does for
    ``slots=True``), and the field defaults it had as class attributes, which slots forbid."""
    names = tuple(cls.__dict__.get("__annotations__", {}))
    body = dict(cls.__dict__)
    defaults = {n: body.pop(n) for n in names if n in body}
    body.pop("__dict__", None)
    body.pop("__weakref__", None)
    body["__slots__"] = names
    return type(cls)(cls.__name__, cls.__bases__, body), defaults


def _slot_state(cls) -> None:
    """Copy and pickle support for a frozen slotted record (its ``__setattr__`` refuses)."""

    def __getstate__(self):
        return [getattr(self, f.name) for f in getattr(cls, _FIELDS)]

    def __setstate__(self, state):
        for f, value in zip(getattr(cls, _FIELDS), state):
            _obj_setattr(self, f.name, value)

    cls.__getstate__, cls.__setstate__ = __getstate__, __setstate__


def dataclass(cls=None, /, *, frozen: bool = False, slots: bool = False):
    """``@dataclass`` / ``@dataclass(frozen=True)`` / ``slots=True``: see the module docstring.
    A slotted record must derive from slotted bases (``__slots__ = ()``) to lose its
    ``__dict__``."""

    def wrap(c):
        if not slots:
            return _process(c, frozen)
        c, defaults = _slotted(c)
        c = _process(c, frozen, defaults)
        if frozen:
            _slot_state(c)
        return c

    return wrap if cls is None else wrap(cls)
