/* floatfmt explorer: the page.  All numbers come from FFX (engine.js). */
"use strict";
(() => {
  const DATA = JSON.parse(document.getElementById("ffx-data").textContent);
  FFX.setData(DATA);
  const F = DATA.formats, NAMES = Object.keys(F), MODES = DATA.modes;
  const $ = id => document.getElementById(id);
  const el = (tag, attrs = {}, ...kids) => {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") n.className = v; else if (k === "text") n.textContent = v;
      else if (k.startsWith("data-") || k === "title" || k === "type") n.setAttribute(k, v); else n[k] = v;
    }
    for (const c of kids) n.append(c);
    return n;
  };
  const hex = (code, f) => code === null ? "none" : "0x" + code.toString(16).padStart(Math.ceil(f.bits / 4), "0");
  const bin = (code, width) => code.toString(2).padStart(width, "0");
  const short = (s, n = 16) => s.length <= n ? s : s.slice(0, n - 1) + "\u2026";
  const pow2text = k => `2^${k}`;

  function fieldsOf(code, f) {  // [[name, bits string]] high to low
    const b = bin(code, f.bits);
    if (f.kind === "int") return [["integer", b]];
    const s = f.signed ? 1 : 0;
    return [["sign", b.slice(0, s)], ["exponent", b.slice(s, s + f.ebits)], ["mantissa", b.slice(s + f.ebits)]]
      .filter(p => p[1].length > 0);
  }
  function fieldsHTML(code, f) {
    if (code === null) return "none";
    const cls = {sign: "s", exponent: "e", mantissa: "m", integer: ""};
    return fieldsOf(code, f).map(([n, b]) => `<span class="${cls[n]}">${b}</span>`).join(" ");
  }
  function fillSelect(sel, items, label = x => x) {
    for (const it of items) sel.append(el("option", {value: it, text: label(it)}));
  }

  /* ------------------------------------------------------------- theme */
  $("theme").addEventListener("change", e => { document.documentElement.dataset.theme = e.target.value; });

  /* ------------------------------------------------------------- bits */
  const bitsState = {fmt: "bf16", code: 0x3dcdn};
  fillSelect($("bits-format"), NAMES, n => `${n} (${F[n].bits} bits)`);

  function setBits(fmtName, code) {
    bitsState.fmt = fmtName; bitsState.code = BigInt(code);
    $("bits-format").value = fmtName;
    renderBits();
  }

  function renderBits(keepNumber = false) {
    const f = F[bitsState.fmt], code = bitsState.code;
    if (!keepNumber) { $("bits-number").value = ""; $("bits-error").textContent = ""; }
    $("bits-desc").textContent = f.description;
    $("code-hex").value = hex(code, f); $("code-hex").removeAttribute("aria-invalid");
    const box = $("bits"); box.textContent = "";
    const s = f.signed && f.kind === "float" ? 1 : 0;
    for (let i = f.bits - 1; i >= 0; i--) {
      const pos = f.bits - 1 - i;
      const field = f.kind === "int" ? "integer" : pos < s ? "sign" : pos < s + f.ebits ? "exponent" : "mantissa";
      const gap = f.kind === "float" && (pos === s || pos === s + f.ebits) && pos > 0;
      const b = el("button", {type: "button", class: `bit ${field}${gap ? " gap" : ""}`, "data-bit": String(i),
                              title: `${field} bit (bit ${i})`, text: ((code >> BigInt(i)) & 1n).toString()});
      b.addEventListener("click", () => { bitsState.code ^= (1n << BigInt(i)); renderBits(); });
      box.append(b);
    }
    const r = FFX.decode(code, f);
    const parts = fieldsOf(code, f);
    const get = name => (parts.find(p => p[0] === name) || [null, ""])[1];
    if (f.kind === "int") {
      $("bits-sign").textContent = f.signed ? `two's complement: top bit ${get("integer")[0]} (${get("integer")[0] === "1" ? "negative" : "nonnegative"})` : "unsigned";
      $("bits-exponent").textContent = "none (integer format)";
      $("bits-mantissa").textContent = "none (integer format)";
    } else {
      $("bits-sign").textContent = f.signed ? `${get("sign")} (${get("sign") === "1" ? "\u2212" : "+"})` : "none (unsigned format)";
      const e = parseInt(get("exponent") || "0", 2);
      const mtxt = get("mantissa");
      const m = f.mbits ? parseInt(mtxt, 2) : 0;
      let etxt = `${get("exponent")} = ${e}`;
      if (r.nan) etxt += " (NaN code)";
      else if (r.inf) etxt += " (Inf)";
      else if (e === 0 && f.subnormals) etxt += ` (subnormal or zero: 2^${f.emin}, as e = 1)`;
      else etxt += ` \u2212 bias ${f.bias} = 2^${e - f.bias}`;
      $("bits-exponent").textContent = etxt;
      const lead = (e === 0 && f.subnormals) ? "0" : "1";
      $("bits-mantissa").textContent = f.mbits ? `${mtxt} = ${m} / 2^${f.mbits} (significand ${lead}.${mtxt} in binary)` : "none (no mantissa bits)";
    }
    $("bits-formula").textContent = formula(code, f, r);
    const v = $("bits-value");
    v.textContent = FFX.text(r); v.dataset.value = FFX.text(r);
    $("bits-class").textContent = FFX.classify(r, f);
    for (const [id, up] of [["bits-down", false], ["bits-up", true]]) {
      const nb = FFX.step(r, f, up);
      const c = FFX.encode(nb, f);
      const btn = $(id);
      btn.textContent = FFX.text(nb) + (c === null || nb.nan ? "" : `  (${hex(c, f)})`);
      btn.dataset.value = FFX.text(nb);
      btn.disabled = nb.nan || c === null;
      btn.onclick = () => { if (c !== null && !nb.nan) { bitsState.code = c; renderBits(); } };
    }
    const u = FFX.ulp(r, f);
    $("bits-ulp").textContent = u ? `${FFX.dyadicDecimal(u)} = ${pow2text(u.k)}` : "none (not finite)";
    $("bits-ulp").dataset.value = u ? FFX.dyadicDecimal(u) : "NaN";
  }
  function formula(code, f, r) {
    if (r.nan) return "NaN";
    if (r.inf) return (r.neg ? "\u2212" : "+") + "\u221e";
    if (f.kind === "int") return f.signed ? `two's complement: ${code} \u2212 ${code >= (1n << BigInt(f.bits - 1)) ? 2n ** BigInt(f.bits) : 0n} = ${FFX.text(r)}` : FFX.text(r);
    const e = Number((code >> BigInt(f.mbits)) & ((1n << BigInt(f.ebits)) - 1n));
    const m = code & ((1n << BigInt(f.mbits)) - 1n);
    const sign = r.neg ? "\u2212" : "+";
    const sub = e === 0 && f.subnormals;
    const sig = `${sub ? 0 : 1}${f.mbits ? ` + ${m}/2^${f.mbits}` : ""}`;
    return `${sign}(${sig}) \u00d7 2^${sub ? f.emin : e - f.bias} = ${FFX.text(r)}`;
  }
  $("bits-format").addEventListener("change", e => setBits(e.target.value, 0n));
  $("bits-number").addEventListener("change", e => {
    const f = F[bitsState.fmt];
    $("bits-error").textContent = "";
    try {
      const r = FFX.round(FFX.parse(e.target.value), f, "nearest_even", f.default_overflow);
      const c = FFX.encode(r, f);
      if (c === null) throw new Error(`${f.name} has no code for NaN`);
      bitsState.code = c;
      renderBits(true);
    } catch (err) { $("bits-error").textContent = err.message; }
  });
  $("code-hex").addEventListener("change", e => {
    const f = F[bitsState.fmt], t = e.target.value.trim().toLowerCase();
    let c = null;
    try { c = BigInt(/^0[xb]/.test(t) ? t : "0x" + t); } catch (_) { c = null; }
    if (c === null || t === "" || c < 0n || c >= (1n << BigInt(f.bits))) {
      e.target.setAttribute("aria-invalid", "true");  // keep the text so it can be fixed
      return;
    }
    e.target.removeAttribute("aria-invalid");
    bitsState.code = c;
    renderBits();
  });

  /* ------------------------------------------------------------- round a number */
  const roundState = {sel: null};
  function policyFor(f) {
    const p = $("num-overflow").value;
    if (p === "default") return f.default_overflow;
    return f.overflows.includes(p) ? p : null;
  }
  function renderRound() {
    const table = $("round-table"); table.textContent = "";
    $("num-error").textContent = "";
    let x;
    try { x = FFX.parse($("num-input").value); }
    catch (err) { $("num-error").textContent = err.message; $("round-detail").textContent = ""; return; }
    const head = el("tr", {}, el("th", {text: "format"}), ...MODES.map(m => el("th", {text: m})));
    table.append(el("thead", {}, head));
    const body = el("tbody");
    for (const name of NAMES) {
      const f = F[name], policy = policyFor(f);
      const tr = el("tr", {}, el("th", {text: name, title: f.description}));
      for (const mode of MODES) {
        if (policy === null) {
          tr.append(el("td", {class: "na", text: "\u2014", title: `${name} has no ${$("num-overflow").value} overflow`,
                              "data-fmt": name, "data-mode": mode, "data-code": "n/a"}));
          continue;
        }
        const r = FFX.round(x, f, mode, policy);
        const code = FFX.encode(r, f);
        const full = FFX.text(r);
        let errTxt = "", errExact = "";
        if (FFX.isFinite(r) && !x.nan && !x.inf && !x.clamped) {
          const e = FFX.error(r, x);
          errExact = FFX.ratDecimal(e.neg, e.n, e.d);
          errTxt = e.n === 0n ? "exact" : (e.neg ? "" : "+") + FFX.sci(e.neg, e.n, e.d, 3);
        }
        const td = el("td", {class: "cell", title: full, "data-fmt": name, "data-mode": mode, "data-policy": policy,
                             "data-code": code === null ? "none" : code.toString(), "data-value": full,
                             "data-error": errExact});
        td.append(el("span", {class: "val", text: short(full)}), el("span", {class: "err", text: errTxt}));
        td.addEventListener("click", () => { roundState.sel = [name, mode]; renderRound(); });
        if (roundState.sel && roundState.sel[0] === name && roundState.sel[1] === mode) td.classList.add("sel");
        tr.append(td);
      }
      body.append(tr);
    }
    table.append(body);
    renderDetail(x);
  }
  function renderDetail(x) {
    const d = $("round-detail");
    if (!roundState.sel) { d.textContent = ""; return; }
    const [name, mode] = roundState.sel, f = F[name], policy = policyFor(f);
    if (policy === null) { d.textContent = ""; return; }
    const r = FFX.round(x, f, mode, policy), code = FFX.encode(r, f);
    const lines = [`input      ${$("num-input").value.trim()}`,
                   `format     ${name}  (${f.description})`,
                   `rounding   ${mode}, overflow ${policy}`,
                   `code       ${hex(code, f)}  = ${code === null ? "(NaN has no code in " + name + ")" : fieldsHTML(code, f)}`,
                   `stored     ${FFX.text(r)}`,
                   `class      ${FFX.classify(r, f)}`];
    if (FFX.isFinite(r) && !x.nan && !x.inf && !x.clamped) {
      const e = FFX.error(r, x);
      lines.push(`error      ${FFX.ratDecimal(e.neg, e.n, e.d)}  (exact)`);
      if (x.n !== 0n) {
        const rel = {n: e.n * x.d, d: e.d * x.n};
        lines.push(`relative   ${FFX.sci(false, rel.n, rel.d, 4)}`);
      }
      const u = FFX.ulp(r, f), U = FFX.fromDyadic(u);
      lines.push(`in ulps    ${FFX.sci(e.neg, e.n * U.d, e.d * U.n, 4)}  (ulp ${FFX.dyadicDecimal(u)} = 2^${u.k})`);
    }
    d.innerHTML = lines.join("\n");
  }
  $("num-input").addEventListener("input", renderRound);
  $("num-overflow").addEventListener("change", renderRound);

  /* ------------------------------------------------------------- MX block */
  const MX = DATA.mx;
  fillSelect($("mx-format"), Object.keys(MX));
  fillSelect($("mx-scale-rounding"), MX[Object.keys(MX)[0]].scale_roundings);
  fillSelect($("mx-mode"), MODES);
  const EXAMPLES = [
    "7.0, 0.2, -2.6, 0.5, 1, 1.25, -0.3, 3.3, 0.01, -6.5, 2.75, 0.125, 4, -1.75, 0.6, 0.05, " +
    "-0.9, 1.1, 2.2, -3.3, 0.33, 0.0625, -5, 5.5, 0.7, -0.07, 1.9, 2.5, -2.5, 0.875, 3, -4.25",
    "448, 449, 1e-3, -0.1, 3.14159, 2.71828, 1.41421, -1.73205, 0.000244140625, 100, -250, 17, 0.3, 0.5, 12.5, -96",
    "0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6",
  ];
  let exampleIndex = 0;
  $("mx-input").value = EXAMPLES[0];
  function renderMX() {
    const table = $("mx-table"); table.textContent = "";
    $("mx-error").textContent = ""; $("mx-summary").textContent = "";
    const name = $("mx-format").value, mx = MX[name], ef = F[mx.element];
    const items = $("mx-input").value.split(/[\s,;]+/).filter(s => s.length > 0);
    if (items.length > mx.block) { $("mx-error").textContent = `an MX block holds ${mx.block} values, not ${items.length}`; return; }
    let q;
    try { q = FFX.mxQuantize(items, mx, $("mx-scale-rounding").value, $("mx-mode").value); }
    catch (err) { $("mx-error").textContent = err.message; return; }
    const E = q.E;
    const rule = {floor: `E = floor(log2 amax) \u2212 emax_elem`, ceil: "E = ceil(log2 amax) \u2212 emax_elem",
                  even: "amax rounded to the element precision (ties away), then floor(log2) \u2212 emax_elem",
                  rceil: "smallest E with amax / 2^E \u2264 the element max"}[$("mx-scale-rounding").value];
    const amaxTxt = q.amax.t === 0n ? "0" : FFX.dyadicDecimal(q.amax);
    const lines = [`element format  ${mx.element}${mx.shift ? ` (value = int8 code / 2^${mx.shift})` : ""}, emax_elem ${mx.emax}`,
                   `amax            ${amaxTxt}`,
                   `rule            ${rule}, clamped to \u2265 \u2212127; Inf/NaN in the block or E > 127 give the NaN scale`,
                   E === null ? `shared scale    NaN  (E8M0 code 0xff = 11111111)`
                              : `shared scale    2^${E}  (E8M0 code 0x${q.scaleCode.toString(16).padStart(2, "0")} = ${bin(BigInt(q.scaleCode), 8)}, E = ${q.scaleCode} \u2212 127)`];
    const sum = $("mx-summary");
    sum.textContent = lines.join("\n");
    sum.dataset.scaleCode = String(q.scaleCode);
    table.append(el("thead", {}, el("tr", {}, ...["#", "x", "x / scale", "code", "bits", "element", "dequantised", "error", "note"]
      .map(h => el("th", {text: h})))));
    const body = el("tbody");
    q.rows.forEach((row, i) => {
      const quot = E === null ? "\u2014" : (() => {
        const x = row.x; if (x.nan) return "NaN"; if (x.inf) return (x.neg ? "-" : "") + "Inf";
        const r = E >= 0 ? {n: x.n, d: x.d << BigInt(E)} : {n: x.n << BigInt(-E), d: x.d};
        return FFX.ratDecimal(x.neg, r.n, r.d) ?? FFX.sci(x.neg, r.n, r.d, 6);
      })();
      let err = "";
      if (FFX.isFinite(row.deq) && !row.x.nan && !row.x.inf) {
        const e = FFX.error(row.deq, row.x);
        err = e.n === 0n ? "exact" : FFX.sci(e.neg, e.n, e.d, 3);
      }
      const note = [row.saturated ? "saturated" : "", row.flushed ? "flushed to 0" : "", row.padded ? "padding" : ""]
        .filter(Boolean).join(", ");
      const tr = el("tr", {"data-code": row.code === null ? "none" : row.code.toString(), "data-index": String(i)},
        el("td", {text: String(i)}), el("td", {text: short(row.input, 14), title: row.input}),
        el("td", {text: short(quot, 14), title: quot}), el("td", {text: hex(row.code, ef)}),
        el("td", {innerHTML: fieldsHTML(row.code, ef)}), el("td", {text: FFX.text(row.element)}),
        el("td", {text: short(FFX.text(row.deq), 18), title: FFX.text(row.deq)}), el("td", {text: err}),
        el("td", {class: row.saturated ? "sat" : "", text: note}));
      body.append(tr);
    });
    table.append(body);
  }
  for (const id of ["mx-format", "mx-scale-rounding", "mx-mode"]) $(id).addEventListener("change", renderMX);
  $("mx-input").addEventListener("input", renderMX);
  $("mx-example").addEventListener("click", () => {
    exampleIndex = (exampleIndex + 1) % EXAMPLES.length;
    $("mx-input").value = EXAMPLES[exampleIndex]; renderMX();
  });

  /* test and scripting hook: the engine and a ready flag */
  window.FFX = FFX;
  setBits("bf16", 0x3dcdn);
  renderRound();
  renderMX();
  document.body.dataset.ready = "1";
})();
