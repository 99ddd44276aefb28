"""The core subcommands of the ``floatfmt`` command: show, formats, --help."""

from __future__ import annotations

import re

import pytest

import floatfmt as ff
from floatfmt.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def field(text, name):
    m = re.search(rf"^{name}\s+(.*)$", text, re.M)
    assert m, f"no {name!r} line in:\n{text}"
    return m[1]


def test_show_bf16(capsys):
    rc, out, _ = run(capsys, "show", "0.1", "bf16")
    assert rc == 0
    assert field(out, "code").startswith("0x3dcd")
    assert "0 01111011 1001101" in field(out, "code")
    assert field(out, "stored") == "0.10009765625"
    err = field(out, "error")
    assert "+9.765625e-05 absolute" in err and "+0.2000 ulp" in err


def test_show_rounding_option(capsys):
    rc, out, _ = run(capsys, "show", "0.1", "bf16", "--rounding", "toward_zero")
    assert rc == 0 and field(out, "rounding") == "toward_zero"
    assert field(out, "code").startswith("0x3dcc")
    assert field(out, "stored") == str(ff.cast(0.1, "bf16", "toward_zero"))
    rc, out, _ = run(capsys, "show", "1e6", "e4m3", "--overflow", "saturate")
    assert field(out, "stored") == "448"


def test_show_decimal_input_is_exact(capsys):
    """The decimal 0.1 (not the double) is the input; fp64 shows the double's full digits."""
    rc, out, _ = run(capsys, "show", "0.1", "fp64")
    assert field(out, "stored") == "0.1000000000000000055511151231257827021181583404541015625"
    assert "5.551115e-18 absolute" in field(out, "error")


@pytest.mark.parametrize("value, fmt, code, stored", [
    ("-2", "fp4_e2m1", "0xc", "-2"), ("1e-7", "fp16", "0x0002", "0.00000011920928955078125"),
    ("-3", "int4", "0xd", "-3"), ("0x1.8p3", "fp16", "0x4a00", "12"), ("inf", "fp16", "0x7c00", "inf"),
    ("1e9", "e4m3", "0x7f", "nan"), ("6.5", "fp6_e2m3", "0x1d", "6.5"),
])
def test_show_codes(capsys, value, fmt, code, stored):
    rc, out, _ = run(capsys, "show", value, fmt)
    assert rc == 0
    assert field(out, "code").startswith(code)
    assert field(out, "stored") == stored


def test_show_nan_into_fp4_explains_there_is_no_code(capsys):
    rc, out, _ = run(capsys, "show", "nan", "fp4")
    assert rc == 0 and "no NaN code" in field(out, "code")


def test_formats_table(capsys):
    rc, out, _ = run(capsys, "formats")
    assert rc == 0
    lines = out.splitlines()
    for name in ff.formats():
        row = next((ln for ln in lines if ln.split()[:1] == [name]), None)
        assert row is not None, name
    fp16 = next(ln for ln in lines if ln.startswith("fp16 "))
    assert "65504" in fp16 and " 16 " in fp16 and "yes" in fp16
    e4m3 = next(ln for ln in lines if ln.startswith("fp8_e4m3 "))
    assert "448" in e4m3


@pytest.mark.parametrize("argv", [["--help"], ["show", "--help"], ["formats", "--help"]])
def test_help(capsys, argv):
    with pytest.raises(SystemExit) as ex:
        main(argv)
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: floatfmt")
    if argv[0] == "show":
        assert "--rounding" in out and "VALUE" in out.upper() and "FORMAT" in out.upper()
    if argv[0] == "--help":
        assert "show" in out and "formats" in out


def test_bad_input_gives_a_message_and_exit_code_2(capsys):
    rc, out, err = run(capsys, "show", "1", "fp7")
    assert rc == 2 and "unknown format" in err and "Traceback" not in err
    rc, out, err = run(capsys, "show", "abc", "fp16")
    assert rc == 2 and "abc" in err
    rc, out, err = run(capsys, "show", "1", "fp16", "--rounding", "sideways")
    assert rc == 2 and "nearest_even" in err
    rc, out, err = run(capsys)
    assert rc == 2 and "usage" in out


def test_show_names_only_the_fields_a_format_has(capsys):
    # E8M0 has neither a sign nor a mantissa; fp4_e2m1 has all three fields.
    assert main(["show", "3", "e8m0"]) == 0
    code_line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("code")][0]
    assert code_line.endswith("(exponent)") and "0x81" in code_line
    assert main(["show", "3", "fp4_e2m1"]) == 0
    code_line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("code")][0]
    assert code_line.endswith("(sign exponent mantissa)") and "0 10 1" in code_line
