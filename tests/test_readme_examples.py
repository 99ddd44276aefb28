"""The README's first example block: every line runs, and each example whose comment
promises a value or a contrast shows it (issue 27: the toward_zero example used to
print what the double gives too)."""

import re
from fractions import Fraction
from pathlib import Path

import floatfmt as ff

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_quickstart_block_runs():
    block = re.search(r"```python\n(import floatfmt as ff\n.*?)```", README, re.S)[1]
    exec(compile(block, "README.md", "exec"), {})  # noqa: S102 - our own documentation


def test_decimal_string_example_differs_from_its_double():
    m = re.search(r'ff\.cast\("([0-9.]+)", "fp32", rounding="toward_zero"\)\s+# ([0-9.]+)', README)
    assert m, "the README's decimal-string example is gone"
    text, shown = m[1], float(m[2])
    got = ff.cast(text, "fp32", rounding="toward_zero")
    assert got == shown
    assert ff.cast(float(text), "fp32", rounding="toward_zero") != got  # the double gives another value
    # independent: the largest fp32 value <= the decimal (fp32 has 24 significant bits)
    x = Fraction(text)
    e = 0
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    while Fraction(2) ** e > x:
        e -= 1
    q = Fraction(2) ** (e - 23)
    assert Fraction(got) == (x // q) * q


def test_readme_says_how_long_the_tests_take_and_how_to_get_cpu_torch():
    assert re.search(r"about [0-9]+-[0-9]+ minutes on 2 CPU cores", README)
    assert "download.pytorch.org/whl/cpu" in README
