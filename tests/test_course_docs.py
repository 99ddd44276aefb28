"""The worked example of docs/course.md runs and does what the text says."""

import re
from pathlib import Path

from floatfmt import course

DOC = Path(__file__).resolve().parent.parent / "docs" / "course.md"


def test_worked_example_runs(capsys):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)[1]
    ns = {}
    exec(compile(code, str(DOC), "exec"), ns)  # noqa: S102 - our own documentation
    assert capsys.readouterr().out.startswith("PASS [one-plus-small]")
    ex = course.exercise("one-plus-small")
    assert ex.points == 2
    # the exact sum is caught by the named mistake, for a student whose version rounds it away
    for s in range(40):
        p = course.variant("one-plus-small", s)
        import floatfmt as ff
        if ff.cast(1 + 2.0 ** -p["k"], p["fmt"]) != 1 + 2.0 ** -p["k"]:
            r = course.check("one-plus-small", 1 + 2.0 ** -p["k"], student=s, quiet=True)
            assert not r and "exact sum" in r.message
            break
    else:
        raise AssertionError("no variant rounds")
    course.registry._REGISTRY.pop("one-plus-small")
