"""The judge–solver link of the sandbox (runs INSIDE it; never imported by evalkit).

One JSON message a line. The judge sends ``["load", code]``, then ``["call", h, args,
kwargs]``, ``["attr", h, name]``, ``["op", name, h, args]`` and ``["plain", h]``; the
solver answers ``["ok", value, mutated]`` or ``["err", type name, message]``. Values are
plain data — None, bool, int, float, str, list, and tagged ``{"t": tuple}``,
``{"s": set}``, ``{"f": frozenset}``, ``{"d": [[k, v], ...]}``, ``{"b": hex bytes}``,
``{"a": hex bytearray}``, ``{"c": [re, im]}`` — or ``{"h": n}``, the solver's n-th
object, which the judge sees as a ``Remote``. The solver is the untrusted side: whatever
it sends decodes into built-in values or handles, never into code or trusted state.
"""

import builtins
import contextlib
import json
import operator

MAX_LINE = 1 << 24
_DEPTH = 200
_OPS = {
    **{n: getattr(operator, n) for n in ("eq", "ne", "lt", "le", "gt", "ge", "getitem")},
    **{n: getattr(operator, n) for n in ("contains", "add", "sub", "mul", "truediv")},
    **{n: getattr(operator, n) for n in ("floordiv", "mod", "pow", "neg", "abs", "index")},
    "setitem": operator.setitem,
    "delitem": operator.delitem,
    "bool": bool,
    "len": len,
    "iter": iter,
    "next": next,
    "repr": repr,
    "str": str,
    "hash": hash,
    "int": int,
    "float": float,
}
_MUTABLE = (list, dict, set, bytearray)


class NoPlainValue(Exception):
    """The value is not plain data (a strict encoding was asked for)."""


def encode(x, handle, depth=0):
    """``x`` as JSON-ready plain data; ``handle(x)`` names what is not plain."""
    if depth > _DEPTH:
        raise ValueError("value nested too deeply to cross the sandbox boundary")
    if x is None or isinstance(x, bool):
        return None if x is None else bool(x)
    if isinstance(x, (int, float, str)):
        return (int if isinstance(x, int) else float if isinstance(x, float) else str)(x)
    if type(x).__module__ == "numpy" and hasattr(x, "tolist"):  # scalars and arrays
        return encode(x.tolist(), handle, depth + 1)
    if isinstance(x, (list, tuple, set, frozenset)):
        items = [encode(v, handle, depth + 1) for v in x]
        tag = "t" if isinstance(x, tuple) else "s" if isinstance(x, set) else "f"
        return items if isinstance(x, list) else {tag: items}
    if isinstance(x, dict):
        return {
            "d": [
                [encode(k, handle, depth + 1), encode(v, handle, depth + 1)] for k, v in x.items()
            ]
        }
    if isinstance(x, (bytes, bytearray)):
        return {"a" if isinstance(x, bytearray) else "b": bytes(x).hex()}
    if isinstance(x, complex):
        return {"c": [float(x.real), float(x.imag)]}
    return {"h": handle(x)}


def decode(x, handle, depth=0):
    """Plain data back into built-in values; ``handle(n)`` resolves ``{"h": n}``."""
    if depth > _DEPTH:
        raise ValueError("value nested too deeply")
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, list):
        return [decode(v, handle, depth + 1) for v in x]
    if not isinstance(x, dict) or len(x) != 1:
        raise ValueError("malformed value from the other side of the sandbox")
    ((tag, v),) = x.items()
    if tag in ("t", "s", "f"):
        items = [decode(i, handle, depth + 1) for i in v]
        return {"t": tuple, "s": set, "f": frozenset}[tag](items)
    if tag == "d":
        return {decode(k, handle, depth + 1): decode(w, handle, depth + 1) for k, w in v}
    if tag in ("b", "a"):
        return (bytes if tag == "b" else bytearray)(bytes.fromhex(v))
    if tag == "c":
        return complex(float(v[0]), float(v[1]))
    if tag == "h":
        return handle(int(v))
    raise ValueError(f"unknown value tag {tag!r} from the other side of the sandbox")


def describe(exc):
    """One short line naming an exception (for the verdict's ``error``)."""
    return f"{type(exc).__name__}: {exc}"[:500]


class SolverGone(RuntimeError):
    """The solver process ended or broke the protocol."""


def _strict(x):
    raise NoPlainValue(type(x).__name__)


def serve(requests, replies):
    """The solver's loop: load the answer's code, then answer calls until EOF."""
    objects = []

    def keep(x):
        objects.append(x)
        return len(objects) - 1

    def obj(n):
        return objects[n]

    namespace = {"__name__": "__main__"}
    for line in requests:
        req = json.loads(line)
        try:
            if req[0] == "load":
                exec(compile(req[1], "<solution>", "exec"), namespace)
                value, mutated = _names(namespace), []
            else:
                value, mutated = _answer(req, obj)
            name = _strict if req[0] == "plain" else keep
            msg = ["ok", encode(value, name), [[i, encode(a, keep)] for i, a in mutated]]
        except BaseException as exc:  # SystemExit too: the answer may not end the run
            msg = ["err", type(exc).__name__, str(exc)[:500]]
        replies.write(json.dumps(msg).encode() + b"\n")
        replies.flush()


def _names(namespace):
    # [values, modules]: modules go by name (the judge imports its own copy).
    values, modules = {}, {}
    for name, value in namespace.items():
        if name.startswith("__"):
            continue
        if type(value).__name__ == "module":
            modules[name] = str(value.__name__)
        else:
            values[name] = value
    return [values, modules]


def _answer(req, obj):
    if req[0] == "call":
        args = [decode(a, obj) for a in req[2]]
        value = obj(req[1])(*args, **decode(req[3], obj))
        return value, [(i, a) for i, a in enumerate(args) if isinstance(a, _MUTABLE)]
    if req[0] == "attr":
        return getattr(obj(req[1]), str(req[2])), []
    if req[0] == "op":
        return _OPS[req[1]](obj(req[2]), *[decode(a, obj) for a in req[3]]), []
    if req[0] == "plain":
        return obj(req[1]), []
    raise ValueError(f"unknown request {req[0]!r}")


_NO_PLAIN = object()


class Judge:
    """The judge's end of the link: loads the answer's code, then calls into it."""

    def __init__(self, requests, replies):
        self._out, self._in = requests, replies
        self._gone = ""

    def close(self):
        """Close both pipes (the solver reads EOF and exits)."""
        for f in (self._out, self._in):
            with contextlib.suppress(OSError):
                f.close()

    def load(self, code):
        """Run the answer's code in the solver; its top-level names as the tests see them."""
        values, modules = self.ask("load", code)
        names = {k: v for k, v in values.items() if _visible(k)}
        for name, module in modules.items():
            if not _visible(name) or not isinstance(module, str):
                continue
            # The judge's own copy of what the answer imported (math, re, numpy); one that
            # does not import leaves the name undefined, failing the tests that use it.
            with contextlib.suppress(Exception):
                names[name] = __import__(module, fromlist=["_"])
        return names

    def ask(self, *req):
        """Send one request; the decoded answer, or the solver's exception raised here."""
        tag, value, _ = self._exchange(list(req))
        if tag == "err":
            raise _exception(*value)
        return value

    def call(self, fn, args, kwargs):
        """``fn(*args, **kwargs)`` in the solver; mutated list/dict/set arguments follow."""
        req = ["call", fn._n, _out(list(args)), _out(dict(kwargs))]
        tag, value, mutated = self._exchange(req)
        if tag == "err":
            raise _exception(*value)
        for i, new in mutated:
            if 0 <= i < len(args) and type(args[i]) is type(new):
                old = args[i]
                if isinstance(old, (list, bytearray)):
                    old[:] = new
                else:
                    old.clear()
                    old.update(new)
        return value

    def plain(self, remote):
        """The object's value as plain data, or ``_NO_PLAIN``."""
        tag, value, _ = self._exchange(["plain", remote._n])
        if tag == "err":
            if value[0] == "NoPlainValue":
                return _NO_PLAIN
            raise _exception(*value)
        return value

    def _exchange(self, req):
        if self._gone:
            raise SolverGone(self._gone)
        try:
            self._out.write(json.dumps(req).encode() + b"\n")
            self._out.flush()
            line = self._in.readline(MAX_LINE)
        except (OSError, ValueError):
            line = b""
        try:
            msg = json.loads(line) if line.endswith(b"\n") else None
            if msg and msg[0] == "err":
                return "err", (str(msg[1]), str(msg[2])), None
            if msg and msg[0] == "ok":
                value = decode(msg[1], self._remote)
                mutated = [(int(i), decode(v, self._remote)) for i, v in msg[2]]
                return "ok", value, mutated
        except (ValueError, TypeError, IndexError, KeyError, RecursionError):
            pass
        self._gone = "the answer's process ended or broke the sandbox protocol"
        raise SolverGone(self._gone)

    def _remote(self, n):
        return Remote(self, n)


def _visible(name):
    # The tests' builtins stay the builtins: an answer defining `len`, `sorted` or
    # `isinstance` (or `__builtins__`) would otherwise judge the tests' checks itself.
    return (
        isinstance(name, str)
        and name.isidentifier()
        and not name.startswith("__")
        and name not in _BUILTIN_NAMES
    )


_BUILTIN_NAMES = frozenset(dir(builtins))


def _out(x):
    def handle(v):
        if isinstance(v, Remote):
            return v._n
        raise TypeError(f"a {type(v).__name__} cannot be passed to the answer's code")

    return encode(x, handle)


def _exception(name, message):
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        with contextlib.suppress(Exception):  # constructors with other signatures
            return cls(message)
    return RuntimeError(message)


class Remote:
    """A solver object seen from the judge. Every use is a request; compared or combined
    with the judge's own values, it stands for its plain value (an object with none —
    say one whose ``__eq__`` always says True — is unequal to every plain value)."""

    __slots__ = ("_judge", "_n")

    def __init__(self, judge, n):
        object.__setattr__(self, "_judge", judge)
        object.__setattr__(self, "_n", n)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._judge.ask("attr", self._n, name)

    def __call__(self, *args, **kwargs):
        return self._judge.call(self, args, kwargs)

    def __getitem__(self, key):
        return self._judge.ask("op", "getitem", self._n, _out([key]))

    def __setitem__(self, key, value):
        self._judge.ask("op", "setitem", self._n, _out([key, value]))

    def __delitem__(self, key):
        self._judge.ask("op", "delitem", self._n, _out([key]))

    def _unary(self, name, kind):
        mine = self._judge.plain(self)
        got = (
            _OPS[name](mine) if mine is not _NO_PLAIN else self._judge.ask("op", name, self._n, [])
        )
        if not isinstance(got, kind):
            raise TypeError(f"{name}() of the answer's object gave a {type(got).__name__}")
        return got

    def __bool__(self):
        return self._unary("bool", bool)

    def __len__(self):
        return self._unary("len", int)

    def __iter__(self):
        mine = self._judge.plain(self)
        if mine is not _NO_PLAIN:
            return iter(mine)
        return self._judge.ask("op", "iter", self._n, [])  # lazily: it may never end

    def __next__(self):
        return self._judge.ask("op", "next", self._n, [])

    def __hash__(self):
        return self._unary("hash", int)

    def __repr__(self):
        return self._unary("repr", str)

    def __str__(self):
        return self._unary("str", str)

    def __int__(self):
        return self._unary("int", int)

    def __float__(self):
        return self._unary("float", float)

    def __index__(self):
        return self._unary("index", int)

    def __neg__(self):
        return self._unary("neg", object)

    def __abs__(self):
        return self._unary("abs", object)

    def __contains__(self, item):
        mine = self._judge.plain(self)
        if mine is not _NO_PLAIN:
            return item in mine
        return self._judge.ask("op", "contains", self._n, _out([item])) is True


def _binary(name, reflected):
    def method(self, other):
        if isinstance(other, Remote):
            a, b = (other, self) if reflected else (self, other)
            return self._judge.ask("op", name, a._n, _out([b]))
        mine = self._judge.plain(self)
        if mine is _NO_PLAIN:
            return NotImplemented
        return _OPS[name](other, mine) if reflected else _OPS[name](mine, other)

    return method


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _binary(_name, False))
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(Remote, f"__{_name}__", _binary(_name, False))
    setattr(Remote, f"__r{_name}__", _binary(_name, True))
