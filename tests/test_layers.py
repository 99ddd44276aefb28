"""The layer contract of DESIGN.md, checked on the source: imports only point down.

Every module of the package belongs to one layer: its folder (LAYER_FOLDERS below, lowest
first; a module at the package root is listed in ROOT). A module may import
modules of its own layer or of a lower one, never of a higher one; the import graph
between modules has no cycle (imports inside functions included: a lazy upward import is
still an upward dependency); and no module imports another module's private name (one
that starts with an underscore): what two modules share is a documented internal API.

A new module goes in the folder of its layer; a new folder or root module must be added
here, so the test fails until someone decides where it belongs.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "floatfmt"

# The layers, lowest first: a module's layer is its folder (sub-folders belong to the
# folder above them: ``arith/matrixunit/`` is ``arith``); folders on one line are one layer.
# CONTRIBUTING.md's module map says what goes in each.
LAYER_FOLDERS = [
    ("backend",),           # the array namespace and tensor dispatch (names torch, lazily)
    ("core",),              # formats, the rounding routine, exact intake, cast, info, codec, packing, flags, threads
    ("arith",),             # error-free transformations, ops, FPArray, accumulation, matrixunit/
    ("scaling",),           # quantize, QuantizedTensor, scales, tiles, MX / NVFP4, P3109 blocks, int GEMM
    ("training",),          # loss and delayed scaling, GEMM recipes, MX training GEMMs, the loop
    ("torch",),             # the optional torch layer (imports torch)
    ("gpu", "cpu"),         # capture and comparison with real hardware (GPUs, CPU matrix units)
    ("teach", "course"),    # explain/, compare, plot, tour, explorer, demos; the graded course
]
FOLDERS = [f for layer in LAYER_FOLDERS for f in layer]
LAYER_OF_FOLDER = {f: layer[0] for layer in LAYER_FOLDERS for f in layer}
# Modules at the package root (at most 12): the version sits below everything; the
# public face (``__init__``), the command line and the shims of documented paths above.
ROOT = {"_version": "base", "__init__": "api", "cli": "api", "plot": "api", "threads": "api"}
LAYERS = ["base", *(layer[0] for layer in LAYER_FOLDERS), "api"]
MAX_ROOT_MODULES = 12


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> str | None:
    """The layer of a module: its top folder under floatfmt/, or ROOT's entry for a
    module at the package root."""
    parts = module.split(".")
    if len(parts) == 1:
        return "api"  # the package itself
    if MODULES[module].parent == PACKAGE:
        return ROOT.get(parts[1])
    return LAYER_OF_FOLDER.get(parts[1])


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
    """Every folder of the package is a layer of FOLDERS, every root module is in ROOT."""
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert sorted(FOLDERS) == folders, f"FOLDERS of tests/test_layers.py vs the package's folders: {folders}"
    missing = [m for m in MODULES if m != "floatfmt" and _layer(m) is None]
    assert not missing, (f"put these modules in a layer folder (or, for a root module, in ROOT of "
                         f"tests/test_layers.py): {missing}")


def test_the_root_stays_small():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules at the package root: {root}"


def test_layer_of_reads_the_folder():
    assert _layer("floatfmt.core.rounding") == "core"
    assert _layer("floatfmt.arith.matrixunit.tensorcore") == "arith"
    assert _layer("floatfmt._version") == "base" and _layer("floatfmt.cli") == "api"
    assert _layer("floatfmt.course.registry") == _layer("floatfmt.teach.plot") == "teach"
    assert LAYERS.index("core") < LAYERS.index("arith") < LAYERS.index("teach")


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
# appears (the teaching module ``explain`` once hid ``ff.explain``; the explanations now
# live in ``teach/explain/``, below the package root, where no public name can hide them).
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
