"""The judge's side of the sandbox link (runs INSIDE it; never imported by evalkit).

``Judge`` loads the answer's code into the solver process and calls into it for the
tests; ``Remote`` is how a solver object looks to the tests. Whatever the solver sends
decodes into built-in values or ``Remote`` handles (``_sandbox_link``), never into code
or the judge's own state, so the answer decides what its functions return but not
whether a test passed.
"""

import builtins
import contextlib
import json

import _sandbox_link as link
from _sandbox_link import MAX_LINE, OPS, SolverGone, decode, encode

_NO_PLAIN = object()


class Judge:
    """The judge's end of the link: loads the answer's code, then calls into it."""

    def __init__(self, requests, replies):
        self._out, self._in = requests, replies
        self._gone = ""
        self._functions = []  # the tests' functions passed to the answer, by number

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
            raise link.exception(*value)
        return value

    def call(self, fn, args, kwargs):
        """``fn(*args, **kwargs)`` in the solver; mutated list/dict/set arguments follow."""
        req = ["call", fn._n, self.out(list(args)), self.out(dict(kwargs))]
        tag, value, mutated = self._exchange(req)
        if tag == "err":
            raise link.exception(*value)
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
            raise link.exception(*value)
        return value

    def out(self, x):
        """``x`` encoded for the solver: plain data, its own objects, the tests' functions."""

        def handle(v):
            if isinstance(v, Remote):
                return {"h": v._n}
            if callable(v):
                self._functions.append(v)
                return {"j": len(self._functions) - 1}
            raise TypeError(f"a {type(v).__name__} cannot be passed to the answer's code")

        return encode(x, handle)

    def _exchange(self, req):
        if self._gone:
            raise SolverGone(self._gone)
        self._send(req)
        while not self._gone:
            try:
                line = self._in.readline(MAX_LINE)
            except (OSError, ValueError):
                line = b""
            try:
                msg = json.loads(line) if line.endswith(b"\n") else None
                if msg and msg[0] == "back":  # the answer calls a function of the tests'
                    self._send(self._run_function(msg))
                    continue
                if msg and msg[0] == "err":
                    return "err", (str(msg[1]), str(msg[2])), None
                if msg and msg[0] == "ok":
                    value = decode(msg[1], self._resolve)
                    mutated = [(int(i), decode(v, self._resolve)) for i, v in msg[2]]
                    return "ok", value, mutated
            except (ValueError, TypeError, IndexError, KeyError, RecursionError):
                pass
            self._gone = "the answer's process ended or broke the sandbox protocol"
        raise SolverGone(self._gone)

    def _send(self, msg):
        try:
            self._out.write(json.dumps(msg).encode() + b"\n")
            self._out.flush()
        except (OSError, ValueError):
            self._gone = "the answer's process ended"

    def _run_function(self, msg):
        try:
            fn = self._functions[int(msg[1])]
            value = fn(*decode(msg[2], self._resolve), **decode(msg[3], self._resolve))
            return ["ok", self.out(value)]
        except BaseException as exc:  # sent back: the answer's call raises it
            return ["err", type(exc).__name__, str(exc)[:500]]

    def _resolve(self, tag, n):
        # A handle from the solver: one of its objects, or one of the tests' functions.
        return Remote(self, n) if tag == "h" else self._functions[n]


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
        return self._judge.ask("op", "getitem", self._n, self._judge.out([key]))

    def __setitem__(self, key, value):
        self._judge.ask("op", "setitem", self._n, self._judge.out([key, value]))

    def __delitem__(self, key):
        self._judge.ask("op", "delitem", self._n, self._judge.out([key]))

    def _unary(self, name, kind):
        mine = self._judge.plain(self)
        got = OPS[name](mine) if mine is not _NO_PLAIN else self._judge.ask("op", name, self._n, [])
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
        return self._judge.ask("op", "contains", self._n, self._judge.out([item])) is True


def _binary(name, reflected):
    def method(self, other):
        if isinstance(other, Remote):
            a, b = (other, self) if reflected else (self, other)
            return self._judge.ask("op", name, a._n, self._judge.out([b]))
        mine = self._judge.plain(self)
        if mine is _NO_PLAIN:
            return NotImplemented
        return OPS[name](other, mine) if reflected else OPS[name](mine, other)

    return method


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _binary(_name, False))
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(Remote, f"__{_name}__", _binary(_name, False))
    setattr(Remote, f"__r{_name}__", _binary(_name, True))
