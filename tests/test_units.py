import pytest

from profkit.core.units import normalise, parse_number


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
    # ncu prints a report's 1591 %/byte as 1.591 %/Kbyte (tests/data/ncu-pages, the same report both ways)
    (1.591, "%/Kbyte", (1591.0, "%/byte")),
    (17.50, "Mbyte", (17.5e6, "byte")),  # a details page's unit, chosen per row
    (2.00, "Ghz", (2e9, "Hz")),
])
def test_normalise(value, unit, out):
    v, u = normalise(value, unit)
    assert u == out[1] and v == pytest.approx(out[0], rel=1e-12)


def test_microseconds_to_exact_ns():
    from decimal import Decimal

    from profkit.core.units import us_to_ns
    # a Kineto timestamp: 16 significant digits, past what float arithmetic keeps to the ns
    assert us_to_ns(Decimal("1712195495519689.047")) == 1712195495519689047
    assert round(float("1712195495519689.047") * 1000) != 1712195495519689047
    assert us_to_ns(1669844405375546) == 1669844405375546000  # older traces: integer us
    assert us_to_ns("2.5") == 2500 and us_to_ns(Decimal("1.0005")) == 1000 and us_to_ns(Decimal("1.0015")) == 1002
    for bad in (Decimal("NaN"), Decimal("Infinity"), Decimal("1e999999999"), True, None, "soon", [1]):
        assert us_to_ns(bad) is None
