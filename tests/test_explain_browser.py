"""The HTML of ``ff.explain`` as a student sees it: rendered in headless chromium.

String tests cannot tell whether a box is readable or a label is cut off, so each
case below is rendered in a page the size of a notebook's output area, once in a
light page and once in a dark one (a dark body with light default text, as in
JupyterLab's dark theme), a screenshot is kept per case (in ``$FLOATFMT_SCREENSHOTS``
when set, else the test's tmp_path), and the rendered DOM is checked:

* every text element is visible and has a WCAG contrast ratio >= 4.5 against its
  effective background (text colour, or ``fill`` for SVG text, blended over the
  first opaque background up the tree);
* nothing is wider than the explanation's root: the root does not scroll, and an
  element that sticks out does so inside an explicit scroll box (overflow-x auto
  or scroll) that itself fits;
* every number-line label lies inside its SVG's box, and no two labels overlap;
* no monospace word (a number, a bit string) is broken across lines.

Without chromium / chromedriver / selenium the tests skip, except with ``CI`` set,
where they fail (tests/explorer/browser.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import floatfmt as ff

from explorer.browser import start_chromium, stop_chromium

CASES = {
    "normal-bf16-0.1": lambda: ff.explain(0.1, "bf16"),
    "subnormal-bf16-1e-40": lambda: ff.explain(1e-40, "bf16"),
    "fp64-0.1": lambda: ff.explain(0.1, "fp64"),
    "long-decimal-fp64-1e-300": lambda: ff.explain(1e-300, "fp64"),
    "overflow-fp16-70000": lambda: ff.explain(70000.0, "fp16"),
    "saturate-e4m3-500": lambda: ff.explain(500.0, "fp8_e4m3", overflow="saturate"),
    "int8-minus-3": lambda: ff.explain(-3, "int8"),
    "block-mxfp4": lambda: ff.explain([7.0, 0.2, -2.6, 0.5, 1, 1.25, -0.3, 3.3, 0.01, -6.5]
                                      + [0.0] * 22, "mxfp4_e2m1"),
    "array-fp16": lambda: ff.explain(np.array([0.1, 1e-7, 7e4, -2.5]), "fp16"),
}

THEMES = {  # body background, default text colour
    "light": ("#ffffff", "#000000"),
    "dark": ("#111111", "rgba(255, 255, 255, 0.87)"),
}

OUTPUT_WIDTH = 700  # px: a notebook output area on a laptop


@pytest.fixture(scope="module")
def browser():
    driver = start_chromium()
    try:
        yield driver
    finally:
        stop_chromium(driver)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    d = os.environ.get("FLOATFMT_SCREENSHOTS")
    out = Path(d) if d else tmp_path_factory.mktemp("explain-screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _page(fragment: str, theme: str) -> str:
    bg, fg = THEMES[theme]
    return (f'<!doctype html><html><head><meta charset="utf-8"></head>'
            f'<body style="margin:16px;background:{bg};color:{fg};font-family:sans-serif;font-size:14px">'
            f'<div id="out" style="width:{OUTPUT_WIDTH}px">{fragment}</div></body></html>')


# Runs in the page; returns what it found, the checks are made in Python.
_PROBE_JS = r"""
const out = document.getElementById('out');
const root = out.firstElementChild;
const parse = s => (s.match(/[\d.]+/g) || []).map(Number);
const rgba = s => { const p = parse(s); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
function background(el) {          // blend the backgrounds up the tree until one is opaque
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = rgba(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
  }
  let acc = [255, 255, 255];
  for (const c of layers.reverse()) acc = acc.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
  return acc;
}
const isSvg = el => el instanceof SVGElement;
const texts = [];
const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  if (!n.textContent.trim()) continue;
  const el = n.parentElement, cs = getComputedStyle(el), r = el.getBoundingClientRect();
  const fg = rgba(isSvg(el) ? cs.fill : cs.color);
  texts.push({text: n.textContent.trim().slice(0, 40), tag: el.tagName, fg: fg, bg: background(el),
              w: r.width, h: r.height, visibility: cs.visibility, opacity: Number(cs.opacity),
              display: cs.display});
}
const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
const rr = root.getBoundingClientRect();
const sticking = [];
for (const el of root.querySelectorAll('*')) {
  if (isSvg(el) && el.tagName.toLowerCase() !== 'svg') continue;  // checked against the svg below
  let box = null;
  for (let a = el.parentElement; a && a !== root.parentElement; a = a.parentElement) {
    if (a !== root && scrolls(a)) { box = a; break; }
  }
  if (box) continue;               // inside a scroll box: it may be wider, the box scrolls
  const r = el.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) continue;
  if (r.right > rr.right + 1 || r.left < rr.left - 1)
    sticking.push(el.tagName + ' ' + (el.textContent || '').trim().slice(0, 40) + ' ' +
                  Math.round(r.left - rr.left) + '..' + Math.round(r.right - rr.left));
}
const labels = [];
for (const svg of root.querySelectorAll('svg')) {
  const s = svg.getBoundingClientRect();
  const boxes = Array.from(svg.querySelectorAll('text')).map(t => {
    const b = t.getBoundingClientRect();
    return {text: t.textContent, left: b.left - s.left, right: b.right - s.left,
            top: b.top - s.top, bottom: b.bottom - s.top};
  });
  labels.push({width: s.width, height: s.height, boxes: boxes});
}
const broken = [];
const w2 = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
for (let n = w2.nextNode(); n; n = w2.nextNode()) {
  const el = n.parentElement;
  if (isSvg(el) || !/monospace/.test(getComputedStyle(el).fontFamily)) continue;
  const re = /\S+/g; let m;
  while ((m = re.exec(n.textContent)) !== null) {
    const range = document.createRange();
    range.setStart(n, m.index); range.setEnd(n, m.index + m[0].length);
    const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0)
                         .map(r => Math.round(r.top)));
    if (tops.size > 1) broken.push(m[0].slice(0, 60) + ' (' + tops.size + ' lines)');
  }
}
return {rootScroll: root.scrollWidth, rootClient: root.clientWidth, rootWidth: rr.width,
        outWidth: out.getBoundingClientRect().width, texts: texts, sticking: sticking,
        labels: labels, broken: broken, svgs: root.querySelectorAll('svg').length};
"""


def _luminance(rgb) -> float:
    def ch(c):
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (ch(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(fg, bg) -> float:
    """WCAG contrast ratio of the text colour ``fg`` (rgba, blended over ``bg``) on ``bg``."""
    a = fg[3]
    shown = [fg[i] * a + bg[i] * (1 - a) for i in range(3)]
    hi, lo = sorted((_luminance(shown), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _render(driver, case: str, theme: str, tmp_path: Path, shots: Path) -> dict:
    obj = CASES[case]()
    fragment = obj._repr_html_()
    page = tmp_path / f"{case}-{theme}.html"
    page.write_text(_page(fragment, theme), encoding="utf-8")
    driver.get(page.as_uri())
    found = driver.execute_script(_PROBE_JS)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    size = driver.get_window_size()
    driver.set_window_size(size["width"], min(int(height) + 140, 6000))
    try:
        driver.find_element("id", "out").screenshot(str(shots / f"explain-{case}-{theme}.png"))
    finally:
        driver.set_window_size(size["width"], size["height"])
    return found


@pytest.mark.parametrize("theme", list(THEMES))
@pytest.mark.parametrize("case", list(CASES))
def test_explain_html_renders_readably(browser, shots, tmp_path, case, theme):
    got = _render(browser, case, theme, tmp_path, shots)
    problems = []
    # every text element visible, with enough contrast
    assert got["texts"], "nothing rendered"
    for t in got["texts"]:
        if t["w"] <= 0 or t["h"] <= 0 or t["visibility"] != "visible" or t["opacity"] <= 0:
            problems.append(f"invisible text {t['text']!r} ({t['tag']})")
        c = _contrast(t["fg"], t["bg"])
        if c < 4.5:
            problems.append(f"contrast {c:.2f} < 4.5: {t['text']!r} ({t['tag']}, "
                            f"colour {t['fg']} on {t['bg']})")
    # nothing wider than the explanation, unless inside an explicit scroll box
    if got["rootScroll"] > got["rootClient"] + 1 or got["rootWidth"] > got["outWidth"] + 1:
        problems.append(f"root overflows: scrollWidth {got['rootScroll']} > clientWidth "
                        f"{got['rootClient']} (root {got['rootWidth']}px in {got['outWidth']}px)")
    problems += [f"sticks out of the explanation: {s}" for s in got["sticking"]]
    # number-line labels inside their svg, and apart from each other
    for svg in got["labels"]:
        boxes = svg["boxes"]
        for b in boxes:
            if b["left"] < -0.5 or b["top"] < -0.5 or b["right"] > svg["width"] + 0.5 \
                    or b["bottom"] > svg["height"] + 0.5:
                problems.append(f"label {b['text']!r} cut off: {b} outside "
                                f"{svg['width']:.0f}x{svg['height']:.0f}")
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                if a["left"] < b["right"] and b["left"] < a["right"] \
                        and a["top"] < b["bottom"] and b["top"] < a["bottom"]:
                    problems.append(f"labels {a['text']!r} and {b['text']!r} overlap")
    problems += [f"monospace word broken across lines: {w}" for w in got["broken"]]
    assert not problems, f"{case} ({theme}):\n" + "\n".join(problems)


def test_cases_cover_what_the_issue_names():
    """The cases above exercise a number line (bf16 1e-40), a long exact decimal, an
    overflow and a block: guard against the cases drifting away from that."""
    assert ff.explain(1e-40, "bf16").cls == "subnormal"
    from floatfmt.teach.numtext import exact_decimal
    assert len(exact_decimal(ff.cast(1e-300, "fp64"))) > 700
    assert ff.explain(70000.0, "fp16").direction == "overflow"
    assert type(CASES["block-mxfp4"]()).__name__ == "BlockExplanation"
