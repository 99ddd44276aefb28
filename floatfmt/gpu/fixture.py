"""Reading and writing GPU fixtures (see ``tests/data/gpu/README.md`` for the layout).

A fixture is a folder holding ``summary.json`` (device, versions, settings, one
record per check), a few compressed ``.npz`` files with the arrays the checks
name, and optionally ``README.md`` and ``expected_differences.txt``.

An array is named ``"file.npz:key"`` in a check's ``arrays`` map.  One-dimensional
integer arrays are stored delta-encoded (sorted code lists shrink from hundreds
of kilobytes to a few); the summary's ``arrays`` manifest records dtype, shape
and encoding, so readers get the original array back exactly.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "FixtureWriter", "Fixture", "Expected",
           "read_expected", "array_key", "find_fixtures", "default_root"]

FORMAT_NAME = "floatfmt-gpu-fixture"
FORMAT_VERSION = 1
SUMMARY = "summary.json"
EXPECTED = "expected_differences.txt"


def array_key(*parts: str) -> str:
    """An npz key made of the parts (letters, digits and ``_`` only).

    >>> array_key("cast.fp32-fp16.cuda", "out")
    'cast_fp32_fp16_cuda__out'
    """
    return "__".join(re.sub(r"[^A-Za-z0-9]+", "_", p).strip("_") for p in parts)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if np.isfinite(v) else repr(v)  # JSON has no inf / nan
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    return obj


class FixtureWriter:
    """Collects arrays and check records and writes them, again after every section,
    so that a capture that dies half-way still leaves what it had.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> w = FixtureWriter(d, {"evidence": "cpu"})
    >>> ref = w.put("casts.npz", "codes", np.arange(5, dtype=np.uint16))
    >>> _ = w.add_check({"name": "demo", "kind": "cast", "arrays": {"inputs": ref}})
    >>> w.save()
    >>> Fixture(d).array(ref).tolist()
    [0, 1, 2, 3, 4]
    """

    def __init__(self, path, header: dict | None = None):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.summary = {"format": FORMAT_NAME, "version": FORMAT_VERSION, **(header or {}),
                        "sections": {}, "checks": [], "arrays": {}}
        self._files: dict[str, dict[str, np.ndarray]] = {}
        self._dirty: set[str] = set()

    def put(self, file: str, key: str, arr) -> str:
        """Store an array; returns its reference ``"file:key"``."""
        arr = np.asarray(arr)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"fixture arrays hold numbers, not {arr.dtype}")
        ref = f"{file}:{key}"
        enc = "raw"
        stored = arr
        if arr.ndim == 1 and arr.dtype.kind in "iu" and arr.size > 64:
            enc = "delta"
            stored = np.diff(arr.astype(np.int64), prepend=np.int64(0))
        self._files.setdefault(file, {})[key] = stored
        self.summary["arrays"][ref] = {"dtype": arr.dtype.name, "shape": list(arr.shape),
                                       "encoding": enc}
        self._dirty.add(file)
        return ref

    def add_check(self, record: dict) -> dict:
        """Append a check record (``name``, ``section``, ``kind``, ``params``, ``arrays``,
        counts ...); returns it so the caller can keep filling it in."""
        if "name" not in record or "kind" not in record:
            raise ValueError("a check record needs 'name' and 'kind'")
        if any(c["name"] == record["name"] for c in self.summary["checks"]):
            raise ValueError(f"duplicate check name {record['name']!r}")
        self.summary["checks"].append(record)
        return record

    def get(self, ref: str) -> np.ndarray:
        """An array stored earlier under ``ref`` (``"file:key"``), decoded as a reader
        of the saved fixture would get it."""
        file, key = ref.split(":", 1)
        stored = self._files[file][key]
        meta = self.summary["arrays"][ref]
        if meta["encoding"] == "delta":
            stored = np.cumsum(stored)
        return stored.astype(meta["dtype"])

    def section(self, name: str, **info):
        """Record a section's status (``ok``, ``error``, ``skipped``) and timing."""
        self.summary["sections"].setdefault(name, {}).update(info)

    def save(self):
        """Write changed npz files and the summary (each atomically: temp file, rename)."""
        for file in sorted(self._dirty):
            tmp = self.path / f".{file}.tmp.npz"
            np.savez_compressed(tmp, **self._files[file])
            os.replace(tmp, self.path / file)
        self._dirty.clear()
        tmp = self.path / f".{SUMMARY}.tmp"
        tmp.write_text(json.dumps(_jsonable(self.summary), indent=1, sort_keys=False) + "\n")
        os.replace(tmp, self.path / SUMMARY)


@dataclass
class Expected:
    """One line of ``expected_differences.txt``: mismatches of ``check`` (a name or
    a glob) matching ``selector`` (``*`` or a comma-separated list of keys) are
    known, for ``reason``."""

    check: str
    selector: str
    reason: str
    line: int = 0

    def covers(self, check: str, key: str) -> bool:
        if not fnmatch.fnmatchcase(check, self.check):
            return False
        if self.selector == "*":
            return True
        return key.lower() in {s.strip().lower() for s in self.selector.split(",")}


def read_expected(path) -> list[Expected]:
    """Parse an ``expected_differences.txt``: one ``CHECK SELECTOR REASON`` per line,
    ``#`` starts a comment line.  A line without a reason is an error: a known
    difference must say why it is known.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "e.txt")
    >>> _ = open(p, "w").write("# demo\\ncast.* 0x7f800001,0x7fc00000  NaN payloads differ\\n")
    >>> e = read_expected(p)[0]
    >>> e.covers("cast.fp32-fp16.cpu", "0x7FC00000"), e.reason
    (True, 'NaN payloads differ')
    """
    out: list[Expected] = []
    p = Path(path)
    if not p.exists():
        return out
    for n, raw in enumerate(p.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[2].strip():
            raise ValueError(f"{p}:{n}: expected 'CHECK SELECTOR REASON' with a reason, got {raw!r}")
        out.append(Expected(parts[0], parts[1], parts[2].strip(), n))
    return out


class Fixture:
    """A fixture folder opened for reading."""

    def __init__(self, path):
        self.path = Path(path)
        f = self.path / SUMMARY
        if not f.exists():
            raise FileNotFoundError(f"{self.path} is not a GPU fixture: no {SUMMARY}")
        self.summary = json.loads(f.read_text())
        if self.summary.get("format") != FORMAT_NAME:
            raise ValueError(f"{f}: not a {FORMAT_NAME} summary")
        if self.summary.get("version", 0) > FORMAT_VERSION:
            raise ValueError(f"{f}: fixture version {self.summary['version']} is newer than this "
                             f"floatfmt reads ({FORMAT_VERSION})")
        self._npz: dict[str, dict] = {}
        self.expected = read_expected(self.path / EXPECTED)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def checks(self) -> list[dict]:
        return self.summary.get("checks", [])

    def array(self, ref: str) -> np.ndarray:
        """The array named ``"file.npz:key"``, decoded."""
        file, key = ref.split(":", 1)
        if file not in self._npz:
            with np.load(self.path / file) as z:
                self._npz[file] = {k: z[k] for k in z.files}
        stored = self._npz[file][key]
        meta = self.summary.get("arrays", {}).get(ref, {})
        if meta.get("encoding") == "delta":
            stored = np.cumsum(stored, dtype=np.int64)
        dtype = meta.get("dtype")
        return stored.astype(dtype, copy=False) if dtype else stored

    def expected_for(self, check: str, key: str) -> Expected | None:
        for e in self.expected:
            if e.covers(check, key):
                return e
        return None


def default_root() -> Path:
    """``tests/data/gpu`` of the source tree this package was imported from."""
    return Path(__file__).resolve().parents[2] / "tests" / "data" / "gpu"


def find_fixtures(root=None) -> list[Path]:
    """Fixture folders (those holding a summary.json) under ``root``, or ``root`` itself
    when it is one; sorted by name."""
    root = Path(root) if root is not None else default_root()
    if (root / SUMMARY).exists():
        return [root]
    if not root.is_dir():
        return []
    return sorted(p.parent for p in root.glob(f"*/{SUMMARY}"))
