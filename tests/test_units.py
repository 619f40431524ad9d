import pytest

from profkit.units import normalise, parse_number


@pytest.mark.parametrize("text,value", [("65,536", 65536.0), ("1,504.000000", 1504.0), ("0.190816", 0.190816),
                                        ("n/a", None), ("", None), ("PolicySpread", None), ("-3e2", -300.0)])
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("value,unit,out", [
    (378.46144, "Mbyte", (378461440.0, "byte")),
    (0.190816, "ms", (190816.0, "ns")),
    (12.5, "us", (12500.0, "ns")),
    (1.976577, "Ghz", (1976577000.0, "Hz")),
    (3.2, "Tbyte/s", (3.2e12, "byte/s")),
    (950.0, "Gbyte/second", (9.5e11, "byte/s")),
    (1.504, "Kbyte/cycle", (1504.0, "byte/cycle")),
    (41.2, "%", (41.2, "%")),
    (131072, "", (131072, "")),
    (12, "pass", (12, "")),
])
def test_normalise(value, unit, out):
    v, u = normalise(value, unit)
    assert u == out[1] and v == pytest.approx(out[0], rel=1e-12)
