/* floatfmt explorer: the exact number engine.
 *
 * Every number here is a BigInt rational or a dyadic t * 2**k; no JavaScript
 * double is ever used for a value.  A decimal string is parsed exactly and
 * rounded once.  The rule mirrors floatfmt's one rounding routine
 * (floatfmt/core/rounding.py, `_general_chunk`): quantum 2**k with
 * k = max(floor(log2|x|), emin) - mbits, the integer part of x / 2**k is kept
 * and the remainder decides the step away from zero; overflow is judged on the
 * rounded value.  Format facts (field widths, bias, emin, emax, max, which codes
 * are Inf / NaN) come from floatfmt's registry, written into the page at build
 * time.  tests/test_explorer.py compares this engine with floatfmt on thousands
 * of inputs per format and mode inside headless chromium.
 */
"use strict";
const FFX = (() => {
  const MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "down", "odd"];

  function bitlen(n) { return n === 0n ? 0 : n.toString(2).length; }
  function pow2(k) { return 1n << BigInt(k); }
  function pow10(k) { return 10n ** BigInt(k); }

  /* ---- parsing: a string -> {nan} | {inf, neg} | {neg, n, d} exactly ---- */
  function parse(str) {
    const t = String(str).trim().replace(/_/g, "");
    let m = /^([+-]?)(inf|infinity|nan)$/i.exec(t);
    if (m) return m[2].toLowerCase() === "nan" ? {nan: true, neg: false} : {inf: true, neg: m[1] === "-"};
    m = /^([+-]?)0x([0-9a-f]*)(?:\.([0-9a-f]*))?(?:p([+-]?\d+))?$/i.exec(t);
    if (m && (m[2] + (m[3] || "")).length > 0) {
      // a hex float: floatfmt reads it with float.fromhex (rounded to float64, ties to even)
      const frac = m[3] || "";
      const n = BigInt("0x" + (m[2] + frac || "0"));
      const e = parseInt(m[4] || "0", 10) - 4 * frac.length;
      const x = e >= 0 ? {neg: m[1] === "-", n: n << BigInt(e), d: 1n}
                       : {neg: m[1] === "-", n: n, d: pow2(-e)};
      const r = round(x, AUX.fp64, "nearest_even", "inf");
      if (r.inf) throw new Error("hex float too large for float64");
      return fromDyadic(r);
    }
    m = /^([+-]?)(\d*)(?:\.(\d*))?(?:e([+-]?\d+))?$/i.exec(t);
    if (!m || (m[2] + (m[3] || "")).length === 0)
      throw new Error(`cannot read ${JSON.stringify(String(str))} as a number (try 0.1, -3e-5, 0x1.8p3, inf, nan)`);
    const digits = (m[2] + (m[3] || "")).replace(/^0+/, "");
    const neg = m[1] === "-";
    if (digits === "") return {neg, n: 0n, d: 1n};
    let exp = parseInt(m[4] || "0", 10) - (m[3] || "").length;
    const adjusted = exp + digits.length - 1;
    // Beyond 1e5000 every format overflows, below 1e-5000 every format sees "a hair above
    // zero": both sides of these bounds round the same everywhere, so there is no need for
    // huge powers of ten (such inputs are marked: their rounding error is not shown exactly).
    if (adjusted >= 5000) return {neg, n: 10n ** 5001n, d: 1n, clamped: true};
    if (adjusted < -5000) return {neg, n: 1n, d: 10n ** 5002n, clamped: true};
    const n = BigInt(digits);
    return exp >= 0 ? {neg, n: n * pow10(exp), d: 1n} : {neg, n, d: pow10(-exp)};
  }

  function fromDyadic(r) {  // {neg, t, k} -> {neg, n, d}
    return r.k >= 0 ? {neg: r.neg, n: r.t << BigInt(r.k), d: 1n} : {neg: r.neg, n: r.t, d: pow2(-r.k)};
  }

  function floorLog2(n, d) {  // n, d > 0
    let e = bitlen(n) - bitlen(d);
    if (e >= 0 ? n < (d << BigInt(e)) : (n << BigInt(-e)) < d) e -= 1;
    return e;
  }

  function cmpDyadic(t, k, n, d) {  // sign of t*2**k - n/d, all nonnegative
    let a = t * d, b = n;
    if (k >= 0) a <<= BigInt(k); else b <<= BigInt(-k);
    return a > b ? 1 : a < b ? -1 : 0;
  }

  /* ---- rounding: the rule of floatfmt.core.rounding, magnitude formulation ---- */
  function roundMagnitude(n, d, f, mode, neg) {
    let k = 0;
    if (f.kind === "float") {
      let e = n === 0n ? f.emin : floorLog2(n, d);
      e = Math.min(Math.max(e, f.emin), f.emax + 1);
      k = e - f.mbits;
    }
    let num = n, den = d;
    if (k >= 0) den = d << BigInt(k); else num = n << BigInt(-k);
    let t = num / den;
    const rem = num - t * den;
    const gt = 2n * rem > den, eq = 2n * rem === den, inexact = rem !== 0n;
    const odd = (t & 1n) === 1n;
    let away;
    switch (mode) {
      case "nearest_even": away = gt || (eq && odd); break;
      case "nearest_away": away = gt || eq; break;
      case "toward_zero": away = false; break;
      case "up": away = inexact && !neg; break;
      case "down": away = inexact && neg; break;
      case "odd": away = inexact && !odd; break;
      default: throw new Error(`unknown rounding mode ${mode}`);
    }
    if (away) t += 1n;
    return {t, k, inexact};
  }

  function maxOf(f) { return {t: BigInt(f.max_t), k: f.max_k}; }

  function intRange(f) {
    const lo = f.signed ? -pow2(f.bits - 1) : 0n;
    return [lo, lo + pow2(f.bits) - 1n];
  }

  /* round(x, f, mode, policy): x from parse(); policy "inf" | "nan" | "saturate" | "wrap"
     (already resolved, as floatfmt.core.rounding.resolve_overflow does).  Returns
     {nan, neg} | {inf, neg} | {neg, t, k} (value (-1)**neg * t * 2**k). */
  function round(x, f, mode, policy) {
    if (x.nan) return {nan: true, neg: false};
    if (f.kind === "int") {
      let v;
      if (x.inf) {
        const [lo, hi] = intRange(f);
        v = x.neg ? lo : hi;
      } else {
        const r = roundMagnitude(x.n, x.d, f, mode, x.neg);
        v = x.neg ? -r.t : r.t;
        const [lo, hi] = intRange(f);
        if (policy === "wrap") {
          const span = pow2(f.bits);
          v = ((v - lo) % span + span) % span + lo;
        } else {
          v = v < lo ? lo : v > hi ? hi : v;
        }
      }
      return {neg: v < 0n, t: v < 0n ? -v : v, k: 0};
    }
    let r;
    if (x.inf) {
      if (policy === "saturate") r = {neg: x.neg, ...maxOf(f)};
      else r = policy === "inf" ? {inf: true, neg: x.neg} : {nan: true, neg: x.neg};
    } else {
      const m = roundMagnitude(x.n, x.d, f, mode, x.neg);
      r = {neg: x.neg, t: m.t, k: m.k};
      const mx = maxOf(f);
      if (cmpDyadic(m.t, m.k, ...ratOf(mx)) > 0) {
        const out = {nearest_even: true, nearest_away: true, toward_zero: false, odd: false,
                     up: !x.neg, down: x.neg}[mode];
        if (policy === "saturate" || !out) r = {neg: x.neg, ...mx};
        else r = policy === "inf" ? {inf: true, neg: x.neg} : {nan: true, neg: x.neg};
      }
      if (!r.inf && !r.nan && r.t === 0n) {
        if (!f.negative_zero) r.neg = false;
        if (!f.zero) r = {neg: false, t: 1n, k: f.emin};  // E8M0: the floor is 2**emin
      }
    }
    if (!f.signed) {
      // floatfmt flags any negative nonzero input (however tiny) and, in a format
      // without zero, a zero input as NaN
      const z = !x.inf && x.n === 0n;
      if ((x.neg && !z) || (!f.zero && z)) r = {nan: true, neg: false};
    }
    return r;
  }

  /* ---- codes ---- */
  function nanCode(f, neg) {
    if (!f.has_nan) return null;
    const sign = f.signed && neg ? pow2(f.bits - 1) : 0n;
    if (f.nan === "ieee") return ((pow2(f.ebits) - 1n) << BigInt(f.mbits)) | pow2(f.mbits - 1) | sign;
    if (f.nan === "all_ones") return (pow2(f.ebits + f.mbits) - 1n) | sign;
    return pow2(f.bits - 1);  // negative_zero: the code of -0
  }

  function encode(r, f) {  // a result of round() -> BigInt code, or null (NaN in a format without NaN)
    if (r.nan) return nanCode(f, r.neg);
    if (f.kind === "int") {
      const v = r.neg ? -r.t : r.t, span = pow2(f.bits);
      return ((v % span) + span) % span;
    }
    const sign = f.signed && r.neg ? pow2(f.bits - 1) : 0n;
    if (r.inf) return ((pow2(f.ebits) - 1n) << BigInt(f.mbits)) | sign;
    if (r.t === 0n) return sign;
    const e = bitlen(r.t) - 1 + r.k;
    let efield, sig;
    if (f.subnormals && e < f.emin) { efield = 0n; sig = shift(r.t, r.k - (f.emin - f.mbits)); }
    else { efield = BigInt(e + f.bias); sig = shift(r.t, r.k - (e - f.mbits)) - pow2(f.mbits); }
    return (efield << BigInt(f.mbits)) | sig | sign;
  }

  function shift(t, s) { return s >= 0 ? t << BigInt(s) : t >> BigInt(-s); }

  function decode(code, f) {  // BigInt code -> {nan, neg} | {inf, neg} | {neg, t, k}
    code = BigInt(code);
    if (f.kind === "int") {
      let v = code;
      if (f.signed && code >= pow2(f.bits - 1)) v = code - pow2(f.bits);
      return {neg: v < 0n, t: v < 0n ? -v : v, k: 0};
    }
    const emask = pow2(f.ebits) - 1n, mmask = pow2(f.mbits) - 1n;
    const neg = f.signed && ((code >> BigInt(f.bits - 1)) & 1n) === 1n;
    const e = (code >> BigInt(f.mbits)) & emask, m = code & mmask;
    if (f.nan === "ieee" && e === emask) return m === 0n ? {inf: true, neg} : {nan: true, neg};
    if (f.nan === "all_ones" && e === emask && m === mmask) return {nan: true, neg};
    if (f.nan === "negative_zero" && code === pow2(f.bits - 1)) return {nan: true, neg: true};
    if (e === 0n && f.subnormals) return {neg, t: m, k: f.emin - f.mbits};
    return {neg, t: m + pow2(f.mbits), k: Number(e) - f.bias - f.mbits};
  }

  function isFinite(r) { return !r.nan && !r.inf; }

  function classify(r, f) {
    if (r.nan) return "nan";
    if (r.inf) return "inf";
    if (r.t === 0n) return "zero";
    if (f.kind === "float" && bitlen(r.t) - 1 + r.k < f.emin) return "subnormal";
    return "normal";
  }

  function ulp(r, f) {  // spacing at |r|: {t: 1n, k}
    if (!isFinite(r)) return null;
    if (f.kind === "int") return {neg: false, t: 1n, k: 0};
    const e = r.t === 0n ? f.emin : Math.max(bitlen(r.t) - 1 + r.k, f.emin);
    return {neg: false, t: 1n, k: e - f.mbits};
  }

  /* neighbours of a value of f, as floatfmt.next_up / next_down give them */
  function step(r, f, up) {
    if (r.nan) return {nan: true, neg: false};
    const mx = maxOf(f);
    if (r.inf) return (!r.neg) === up ? r : {neg: r.neg, ...mx};
    if (f.kind === "int") {
      const v = (r.neg ? -r.t : r.t) + (up ? 1n : -1n);
      const [lo, hi] = intRange(f);
      if (v < lo || v > hi) return {nan: true, neg: false};
      return {neg: v < 0n, t: v < 0n ? -v : v, k: 0};
    }
    const side = r.t === 0n ? (up ? 1 : -1) : (r.neg ? -1 : 1);
    const magCode = encode({neg: false, t: r.t, k: r.k}, f);
    const nc = magCode + (((side > 0) === up) ? 1n : -1n);
    let out;
    if (nc > BigInt(f.max_code)) out = f.inf ? {inf: true, neg: side < 0} : {nan: true, neg: false};
    else if (nc < 0n) out = {nan: true, neg: false};
    else { out = decode(nc, f); out = {...out, neg: side < 0}; }
    if (!f.signed && side < 0) out = {nan: true, neg: false};
    if (!f.negative_zero && isFinite(out) && out.t === 0n) out.neg = false;
    return out;
  }

  /* ---- exact decimal text ---- */
  function dyadicDecimal(r) {  // exact decimal of a finite dyadic
    const sign = r.neg ? "-" : "";
    if (r.k >= 0) return sign + (r.t << BigInt(r.k)).toString();
    const digits = (r.t * 5n ** BigInt(-r.k)).toString().padStart(-r.k + 1, "0");
    const cut = digits.length + r.k;
    let frac = digits.slice(cut).replace(/0+$/, "");
    return sign + digits.slice(0, cut) + (frac ? "." + frac : "");
  }

  function text(r) {
    if (r.nan) return "NaN";
    if (r.inf) return (r.neg ? "-" : "+") + "Inf";
    return dyadicDecimal(r);
  }

  function ratDecimal(neg, n, d) {  // exact decimal of n/d when d = 2**a * 5**b (else null)
    let a = 0, b = 0, q = d;
    while (q % 2n === 0n) { q /= 2n; a++; }
    while (q % 5n === 0n) { q /= 5n; b++; }
    if (q !== 1n) return null;
    const p = Math.max(a, b);
    const scaled = n * (10n ** BigInt(p)) / d;
    const s = scaled.toString().padStart(p + 1, "0");
    const cut = s.length - p;
    const frac = s.slice(cut).replace(/0+$/, "");
    return (neg && n !== 0n ? "-" : "") + s.slice(0, cut) + (frac ? "." + frac : "");
  }

  function sci(neg, n, d, digits = 4) {  // n/d >= 0 to `digits` significant digits (display only)
    if (n === 0n) return "0";
    let e = n.toString().length - d.toString().length;
    const ge = (e >= 0 ? n >= d * pow10(e) : n * pow10(-e) >= d);
    if (!ge) e -= 1;
    const s = e >= digits - 1 ? (n / (d * pow10(e - digits + 1))) : (n * pow10(digits - 1 - e) / d);
    const str = s.toString();
    const body = str[0] + (digits > 1 ? "." + str.slice(1, digits) : "");
    return (neg ? "-" : "") + body + "e" + (e >= 0 ? "+" : "") + e;
  }

  /* error r - x (exact rational) of a finite result and a finite input */
  function error(r, x) {
    const R = fromDyadic(r);
    const rn = (R.neg ? -R.n : R.n) * x.d, xn = (x.neg ? -x.n : x.n) * R.d;
    const num = rn - xn, den = R.d * x.d;
    return {neg: num < 0n, n: num < 0n ? -num : num, d: den};
  }

  /* ---- OCP MX blocks, as floatfmt.quantize(x, "mx...") computes them ---- */
  function mxQuantize(strings, mx, scaleRounding, mode) {
    const elem = FORMATS[mx.element];
    const xs = strings.map(parse);
    while (xs.length < mx.block) xs.push({neg: false, n: 0n, d: 1n});
    const bad = xs.some(x => x.nan || x.inf);
    // floatfmt takes amax from the float64 values truncated toward zero
    let amax = {neg: false, t: 0n, k: 0};
    for (const x of xs) {
      if (x.nan || x.inf) continue;
      const a = round({neg: false, n: x.n, d: x.d}, AUX.fp64, "toward_zero", "saturate");
      if (cmpDyadic(a.t, a.k, ...ratOf(amax)) > 0) amax = a;
    }
    let E = null;
    if (!bad) {
      if (amax.t === 0n) E = -127;
      else {
        let a = amax;
        if (scaleRounding === "even") a = round(fromDyadic(a), AUX[mx.even_format], "nearest_away", "inf");
        if (a.inf) E = null;
        else {
          const ea = bitlen(a.t) - 1 + a.k;
          E = ea - mx.emax;
          if (scaleRounding === "ceil" && a.t !== (1n << BigInt(bitlen(a.t) - 1))) E += 1;
          if (scaleRounding === "rceil") {
            const mt = BigInt(mx.max_t), mk = mx.max_k;  // a / 2**E > max_elem ?
            if (cmpDyadic(a.t, a.k - E, ...ratOf({t: mt, k: mk})) > 0) E += 1;
          }
          E = Math.max(E, -127);
          if (E > 127) E = null;
        }
      }
    }
    const scaleCode = E === null ? 0xFF : E + 127;
    const rows = xs.map((x, i) => {
      let y;
      if (E === null) y = {neg: false, n: 0n, d: 1n};
      else {
        const s = mx.shift - E;  // y = x * 2**(shift - E), exact
        y = s >= 0 ? {neg: x.neg, n: x.n << BigInt(s), d: x.d} : {neg: x.neg, n: x.n, d: x.d << BigInt(-s)};
      }
      const r = round(y, elem, mode, "saturate");
      const code = encode(r, elem);
      // the element value (MXINT8: the int8 code / 64) and the dequantised value
      const ev = isFinite(r) ? {neg: r.neg, t: r.t, k: r.k - mx.shift} : r;
      const deq = E === null ? {nan: true, neg: false} : (isFinite(ev) ? {neg: ev.neg, t: ev.t, k: ev.k + E} : ev);
      const mxAbs = {t: BigInt(mx.max_t), k: mx.max_k};
      const saturated = E !== null && isFinite(x) && !x.nan &&
        cmpDyadic(mxAbs.t, mxAbs.k + E, x.n, x.d) < 0;
      const flushed = E !== null && isFinite(x) && !x.nan && x.n !== 0n && isFinite(r) && r.t === 0n;
      return {input: strings[i] === undefined ? "0" : strings[i], x, y, r, code, element: ev, deq,
              saturated, flushed, padded: i >= strings.length};
    });
    return {E, scaleCode, amax, rows};
  }

  function ratOf(d) { const r = fromDyadic({neg: false, ...d}); return [r.n, r.d]; }

  let FORMATS = {}, AUX = {}, MXF = {};
  function setData(data) { FORMATS = data.formats; AUX = data.aux; MXF = data.mx; }

  return {MODES, parse, round, encode, decode, classify, ulp, step, text, dyadicDecimal,
          ratDecimal, sci, error, fromDyadic, mxQuantize, isFinite, setData,
          get formats() { return FORMATS; }, get mx() { return MXF; }};
})();
