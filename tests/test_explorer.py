"""The explorer page (``floatfmt explore``) in headless chromium.

Two kinds of check:

* the page's exact engine against floatfmt, through a small harness injected
  into the loaded page: every code of every format of at most 16 bits (value,
  class, neighbours, ulp, exact decimal text), thousands of decimal strings per
  format, rounding mode and overflow policy (values, midpoints, a hair above and
  below midpoints and the overflow threshold, specials, random decimals), and
  MX blocks under every MX format, scale rule and mode;
* the page as a student uses it: no console errors, clicking bits, typing
  numbers, the MX block view, and readable light and dark colours (computed
  contrast), with screenshots kept as artefacts.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.core.codec import values_to_codes
from floatfmt.teach.explorer import EXPLORER_FORMATS, EXPLORER_MODES, explorer_data, write_explorer

from explorer import cases
from explorer.browser import artefact_dir, start_chromium, stop_chromium

HARNESS = (Path(__file__).parent / "explorer" / "harness.js").read_text()
DATA = explorer_data()
TOTALS: dict[str, int] = {}


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    path = write_explorer(tmp_path_factory.mktemp("explorer") / "explorer.html")
    driver = start_chromium()
    try:
        driver.get(path.as_uri())
        _wait_ready(driver)
        yield driver
    finally:
        stop_chromium(driver)


def _wait_ready(driver):
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.ready") == "1")


def _batch(driver, reqs):
    return driver.execute_script(HARNESS + "\nreturn arguments[0].map(ffxBatch);", reqs)


def _compare(reqs, got, want, what):
    bad = []
    n = 0
    for r, g, w in zip(reqs, got, want):
        assert len(g) == len(w)
        for i, (a, b) in enumerate(zip(g, w)):
            n += 1
            if a != b:
                key = r.get("inputs", r.get("codes", r.get("blocks")))[i]
                bad.append(f"{r.get('fmt')} {r.get('mode', '')} {r.get('policy', '')} {key!r}: page {a} floatfmt {b}")
    TOTALS[what] = TOTALS.get(what, 0) + n
    assert not bad, f"{len(bad)} mismatches of {n}:\n" + "\n".join(bad[:20])
    return n


# ------------------------------------------------------------------ the engine against floatfmt
def test_page_loads_without_console_errors(page):
    logs = [e for e in page.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert logs == []
    # nothing fetched: the page is one self-contained file
    assert page.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert page.execute_script("return Object.keys(FFX.formats)") == list(EXPLORER_FORMATS)


def test_explorer_offers_every_small_format_and_deterministic_mode():
    small = [n for n in ff.formats() if ff.get_format(n).bits <= 16]
    assert set(EXPLORER_FORMATS) == set(small) | {"fp32", "tf32"}
    assert set(EXPLORER_MODES) == {m for m in ff.MODES if not m.startswith("stochastic")}


@pytest.mark.parametrize("name", EXPLORER_FORMATS)
def test_rounding_matches_floatfmt(page, name):
    """Every mode and valid overflow policy on the same >= 1000 decimal strings."""
    inputs = cases.round_inputs(name)
    assert len(inputs) >= 1000
    reqs, want = [], []
    for mode in EXPLORER_MODES:
        for policy in DATA["formats"][name]["overflows"]:
            reqs.append({"kind": "round", "fmt": name, "mode": mode, "policy": policy, "inputs": inputs})
            want.append(cases.expected_round(inputs, name, mode, policy))
    n = _compare(reqs, _batch(page, reqs), want, "round")
    assert n >= 6 * len(inputs)


@pytest.mark.parametrize("name", EXPLORER_FORMATS)
def test_decoding_matches_floatfmt(page, name):
    """Value, class, next_up, next_down, ulp and exact decimal of every code (<= 16 bits)
    or of 4000 random codes and the special ones (fp32, tf32)."""
    codes = cases.decode_codes(name)
    reqs = [{"kind": "decode", "fmt": name, "codes": codes}]
    want = [[" ".join(e) for e in cases.expected_decode(codes, name)]]
    _compare(reqs, _batch(page, reqs), want, "decode")


@pytest.mark.parametrize("mx", list(DATA["mx"]))
def test_mx_blocks_match_quantize(page, mx):
    """Shared E8M0 scale code and element codes against ff.quantize, every scale rule
    and mode.  Element codes of a NaN-scale block carry no value (they all decode to
    NaN): there the page stores 0 and only the scale code is compared."""
    rng = random.Random(f"mx-{mx}")
    reqs, want = [], []
    for sr in DATA["mx"][mx]["scale_roundings"]:
        for mode in EXPLORER_MODES:
            blocks = cases.mx_blocks(mx, rng, 8)
            reqs.append({"kind": "mx", "mx": mx, "scale_rounding": sr, "mode": mode, "blocks": blocks})
            want.append(cases.expected_mx(blocks, mx, sr, mode))
    got = _batch(page, reqs)
    for g_list, w_list in zip(got, want):
        for j, (g, w) in enumerate(zip(g_list, w_list)):
            if w.startswith("255:"):
                assert g.startswith("255:")
                assert set(g[4:].split(",")) == {"0"}
                g_list[j] = w_list[j] = "255"
    _compare(reqs, got, want, "mx")


# ------------------------------------------------------------------ the page as a student uses it
def _exact_text(v: float) -> str:
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "-Inf" if v < 0 else "+Inf"
    return format(Decimal(float(v)), "f")


def _select(driver, sel_id, value):
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element("id", sel_id)).select_by_value(value)


def _type(driver, el_id, text):
    from selenium.webdriver.common.keys import Keys
    el = driver.find_element("id", el_id)
    el.send_keys(Keys.CONTROL, "a")  # select all, then type over it (as a student would)
    el.send_keys(Keys.DELETE)
    el.send_keys(text)


@pytest.mark.parametrize("name,bits_to_click", [
    ("fp8_e4m3", [6, 5, 4, 3, 0, 2, 1]),        # walk up to 0x7f (NaN) and back to 0x79
    ("bf16", [15, 14, 7, 0]),
    ("fp32", [30, 29, 22, 0, 31]),
    ("fp16", [14, 13, 12, 11, 10]),              # exponent all ones: Inf
    ("e8m0", [7, 0, 1]),
    ("int4", [3, 0]),
    ("fp4_e2m1", [2, 1, 0, 3]),
    ("fp8_e5m2fnuz", [7, 2]),                    # 0x80 is the only NaN
])
def test_clicking_a_bit_shows_floatfmts_decode(page, name, bits_to_click):
    f = ff.get_format(name)
    _select(page, "bits-format", name)
    _type(page, "code-hex", "0x0\n")  # switching formats keeps the value; start from code 0
    code = int(page.find_element("id", "code-hex").get_attribute("value"), 16)
    assert code == 0
    for bit in bits_to_click:
        page.find_element("css selector", f"#bits .bit[data-bit='{bit}']").click()
        code ^= 1 << bit
        shown = int(page.find_element("id", "code-hex").get_attribute("value"), 16)
        assert shown == code
        v = ff.decode(code, f)
        assert page.find_element("id", "bits-value").text == _exact_text(v), (name, hex(code))
        assert page.find_element("id", "bits-class").text == ff.classify(v, f)
        if np.isfinite(v):
            up, down = ff.next_up(v, f), ff.next_down(v, f)
            assert page.find_element("id", "bits-up").get_attribute("data-value") == _exact_text(up)
            assert page.find_element("id", "bits-down").get_attribute("data-value") == _exact_text(down)
            assert page.find_element("id", "bits-ulp").get_attribute("data-value") == _exact_text(ff.ulp(v, f))
        bit_text = "".join(b.text for b in page.find_elements("css selector", "#bits .bit"))
        assert bit_text == format(code, f"0{f.bits}b")
    TOTALS["clicks"] = TOTALS.get("clicks", 0) + len(bits_to_click)


@pytest.mark.parametrize("name,text", [("bf16", "0.1"), ("fp8_e4m3", "-465"), ("fp16", "65520"),
                                       ("e8m0", "0.75"), ("int8", "-128.5"), ("tf32", "1.00048828125")])
def test_typing_a_number_in_the_bits_panel_sets_floatfmts_code(page, name, text):
    f = ff.get_format(name)
    _select(page, "bits-format", name)
    _type(page, "bits-number", text + "\n")
    code = int(page.find_element("id", "code-hex").get_attribute("value"), 16)
    assert code == ff.encode(text, f)
    assert page.find_element("id", "bits-value").text == _exact_text(ff.decode(code, f))
    assert page.find_element("id", "bits-formula").text.endswith(_exact_text(ff.decode(code, f))
                                                                if f.kind == "int" or
                                                                np.isfinite(ff.decode(code, f)) else "")


def test_neighbour_buttons_step_through_codes(page):
    f = ff.get_format("fp8_e4m3")
    _select(page, "bits-format", "fp8_e4m3")
    _type(page, "code-hex", "0x7d\n")
    for _ in range(3):  # 0x7d -> 0x7e (448) -> no further: NaN, the button is disabled
        page.find_element("id", "bits-up").click()
    assert page.find_element("id", "code-hex").get_attribute("value") == "0x7e"
    assert page.find_element("id", "bits-value").text == "448"
    assert not page.find_element("id", "bits-up").is_enabled()
    page.find_element("id", "bits-down").click()
    assert page.find_element("id", "bits-value").text == _exact_text(ff.next_down(448.0, f))


TRICKY = ["0.1", "1.00390625", "1.003906250000000000000001", "1.00390624999999999999999", "65519.99999999999",
          "65520", "-65520.000000000000001", "448", "464", "-464.0000000001", "239.99999999", "1e-8",
          "5.960464477539063e-8", "2.98023223876953125e-8", "2.98023223876953125000001e-8", "-2.5", "0.25",
          "3.4028235677973366e38", "1e39", "-0", "nan", "-inf", "1e-500", "-1e-9999", "300", "-129.5", "7.75", "0x1.8p-1"]


def _same_to_digits(visible, value, f):
    """A long value is shown in scientific notation with ceil(p log10 2) + 1 significant
    digits for p significant bits (cut, not rounded: enough to tell neighbours apart), never
    with an ellipsis (issue 27)."""
    if "\u2026" in visible or "e" not in visible:
        return False
    import math
    digits = min(17, math.ceil((f.mbits + 1) * math.log10(2)) + 1) if f.kind == "float" else 17
    v, shown = Fraction(value), Fraction(Decimal(visible))
    if v == 0 or (v < 0) != (shown < 0) or len(visible.split("e")[0].lstrip("-").replace(".", "")) != digits:
        return False
    exp = int(visible.split("e")[1])
    return 0 <= abs(v) - abs(shown) < Fraction(10) ** (exp - digits + 1)


@pytest.mark.parametrize("policy", ["default", "saturate", "inf", "nan", "wrap"])
def test_typed_numbers_show_floatfmts_values(page, policy):
    _select(page, "num-overflow", policy)
    checked = 0
    for i, s in enumerate(TRICKY):
        if i < 3:
            _type(page, "num-input", s)  # typed key by key
        else:  # pasted: one input event (typing every string key by key costs CI time)
            page.execute_script("const e = document.getElementById('num-input'); e.value = arguments[0];"
                                "e.dispatchEvent(new Event('input'));", s)
        cells = page.execute_script("""return Array.from(document.querySelectorAll('#round-table td[data-fmt]')).map(
            td => [td.dataset.fmt, td.dataset.mode, td.dataset.code, td.dataset.value || '', td.dataset.error || '',
                   (td.querySelector('.val') || td).textContent]);""")
        assert len(cells) == len(EXPLORER_FORMATS) * len(EXPLORER_MODES)
        for name, mode, code, value, err, visible in cells:
            f = ff.get_format(name)
            valid = DATA["formats"][name]["overflows"]
            pol = None if policy == "default" else policy
            if pol is not None and pol not in valid:
                assert code == "n/a"
                continue
            want = ff.cast(s, f, rounding=mode, overflow=pol)
            assert value == _exact_text(want), (s, name, mode, policy)
            assert visible == value or _same_to_digits(visible, value, f), (visible, value)
            if np.isnan(want) and not f.has_nan:
                assert code == "none"
            else:
                # the code of floatfmt's cast value (ff.encode with overflow="wrap" reads huge
                # decimal integers through float64 first, so it can differ from cast there)
                assert int(code) == int(values_to_codes(np.array([want]), f)[0]), (s, name, mode, policy)
                if pol != "wrap":
                    assert int(code) == ff.encode(s, f, rounding=mode, overflow=pol), (s, name, mode, policy)
            if np.isfinite(want) and err:
                from floatfmt.core.intake import to_fraction
                assert Fraction(err) == Fraction(want) - to_fraction(s)
            checked += 1
    TOTALS["typed cells"] = TOTALS.get("typed cells", 0) + checked
    assert checked > 0


def test_cell_detail_shows_code_and_error(page):
    _select(page, "num-overflow", "default")
    _type(page, "num-input", "0.1")
    page.find_element("css selector", "#round-table td[data-fmt='bf16'][data-mode='nearest_even']").click()
    text = page.find_element("id", "round-detail").text
    assert "0x3dcd" in text and "0.10009765625" in text
    assert "0.00009765625" in text  # bf16(0.1) - 0.1, exactly
    _type(page, "num-input", "not a number")
    assert "cannot read" in page.find_element("id", "num-error").text


MX_UI = [("mxfp4_e2m1", "floor", "nearest_even", "7.0 0.2 -2.6"),
         ("mxfp8_e4m3", "floor", "nearest_even", ", ".join(str(i * 0.37) for i in range(1, 33))),
         ("mxfp6_e3m2", "rceil", "toward_zero", "1e-3, -250, 3.14159, 0.1, 17"),
         ("mxint8", "even", "up", "0.3, -0.7, 1.9999, 100.125, -3e-5"),
         ("mxfp8_e5m2", "ceil", "nearest_away", "65536, 1, -0.001, 3.75, 1e-9"),
         ("mxfp4_e2m1", "floor", "nearest_even", "1, inf, 2")]


@pytest.mark.parametrize("mx,sr,mode,text", MX_UI)
def test_mx_block_view_matches_quantize(page, mx, sr, mode, text):
    _select(page, "mx-format", mx)
    _select(page, "mx-scale-rounding", sr)
    _select(page, "mx-mode", mode)
    _type(page, "mx-input", text)
    items = [t for t in text.replace(",", " ").split() if t]
    q = ff.quantize(np.array(items + ["0"] * (32 - len(items)), dtype=object), mx, rounding=mode,
                    scale_rounding=sr)
    shown = page.find_element("id", "mx-summary").get_attribute("data-scale-code")
    assert int(shown) == int(q.scale_codes[0])
    rows = page.execute_script("return Array.from(document.querySelectorAll('#mx-table tbody tr')).map(r => r.dataset.code)")
    assert len(rows) == 32
    if int(q.scale_codes[0]) != 0xFF:
        assert [int(c) for c in rows] == [int(c) for c in q.codes]
        # the saturated / flushed notes are explain_block's flags
        from floatfmt.teach.explain.block import explain_block
        padded = np.array(items + ["0"] * (32 - len(items)), dtype=object)
        b = explain_block(q, 0, x=padded, rounding=mode)
        notes = page.execute_script("return Array.from(document.querySelectorAll('#mx-table tbody tr'))"
                                    ".map(r => r.cells[8].textContent)")
        assert ["saturated" in n for n in notes] == b.saturated
        assert ["flushed" in n for n in notes] == b.flushed
        assert [r.split()[0] for r in page.find_element("id", "mx-table").text.splitlines()[1:]] == \
            [str(i) for i in range(32)]
    summary = page.find_element("id", "mx-summary").text
    assert (f"0x{int(q.scale_codes[0]):02x}") in summary


# ------------------------------------------------------------------ colours
def _luminance(rgb):
    def ch(c):
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (ch(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a, b):
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


_PAIRS_JS = """
const parse = s => s.match(/[\\d.]+/g).slice(0, 4).map(Number);
const bgOf = el => { for (let e = el; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor;
  const p = parse(c); if (p.length < 4 || p[3] > 0) return p; } return [255, 255, 255]; };
const out = [];
for (const sel of arguments[0]) {
  for (const el of document.querySelectorAll(sel)) {
    if (!el.offsetParent && el !== document.body) continue;
    out.push([sel, parse(getComputedStyle(el).color), bgOf(el)]);
    break;
  }
}
return out;
"""
_SELECTORS = ["body", "h1", ".lede", ".bit.sign", ".bit.exponent", ".bit.mantissa", ".bit.integer", ".facts th",
              "#bits-value", "#round-table th", "#round-table td.cell .val", "#round-table td.cell .err",
              "#round-detail", ".detail .s", ".detail .e", ".detail .m", "#num-input", "select", "button",
              "#mx-table td", ".sat", ".error", "footer"]


def _full_page_screenshot(driver, path):
    """The whole page, not only the viewport (the window grows to the page's height)."""
    w, h = driver.get_window_size()["width"], driver.get_window_size()["height"]
    full = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(w, min(int(full) + 200, 6000))
    try:
        driver.save_screenshot(str(path))
    finally:
        driver.set_window_size(w, h)


@pytest.mark.parametrize("theme", ["light", "dark", "system-dark"])
def test_colour_schemes_are_readable(page, theme):
    out = artefact_dir()
    if theme == "system-dark":
        page.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        _select(page, "theme", "auto")
    else:
        _select(page, "theme", theme)
    _select(page, "bits-format", "fp8_e4m3")
    _type(page, "code-hex", "0x5b\n")
    _select(page, "num-overflow", "saturate")
    _type(page, "num-input", "464.5")
    page.find_element("css selector", "#round-table td[data-fmt='fp8_e4m3'][data-mode='nearest_even']").click()
    _select(page, "mx-format", "mxfp4_e2m1")
    _type(page, "mx-input", "7.0 0.2 -2.6 0.5 1 1.25 -0.3 3.3 0.01 -6.5")
    pairs = page.execute_script(_PAIRS_JS, _SELECTORS)
    found = {p[0] for p in pairs}
    assert {"body", ".bit.sign", ".bit.exponent", ".bit.mantissa", "#round-table td.cell .val", "#round-detail",
            ".sat"} <= found, found
    low = [(sel, fg, bg, round(_contrast(fg, bg), 2)) for sel, fg, bg in pairs if _contrast(fg, bg) < 4.5]
    assert low == [], low
    bg = pairs[0][2]
    assert (_luminance(bg) > 0.5) == (theme == "light")
    _full_page_screenshot(page, out / f"explorer-{theme}.png")
    page.execute_script("window.scrollTo(0, 0)")
    page.find_element("id", "bits-section").screenshot(str(out / f"explorer-bits-{theme}.png"))
    if theme == "system-dark":
        page.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_report_coverage(page):
    """Not a check: prints how much was compared (see the issue's coverage note)."""
    print("\nexplorer coverage:", json.dumps(TOTALS))


def test_browser_tests_fail_instead_of_skipping_in_ci(monkeypatch):
    from explorer.browser import unavailable
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the browser tests"):
        unavailable("no chromium here")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no chromium here"):
        unavailable("no chromium here")


def test_cli_explore_writes_a_self_contained_page(tmp_path, capsys, monkeypatch):
    from floatfmt import cli
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url))
    assert cli.main(["explore", "--out", str(tmp_path / "x.html")]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == tmp_path / "x.html" and opened == [path.resolve().as_uri()]
    html = path.read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html  # works offline: nothing to fetch
    assert json.loads(html.split('id="ffx-data">')[1].split("</script>")[0]) == json.loads(json.dumps(DATA))
    assert cli.main(["explore", "--out", str(tmp_path / "dir"), "--no-open"]) == 0
    assert (tmp_path / "dir" / "explorer.html").exists() and len(opened) == 1


# ------------------------------------------------------------------ issue 27: phone and desktop
def test_switching_the_format_keeps_the_value(page):
    _select(page, "bits-format", "bf16")
    _type(page, "code-hex", "0x3dcd\n")                    # bf16's 0.1
    v = ff.decode(0x3DCD, "bf16")
    for name in ("fp16", "fp8_e4m3", "fp32", "int8"):
        _select(page, "bits-format", name)
        code = int(page.find_element("id", "code-hex").get_attribute("value"), 16)
        assert code == ff.encode(v, name), name                # v rounded into the new format
        v = ff.decode(code, name)


def test_a_bad_code_says_why(page):
    _select(page, "bits-format", "fp8_e4m3")
    _type(page, "code-hex", "0x1ff\n")
    msg = page.find_element("id", "bits-error").text
    assert page.find_element("id", "code-hex").get_attribute("aria-invalid") == "true"
    assert "not a fp8_e4m3 code" in msg and "0xff" in msg
    _type(page, "code-hex", "0x38\n")
    assert page.find_element("id", "bits-error").text == ""


def test_bits_have_field_captions_and_weights(page):
    _select(page, "bits-format", "fp16")
    caps = [c.text for c in page.find_elements("css selector", "#bits .bitcol .cap") if c.text.strip()]
    assert caps == ["sign", "exponent (5)", "mantissa (10)"]
    w = [c.text for c in page.find_elements("css selector", "#bits .bitcol .w")]
    assert w == ["\u00b1", "16", "8", "4", "2", "1"] + [f"2^-{j}" for j in range(1, 11)]


def test_url_holds_the_value_to_share(page, tmp_path):
    _select(page, "bits-format", "fp16")
    _type(page, "code-hex", "0x3c01\n")
    h = page.execute_script("return location.hash")
    assert "fmt=fp16" in h and "code=0x3c01" in h
    url = page.current_url.split("#")[0] + "#fmt=fp8_e5m2&code=0x3c&x=1e-3"
    page.get(url)
    page.refresh()
    _wait_ready(page)
    assert page.find_element("id", "bits-format").get_attribute("value") == "fp8_e5m2"
    assert page.find_element("id", "bits-value").text == _exact_text(ff.decode(0x3C, "fp8_e5m2"))
    assert page.find_element("id", "num-input").get_attribute("value") == "1e-3"


def test_long_values_are_not_cut_with_an_ellipsis(page):
    _select(page, "num-overflow", "default")
    _type(page, "num-input", "1.1920928955078125e-7")
    texts = page.execute_script("return Array.from(document.querySelectorAll('#round-table .val, #mx-table td'))"
                                ".map(e => e.textContent)")
    assert texts and not any("\u2026" in t for t in texts)


_LAYOUT_JS = r"""
const box = e => e.getBoundingClientRect();
const overlap = (a, b) => !(a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top);
const split = [];  // words drawn on more than one line
for (const el of document.querySelectorAll('.facts td, .grid th, .lede, .controls label')) {
  const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = w.nextNode(); n; n = w.nextNode()) {
    for (const m of n.textContent.matchAll(/[A-Za-z]{4,}/g)) {
      const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
      const tops = new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top)));
      if (tops.size > 1) split.push(m[0]);
    }
  }
}
const sc = document.querySelector('#round-table').parentElement;
const title = document.createRange(); title.selectNodeContents(document.querySelector('h1'));
return {overlap: overlap(title.getBoundingClientRect(), box(document.querySelector('.theme'))),
        split, roundScroll: sc.scrollWidth - sc.clientWidth, width: window.innerWidth};
"""


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 390])
def test_layout_at_desktop_and_phone_width(page, width, theme):
    """Issue 27 item 8: both widths in both colour schemes: no overlap, no word broken across
    lines, no sideways scroll of the rounding table, and every text readable (contrast >= 4.5)."""
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                         {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
    try:
        _select(page, "theme", theme)
        _select(page, "bits-format", "bf16")
        _type(page, "code-hex", "0x3dcd\n")
        _type(page, "num-input", "0.1")
        _select(page, "mx-format", "mxfp4_e2m1")
        _type(page, "mx-input", "7.0 0.2 -2.6 0.5 1 1.25 -0.3 3.3 0.01 -6.5")
        r = page.execute_script(_LAYOUT_JS)
        assert r["width"] == width
        pairs = page.execute_script(_PAIRS_JS, _SELECTORS)
        assert (_luminance(pairs[0][2]) > 0.5) == (theme == "light"), pairs[0]
        low = [(sel, fg, bg, round(_contrast(fg, bg), 2)) for sel, fg, bg in pairs if _contrast(fg, bg) < 4.5]
        page.execute_script("window.scrollTo(0, 0)")
        page.save_screenshot(str(artefact_dir() / f"explorer-{width}px-{theme}.png"))
        full = int(page.execute_script("return document.documentElement.scrollHeight"))
        page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                             {"width": width, "height": min(full, 6000), "deviceScaleFactor": 1, "mobile": width < 600})
        page.save_screenshot(str(artefact_dir() / f"explorer-{width}px-{theme}-full.png"))
        assert low == [], low
        assert not r["overlap"], "the title overlaps the colour selector"
        assert r["split"] == [], f"words broken across lines: {r['split']}"
        assert r["roundScroll"] <= 1, "the rounding table needs a sideways scroll"
    finally:
        page.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        _select(page, "theme", "light")
