"""The explanation of one block of a block-scaled tensor (OCP MX or NVFP4).

``BlockExplanation`` shows the shared scale (the E8M0 code and the exponent it
encodes; for NVFP4 the E4M3 block scale and the fp32 tensor scale), how the
scale was chosen from the block's amax, and one row per element: x, x / scale,
the element's code by field, the element, the dequantised value and the error.
Each element's rounding is an ``Explanation`` (``b[i]``), so its wording comes
from the rounding routine's decision like any other value's.

    >>> import floatfmt as ff
    >>> x = [7.0, 0.2, -2.6] + [0.0] * 29
    >>> b = explain_block(ff.quantize(x, "mxfp4_e2m1"), x=x)
    >>> hex(b.scale_code), b.shared_exponent, b.elements[:3]
    ('0x7f', 0, [6.0, 0.0, -3.0])
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...core.cast import cast
from ...core.codec import values_to_codes
from ...core.intake import floor_log2
from ...core.block_formats import get_block_format
from ...core.formats import hex_code
from .value import Explanation, exact_or_special
from .html import block_html
from ..numtext import binary_sci, field_bits, num_text, sci_text, signed_sci_text, use_colour

__all__ = ["BlockExplanation", "explain_block"]


class BlockExplanation:
    """One block of a block-scaled ``QuantizedTensor`` (OCP MX or NVFP4): the
    shared scale, how it was chosen, and every element's code.  See
    ``explain_block``.

    Attributes: ``fmt`` (``"mxfp4_e2m1"`` ...), ``element_format``, ``block``,
    ``n_blocks``, ``size`` (elements in this block), ``positions`` (their indices
    along the blocked axis), ``scale`` (block scale value), ``scale_code``,
    ``scale_format`` (E8M0 or E4M3), ``tensor_scale`` (NVFP4's fp32 scale, else
    None), ``shared_exponent`` (MX; None for a NaN scale), ``emax``, ``amax``
    (Fraction, None without the originals), ``amax_exponent`` (floor(log2 amax)),
    ``rule`` (a sentence), ``elements`` (element values), ``codes``,
    ``dequantized``, ``originals`` / ``quotients`` / ``errors`` (None entries
    without the originals), ``saturated`` / ``flushed`` (lists of bools),
    ``explanations`` (one ``Explanation`` of each element's rounding; also
    ``b[i]``).
    """

    COLUMNS = ("#", "x", "x / scale", "code", "bits", "element", "dequantised", "error", "note")

    def __init__(self, q, block=0, x=None, rounding="nearest_even"):
        from ...scaling.quantized_tensor import split_blocks

        if q.granularity != "block":
            raise ValueError(f"explain_block needs a block-scaled QuantizedTensor (MX or nvfp4), "
                             f"not {q.fmt} per {q.granularity}")
        bs, axis = q.block_size, q.axis
        rows, (lead, n, nb) = split_blocks(q.elements, axis, bs)
        if isinstance(block, bool) or not isinstance(block, (int, np.integer)):
            raise TypeError(f"block must be an integer, not {type(block).__name__}")
        if not -rows.shape[0] <= block < rows.shape[0]:
            raise IndexError(f"block {block} out of range: this tensor has {rows.shape[0]} blocks")
        block = int(block) % rows.shape[0]
        self.fmt, self.block, self.n_blocks, self.axis = q.fmt, block, rows.shape[0], axis
        self.block_size = bs
        j = block % nb
        self.size = min(bs, n - j * bs)
        self.positions = list(range(j * bs, j * bs + self.size))
        f = self.element_format = q.element_format
        record = get_block_format(q.fmt)  # the block registry's facts of this format
        self.mxint = q.fmt == "mxint8"
        unit = 1 << record.element_shift  # MXINT8 elements are int8 codes / 64
        per_block = lambda a: np.moveaxis(np.asarray(a), axis, -1).reshape(-1)[block]  # noqa: E731
        self.scale = float(per_block(np.asarray(q.scale, np.float64)))
        self.scale_code = int(per_block(q.scale_codes))
        self.tensor_scale = q.tensor_scale
        total = self.scale * (self.tensor_scale if self.tensor_scale is not None else 1.0)
        self.nvfp4 = q.fmt == "nvfp4"
        self.scale_format = record.scale_format
        self.emax = None if self.nvfp4 else record.emax_elem
        self.elem_max = Fraction(f.max) / unit
        self.elements = [float(v) for v in rows[block][:self.size]]
        self.dequantized = [v * total for v in self.elements]  # exact: element × 2^k or × e4m3 × fp32
        if math.isnan(total):
            self.dequantized = [math.nan] * self.size
        self.codes = [int(c) for c in np.asarray(values_to_codes(np.asarray(self.elements) * unit, f))]
        # the originals, exactly
        self.originals = [None] * self.size
        specials = [None] * self.size
        if x is not None:
            arr = np.asarray(x)
            if arr.shape != q.shape:
                raise ValueError(f"x has shape {arr.shape}, the QuantizedTensor {q.shape}")
            if arr.dtype.kind not in "fiub":
                arr = np.asarray(x, dtype=object)
            for i, xi in enumerate(split_blocks(arr, axis, bs)[0][block][:self.size]):
                self.originals[i], specials[i] = exact_or_special(xi)
        have = self.have_x = x is not None
        self._specials = specials
        self.quotients = [None if (X is None or not math.isfinite(total) or total == 0)
                          else X / Fraction(total) for X in self.originals]
        self.errors = [None if X is None or not math.isfinite(d) else float(Fraction(d) - X)
                       for X, d in zip(self.originals, self.dequantized)]
        self.saturated = [Q is not None and abs(Q) > self.elem_max for Q in self.quotients]
        self.flushed = [Q is not None and Q != 0 and v == 0 for Q, v in zip(self.quotients, self.elements)]
        self.explanations = [
            Explanation(v * unit if Q is None else Q * unit, f, rounding, "saturate", stored=v * unit)
            for Q, v in zip(self.quotients, self.elements)]
        # the scale and how it was chosen
        finite = [abs(X) for X in self.originals if X is not None]
        self.amax = max(finite) if have and len(finite) == self.size else None
        self.amax_exponent = floor_log2(self.amax) if self.amax else None
        self.shared_exponent = None
        self.scale_explanation = Explanation(self.scale, self.scale_format, stored=self.scale)
        if self.nvfp4:
            self.rule = self._nvfp4_rule(x)
        else:
            self.shared_exponent = None if self.scale_code == 0xFF else self.scale_code - 127
            self.rule = self._mx_rule(specials)

    def _mx_rule(self, specials) -> str:
        f, E = self.element_format, self.shared_exponent
        elem = f"{f.name}" + (" (MXINT8: int8 / 64)" if self.mxint else "")
        if E is None:
            why = ("the block holds Inf or NaN" if any(s is not None for s in specials) else
                   "the block holds Inf or NaN, or floor(log2 amax) - emax is past 127")
            return f"NaN scale (code 0xff): {why}; every element of the block decodes to NaN."
        if self.amax is None:
            return (f"Shared exponent E = floor(log2 amax) - emax, emax = {self.emax} for {elem} "
                    "(OCP MX floor rule); pass the original x to see amax.")
        if self.amax == 0:
            return "All-zero block: amax = 0, so the scale is the smallest, 2^-127 (code 0x00)."
        k = self.amax_exponent
        floor_e = k - self.emax
        text = (f"amax = {num_text(self.amax)} = {binary_sci(self.amax)} (largest |x| of the block): "
                f"floor(log2 amax) = {k}, the unbiased exponent field of amax; minus emax = "
                f"{self.emax} of {elem} gives {floor_e}")
        if floor_e < -127:
            text += ", clamped to E8M0's smallest exponent -127"
        clamped = max(floor_e, -127)
        if clamped != E:
            text += (f". This block's E = {E} differs: its scale was chosen by another rule "
                     "(scale_rounding 'ceil', 'even' or 'rceil')")
        else:
            text += f" = E, stored as E + 127 = {E + 127}"
        return text + "."

    def _nvfp4_rule(self, x) -> str:
        ts, bs = self.tensor_scale, self.scale
        text = (f"Block scale = round_e4m3(amax / (6 × tensor scale)), saturating; the tensor scale "
                f"{num_text(ts)} (fp32) is amax(tensor) / (6 × 448) rounded to fp32 unless given")
        if self.amax is not None:
            text = (f"amax = {num_text(self.amax)} (largest |x| of the block); amax / (6 × {num_text(ts)}) = "
                    f"{sci_text(float(self.amax / (6 * Fraction(ts))), 7)}, rounded to E4M3: {num_text(bs)}")
            if x is not None:
                tot = float(np.max(np.abs(np.asarray(x, np.float64)))) if np.size(x) else 0.0
                if tot > 0 and float(cast(tot / 2688.0, "fp32")) == ts:
                    text += (f". Tensor scale {num_text(ts)} = amax(tensor) {num_text(tot)} / (6 × 448) "
                             "rounded to fp32")
                else:
                    text += f". Tensor scale {num_text(ts)} (fp32, given)"
        return text + f"; each element is x / ({num_text(bs)} × {num_text(ts)}) rounded to fp4_e2m1."

    def __len__(self):
        return self.size

    def __getitem__(self, i) -> Explanation:
        return self.explanations[i]

    # -- renderings --------------------------------------------------------------------
    def title(self) -> str:
        """The block, its format and what its elements share, in one line."""
        f = self.element_format
        if self.nvfp4:
            what = (f"{self.block_size} {f.name} elements share one E4M3 block scale; one fp32 "
                    "tensor scale")
        else:
            what = f"{self.block_size} {f.name} elements share one E8M0 scale"
        part = f", {self.size} used" if self.size != self.block_size else ""
        return (f"{'NVFP4' if self.nvfp4 else 'MX'} block {self.block} of {self.n_blocks} along axis "
                f"{self.axis} ({self.fmt}: {what}{part})")

    def scale_lines(self, colour: bool = False) -> list[tuple[str, str]]:
        """[(label, text)] describing the scale; ``colour`` paints the bits."""
        e = self.scale_explanation
        code = f"0x{self.scale_code:02x} = " + (field_bits(e.fields(), colour) if e.code is not None
                                                 else format(self.scale_code, "08b"))
        if self.nvfp4:
            out = [("block scale", f"{code}  (E4M3) = {num_text(self.scale)}"),
                   ("tensor scale", f"{num_text(self.tensor_scale)} (fp32)"),
                   ("scale", f"{num_text(self.scale)} × {num_text(self.tensor_scale)} = "
                             f"{num_text(self.scale * self.tensor_scale)}")]
        elif self.shared_exponent is None:
            out = [("scale", f"{code}  (E8M0 NaN)")]
        else:
            E = self.shared_exponent
            out = [("scale", f"{code}  (E8M0: 2^({self.scale_code}-127) = 2^{E} = {num_text(self.scale)})"),
                   ("exponent", f"shared exponent E = {E}")]
        out.append(("how chosen", self.rule))
        unit = " (int8 code / 64)" if self.mxint else ""
        out.append(("elements", f"dequantised = element{unit} × scale; element = x / scale rounded to "
                                f"{self.element_format.name}, saturating at ±{num_text(self.elem_max)}"))
        return out

    def row(self, i: int, colour: bool = False) -> list[str]:
        """Element i's cells under ``COLUMNS`` (bits painted when ``colour``)."""
        e, Q = self.explanations[i], self.quotients[i]
        note = ("saturated (clipped to ±max)" if self.saturated[i] else
                "flushed to zero" if self.flushed[i] else "")
        return [str(self.positions[i]),
                num_text(self.originals[i]) if self.originals[i] is not None else
                num_text(self._specials[i]) if self._specials[i] is not None else "?",
                "?" if Q is None else num_text(float(Q)),
                hex_code(self.codes[i], self.element_format),
                field_bits(e.fields(), colour), num_text(self.elements[i]),
                num_text(self.dequantized[i]),
                "?" if self.errors[i] is None else signed_sci_text(self.errors[i], 6), note]

    def text(self, colour: bool | None = None) -> str:
        """The block as text; ``colour=None`` colours when stdout is a terminal and
        ``NO_COLOR`` is not set."""
        if colour is None:
            colour = use_colour()
        L = [self.title(), ""]
        L += [f"{k:<13}{v}" for k, v in self.scale_lines(colour)]
        L.append("")
        plain = [list(self.COLUMNS)] + [self.row(i) for i in range(self.size)]
        painted = [list(self.COLUMNS)] + [self.row(i, colour) for i in range(self.size)]
        w = [max(len(r[j]) for r in plain) for j in range(len(self.COLUMNS))]
        for k, (pr, cr) in enumerate(zip(plain, painted)):
            cells = [c + " " * (w[j] - len(p)) if j in (4, 8) else c.rjust(w[j])
                     for j, (p, c) in enumerate(zip(pr, cr))]
            L.append("  ".join(cells).rstrip())
            if k == 0:
                L.append("  ".join("-" * x for x in w))
        if not self.have_x:
            L.append("(x unknown: pass the original tensor, explain_block(q, block, x=x), "
                     "for x / scale, errors and flags)")
        return "\n".join(L)

    def __str__(self):
        return self.text()

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return block_html(self)


def explain_block(q, block=0, x=None, rounding="nearest_even") -> BlockExplanation:
    """Explain one block of a block-scaled ``QuantizedTensor`` (MX or NVFP4).

    Shows the shared scale (the E8M0 code in hex and bits and the exponent it
    encodes; for NVFP4 the E4M3 block scale and the fp32 tensor scale) and how it
    was chosen (OCP MX: ``E = floor(log2 amax) - emax_elem``, floor(log2 amax)
    being amax's unbiased exponent field, clamped to -127), then one row per
    element: x, x / scale, the element code's bits by field, the element value,
    the dequantised value and the error, flagging saturated elements
    (|x / scale| > the element format's max, stored as ±max) and elements flushed
    to zero.  ``block`` counts blocks in storage order (along ``q.axis``, then the
    other axes); ``x`` is the original tensor (a QuantizedTensor does not keep
    it: without it, x, x / scale, errors and flags are unknown); ``rounding`` is
    the element rounding mode used, for the per-element explanations ``b[i]``.

    >>> import floatfmt as ff
    >>> x = [7.0, 0.2, -2.6] + [0.0] * 29
    >>> b = explain_block(ff.quantize(x, "mxfp4_e2m1"), x=x)
    >>> hex(b.scale_code), b.shared_exponent, b.elements[:3]
    ('0x7f', 0, [6.0, 0.0, -3.0])
    >>> b.saturated[:3], b.flushed[:3]
    ([True, False, False], [False, True, False])
    """
    return BlockExplanation(q, block, x, rounding)
