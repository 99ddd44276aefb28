"""The layer contract of DESIGN.md, checked on the source: imports only point down.

Every module of the package belongs to one layer (the table below). A module may import
modules of its own layer or of a lower one, never of a higher one; the import graph
between modules has no cycle (imports inside functions included: a lazy upward import is
still an upward dependency); and no module imports another module's private name (one
that starts with an underscore): what two modules share is a documented internal API.

A new module must be given a layer here, so the test fails until someone decides where
it belongs.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "floatfmt"

# Lowest first. ``floatfmt`` itself (``__init__``) is the public face and sits above all.
LAYERS = ["core", "arithmetic", "lab", "torch", "gpu", "teach"]

LAYER_OF_PREFIX = {
    # core: formats, the one rounding routine, exact intake, codec, cast, info
    "floatfmt._version": "core",
    "floatfmt.core.types": "core",
    "floatfmt.core.names": "core",
    "floatfmt.core.formats": "core",
    "floatfmt.core.rounding": "core",
    "floatfmt.core.round_f32": "core",
    "floatfmt.core.intake": "core",
    "floatfmt.core.codec": "core",
    "floatfmt.core.cast": "core",
    "floatfmt.core.info": "core",
    "floatfmt.core.block_formats": "core",
    "floatfmt.core.packing": "core",
    "floatfmt.core.flags": "core",
    "floatfmt.core.threads": "core",
    # arithmetic: error-free transformations, ops, arrays, accumulation, matrix units
    "floatfmt.arith.eft": "arithmetic",
    "floatfmt.arith.ops": "arithmetic",
    "floatfmt.arith.ops_device": "arithmetic",
    "floatfmt.arith.fparray": "arithmetic",
    "floatfmt.arith.accumulate": "arithmetic",
    "floatfmt.arith.matrixunit.tensorcore": "arithmetic",
    "floatfmt.arith.matrixunit.fdpa": "arithmetic",
    "floatfmt.arith.matrixunit.tensorcore_device": "arithmetic",
    "floatfmt.arith.matrixunit.fdpa_device": "arithmetic",
    "floatfmt.arith.accumulate_device": "arithmetic",
    "floatfmt.arith.eft_device": "arithmetic",
    # lab: quantisation, block scaling, loss scaling, training
    "floatfmt.scaling.quotients": "lab",
    "floatfmt.scaling.quantized_tensor": "lab",
    "floatfmt.scaling.scales": "lab",
    "floatfmt.scaling.tiles": "lab",
    "floatfmt.scaling.mx_nvfp4": "lab",
    "floatfmt.scaling.quantize": "lab",
    "floatfmt.scaling.quantized_tensor_device": "lab",
    "floatfmt.scaling.quantize_device": "lab",
    "floatfmt.scaling.int_gemm": "lab",
    "floatfmt.training.delayed_scaling": "lab",
    "floatfmt.training.loss_scaling": "lab",
    "floatfmt.training.mx_gemms": "lab",
    "floatfmt.training.loop": "lab",
    "floatfmt.training.recipes": "lab",
    "floatfmt.scaling.p3109_blocks": "lab",
    # torch: the optional array backend for tensors
    "floatfmt.torch": "torch",
    "floatfmt.backend.namespace": "core",
    "floatfmt.backend.dispatch": "core",
    # gpu: capture and comparison with real hardware
    "floatfmt.gpu": "gpu",
    # teach: explanations, figures, the tour, the course, the command line, the explorer
    "floatfmt.teach.numtext": "teach",
    "floatfmt.teach.explain.value": "teach",
    "floatfmt.teach.explain.html": "teach",
    "floatfmt.teach.explain.array": "teach",
    "floatfmt.teach.explain.block": "teach",
    "floatfmt.teach.explain.entry": "teach",
    "floatfmt.teach.compare": "teach",
    "floatfmt.teach.explorer_widget": "teach",
    "floatfmt.teach.plot": "teach",
    "floatfmt.teach.tour": "teach",
    "floatfmt.course": "teach",
    "floatfmt.cli": "teach",
    "floatfmt.teach.explorer": "teach",
    "floatfmt.teach.quantization_demo": "teach",
}


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> str | None:
    """The layer of a module: the longest matching prefix in the table."""
    best = None
    for prefix, layer in LAYER_OF_PREFIX.items():
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return None if best is None else best[1]


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".")
    if not MODULES[module].name == "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import of the package."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "floatfmt":
                    found.append((alias.name, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            if target.split(".")[0] != "floatfmt":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:  # ``from . import eft`` imports a module
                    found.append((sub, None, node.lineno))
                else:
                    found.append((target, alias.name, node.lineno))
    return found


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if m != "floatfmt" and _layer(m) is None]
    assert not missing, f"give these modules a layer in tests/test_layers.py: {missing}"


def test_imports_point_down():
    bad = []
    for module in MODULES:
        if module == "floatfmt":
            continue
        mine = LAYERS.index(_layer(module))
        for target, _name, line in _imports(module):
            if target == "floatfmt":
                bad.append(f"{module}:{line} imports the package root (the public API layer)")
                continue
            theirs = _layer(target)
            if theirs is not None and LAYERS.index(theirs) > mine:
                bad.append(f"{module}:{line} ({_layer(module)}) imports {target} ({theirs})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_private_names_across_modules():
    bad = []
    for module in MODULES:
        for target, name, line in _imports(module):
            if (target != module and name is not None and name.startswith("_")
                    and not (name.startswith("__") and name.endswith("__"))):
                bad.append(f"{module}:{line} imports {target}.{name}")
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph = {m: sorted({t for t, _n, _l in _imports(m) if t in MODULES and t != m})
             for m in MODULES if m != "floatfmt"}
    graph = {m: [t for t in ts if t != "floatfmt"] for m, ts in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in graph.get(m, []):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# Modules that still share a public function's name: none. The test fails when a clash
# appears (the teaching module ``explain`` once hid ``ff.explain``; it is now split into
# ``explanation``, ``explaining``, ``block_explanation``, ``comparison`` ...).
KNOWN_CLASHES: set[str] = set()


def test_no_module_is_hidden_by_a_public_function():
    """``import floatfmt.X as m`` must give a module: no module shares a public function's name."""
    import types

    import floatfmt

    clashes = {name for name in dir(floatfmt)
               if f"floatfmt.{name}" in MODULES
               and not isinstance(getattr(floatfmt, name), types.ModuleType)}
    assert clashes == KNOWN_CLASHES, f"modules hidden by a same-named public object: {clashes}"


# ---------------------------------------------------------------------------- sizes
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
SIZE_REASON = "# size:"


def _module_reason(lines: list[str], tree: ast.Module) -> bool:
    """A ``# size: <reason>`` line at the module's top: before its first statement other
    than the docstring (so, above the imports)."""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    first = body[0].lineno if body else len(lines) + 1
    return any(line.strip().startswith(SIZE_REASON) for line in lines[:first - 1])


def _function_reason(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A ``# size: <reason>`` line just above the function (its decorators included) or in
    its head: the signature, the docstring, and the first line of code."""
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    body = node.body
    has_doc = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
    code = body[1] if has_doc and len(body) > 1 else body[0]
    head = lines[max(0, start - 4):code.lineno]
    return any(line.strip().startswith(SIZE_REASON) for line in head)


def size_offenders() -> list[str]:
    """Modules over MAX_MODULE_LINES lines and functions over MAX_FUNCTION_LINES lines
    (decorators to last line) that do not say why."""
    out = []
    for module, path in MODULES.items():
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text, filename=str(path))
        if len(lines) > MAX_MODULE_LINES and not _module_reason(lines, tree):
            out.append(f"{module}: {len(lines)} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                n = (node.end_lineno or node.lineno) - start + 1
                if n > MAX_FUNCTION_LINES and not _function_reason(lines, node):
                    out.append(f"{module}.{node.name} (line {node.lineno}): {n} lines")
    return out


def test_sizes():
    """No module over ~600 lines and no function over ~80 without a written reason: a line
    ``# size: <reason>`` at the module's top (after the docstring, above the imports), or
    just above the function or in its head (signature, docstring, first line of code)."""
    bad = size_offenders()
    assert not bad, ("split these, or say why they are one piece with a '# size: <reason>' line:\n"
                     + "\n".join(bad))


def test_size_reasons_are_found():
    """The reason lines test_sizes accepts: in a module's header, above a function, in its head."""
    src = '"""Doc."""\n# size: one table\nimport x\n\n\n# size: one loop\ndef f():\n    """Doc."""\n    return 1\n\n\n' \
          'def g():\n    """Doc."""\n    # size: a state machine\n    return 2\n\n\ndef h():\n    return 3\n'
    lines, tree = src.splitlines(), ast.parse(src)
    assert _module_reason(lines, tree)
    f, g, h = (n for n in tree.body if isinstance(n, ast.FunctionDef))
    assert _function_reason(lines, f) and _function_reason(lines, g) and not _function_reason(lines, h)
    assert not _module_reason(lines[2:], ast.parse("\n".join(lines[2:])))
