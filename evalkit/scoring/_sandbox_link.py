"""The judge–solver link of the sandbox (runs INSIDE it; never imported by evalkit).

One JSON message a line. The judge sends ``["load", code]``, then ``["call", h, args,
kwargs]``, ``["attr", h, name]``, ``["op", name, h, args]`` and ``["plain", h]``; the
solver answers ``["ok", value, mutated]`` or ``["err", type name, message]``; while a
request is open it may ask ``["back", k, args, kwargs]`` (call the judge's k-th function,
one the tests passed in) and the judge answers ``["ok", value]`` or ``["err", ...]``.
Values are plain data — None, bool, int, float, str, list, and tagged ``{"t": tuple}``,
``{"s": set}``, ``{"f": frozenset}``, ``{"d": [[k, v], ...]}``, ``{"b": hex bytes}``,
``{"a": hex bytearray}``, ``{"c": [re, im]}`` — or handles: ``{"h": n}``, the solver's
n-th object (a ``Remote`` to the judge), ``{"j": k}``, the judge's k-th function. The
solver is the untrusted side: whatever it sends decodes into built-in values or handles,
never into code or trusted state.
"""

import builtins
import contextlib
import json
import operator
import sys

MAX_LINE = 1 << 24
_DEPTH = 200
OPS = {
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
    """``x`` as JSON-ready plain data; ``handle(x)`` tags what is not (``{"h": n}``)."""
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
    return handle(x)


def decode(x, handle, depth=0):
    """Plain data back into built-in values; ``handle(tag, n)`` resolves handles."""
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
    if tag in ("h", "j"):
        return handle(tag, int(v))
    raise ValueError(f"unknown value tag {tag!r} from the other side of the sandbox")


def describe(exc):
    """One short line naming an exception (for the verdict's ``error``)."""
    return f"{type(exc).__name__}: {exc}"[:500]


class SolverGone(RuntimeError):
    """The solver process ended or broke the protocol."""


def _strict(x):
    raise NoPlainValue(type(x).__name__)


@contextlib.contextmanager
def _no_digit_limit():
    # The answer runs under the interpreter's int/str digit limit (whatever it set it to
    # itself); the link's JSON of its big integers does not, and leaves its setting as found.
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(limit)


def _loads(line):
    with _no_digit_limit():
        return json.loads(line)


def serve(requests, replies):
    """The solver's loop: load the answer's code, then answer calls until EOF."""
    solver = _Solver(requests, replies)
    for line in requests:
        solver.send(solver.answer(_loads(line)))


class _Solver:
    # The answer's namespace, the objects the judge holds handles to, and the pipes.
    def __init__(self, requests, replies):
        self.requests, self.replies = requests, replies
        self.objects = []
        self.namespace = {"__name__": "__main__"}

    def send(self, msg):
        with _no_digit_limit():
            line = json.dumps(msg).encode()
        self.replies.write(line + b"\n")
        self.replies.flush()

    def handle(self, x):
        if isinstance(x, _Callback):
            return {"j": x.k}
        self.objects.append(x)
        return {"h": len(self.objects) - 1}

    def resolve(self, tag, n):
        return self.objects[n] if tag == "h" else _Callback(self, n)

    def answer(self, req):
        try:
            if req[0] == "load":
                exec(compile(req[1], "<solution>", "exec"), self.namespace)
                value, mutated = _names(self.namespace), []
            else:
                value, mutated = self._answer(req)
            tag = _strict if req[0] == "plain" else self.handle
            return ["ok", encode(value, tag), [[i, encode(a, self.handle)] for i, a in mutated]]
        except BaseException as exc:  # SystemExit too: the answer may not end the run
            return ["err", type(exc).__name__, str(exc)[:500]]

    def _answer(self, req):
        if req[0] in ("call", "op"):
            args = [decode(a, self.resolve) for a in req[3 if req[0] == "op" else 2]]
        if req[0] == "call":
            value = self.objects[req[1]](*args, **decode(req[3], self.resolve))
            return value, [(i, a) for i, a in enumerate(args) if isinstance(a, _MUTABLE)]
        if req[0] == "attr":
            return getattr(self.objects[req[1]], str(req[2])), []
        if req[0] == "op":
            return OPS[req[1]](self.objects[req[2]], *args), []
        if req[0] == "plain":
            return self.objects[req[1]], []
        raise ValueError(f"unknown request {req[0]!r}")


class _Callback:
    # A function of the tests', passed to the answer: calling it asks the judge to run it,
    # answering the judge's own requests (calls back into the answer) meanwhile.
    def __init__(self, solver, k):
        self.solver, self.k = solver, k

    def __call__(self, *args, **kwargs):
        s = self.solver
        s.send(["back", self.k, encode(list(args), s.handle), encode(kwargs, s.handle)])
        for line in s.requests:
            msg = _loads(line)
            if msg[0] == "ok":
                return decode(msg[1], s.resolve)
            if msg[0] == "err":
                raise exception(msg[1], msg[2])
            s.send(s.answer(msg))
        raise EOFError("the judge closed the sandbox link")


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


def exception(name, message):
    """The exception the other side raised, as a built-in type where it is one."""
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        with contextlib.suppress(Exception):  # constructors with other signatures
            return cls(message)
    return RuntimeError(message)
