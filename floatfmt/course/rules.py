"""Stated rules of an exercise, checked on the answer's code (``Exercise.rule``).

A rule is a function from Python source text to a list of violations (empty when
the rule holds).  ``check`` applies it to an answer function's source when it can
read it; the grader applies it to the submitted answer cell and to the answer
function's source, outside the student's kernel.
"""

from __future__ import annotations

import ast

__all__ = ["integer_only"]

# Names whose use means float arithmetic or a ready-made conversion: float types, the
# float conversions of numpy / math, and the libraries that would do the rounding.
_FLOAT_NAMES = frozenset({
    "float", "float16", "float32", "float64", "float128", "half", "single", "double", "longdouble",
    "bfloat16", "float8_e4m3fn", "float8_e5m2", "floating", "float_", "frexp", "ldexp", "modf",
    "rint", "round", "around", "floor", "ceil", "trunc", "fix", "log2", "exp2", "sqrt", "divide",
    "true_divide", "cast", "encode", "quantize", "fake_quant", "struct", "ctypes",
})
_FLOAT_BUILTINS = frozenset({"float", "round", "complex"})
_FLOAT_MODULES = frozenset({"floatfmt", "ml_dtypes", "torch", "jax", "tensorflow", "struct", "ctypes", "math",
                            "decimal", "fractions"})
_FLOAT_DTYPE_TEXT = ("float", "f2", "f4", "f8", "e", "<f", ">f", "bfloat")


def integer_only(source: str) -> list[str]:
    """Violations of "integer operations only" in ``source``: float literals, true
    division ``/``, names of float types or float functions (``float``, ``np.float32``,
    ``np.frexp``, ``round``, ``ff.cast``...: a bare name counts when it is read and is
    ``float``, ``round`` or a module below, an attribute counts by its name), imports of libraries that convert to
    floats (floatfmt, ml_dtypes, torch, math, struct...), and float dtype strings
    (``"float32"``, ``"f4"``).  Integer literals, shifts, masks, ``+ - * // %``,
    comparisons and ``np.where`` / ``np.uint32``-style integer types are allowed.

    >>> integer_only("def f(b):\\n    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16")
    []
    >>> integer_only("import floatfmt as ff\\nanswer = lambda b: ff.encode(b.view('f4'), 'bf16')")
    ["imports 'floatfmt'", "uses 'encode'", "uses the float dtype 'f4'"]
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return [f"the code does not parse ({err.msg}, line {err.lineno})"]
    out: list[str] = []

    def add(msg):
        if msg not in out:
            out.append(msg)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in _FLOAT_MODULES:
                    add(f"imports {a.name.split('.')[0]!r}")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in _FLOAT_MODULES:
                add(f"imports {(node.module or '').split('.')[0]!r}")
            for a in node.names:
                if a.name in _FLOAT_NAMES:
                    add(f"uses {a.name!r}")
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, (float, complex)):
                add(f"uses the float literal {node.value!r}")
            elif isinstance(node.value, str) and node.value.lower().startswith(_FLOAT_DTYPE_TEXT) \
                    and len(node.value) <= 10 and node.value.strip("<>=|").lower() in {
                        "float", "float16", "float32", "float64", "f2", "f4", "f8", "e", "bfloat16", "half",
                        "single", "double"}:
                add(f"uses the float dtype {node.value!r}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            add("uses true division '/' (a float result; use '//')")
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div):
            add("uses true division '/=' (a float result; use '//=')")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                node.id in (_FLOAT_BUILTINS | _FLOAT_MODULES):
            add(f"uses {node.id!r}")
        elif isinstance(node, ast.Attribute) and node.attr in _FLOAT_NAMES:
            add(f"uses {node.attr!r}")
    return out
