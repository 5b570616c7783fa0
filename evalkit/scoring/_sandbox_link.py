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
        return OPS[req[1]](obj(req[2]), *[decode(a, obj) for a in req[3]]), []
    if req[0] == "plain":
        return obj(req[1]), []
    raise ValueError(f"unknown request {req[0]!r}")


def exception(name, message):
    """The exception the other side raised, as a built-in type where it is one."""
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        with contextlib.suppress(Exception):  # constructors with other signatures
            return cls(message)
    return RuntimeError(message)
