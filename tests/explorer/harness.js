/* Test harness for the explorer engine: injected into the page by
   tests/test_explorer.py (and usable from node).  Canonical result strings:
   "nan+" / "nan-", "inf+" / "inf-", or "<sign><n>/<d>" (exact, reduced) plus the code. */
function ffxCanon(r) {
  if (r.nan) return "nan" + (r.neg ? "-" : "+");
  if (r.inf) return "inf" + (r.neg ? "-" : "+");
  let t = r.t, k = r.k;
  if (t === 0n) k = 0;
  while (k < 0 && t % 2n === 0n && t !== 0n) { t /= 2n; k += 1; }
  const n = k >= 0 ? t << BigInt(k) : t, d = k >= 0 ? 1n : 1n << BigInt(-k);
  return (r.neg ? "-" : "+") + n.toString() + "/" + d.toString();
}
function ffxBatch(req) {
  const f = FFX.formats[req.fmt];
  const out = [];
  if (req.kind === "round") {
    for (const s of req.inputs) {
      const r = FFX.round(FFX.parse(s), f, req.mode, req.policy);
      const c = FFX.encode(r, f);
      out.push(ffxCanon(r) + " " + (c === null ? "none" : c.toString()));
    }
  } else if (req.kind === "decode") {
    for (const c of req.codes) {
      const r = FFX.decode(BigInt(c), f);
      out.push([ffxCanon(r), FFX.classify(r, f), ffxCanon(FFX.step(r, f, true)), ffxCanon(FFX.step(r, f, false)),
                FFX.ulp(r, f) ? ffxCanon(FFX.ulp(r, f)) : "nan+", FFX.text(r)].join(" "));
    }
  } else if (req.kind === "mx") {
    for (const block of req.blocks) {
      const q = FFX.mxQuantize(block, FFX.mx[req.mx], req.scale_rounding, req.mode);
      out.push(String(q.scaleCode) + ":" + q.rows.slice(0, block.length).map(r => r.code === null ? "none" : r.code.toString()).join(","));
    }
  }
  return out;
}
