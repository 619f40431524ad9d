"""profkit.outputs.jsonstream: json.dumps(obj, indent=...)'s text, a piece at a time."""

import json
import random

import pytest

from profkit.outputs import jsonstream

SCALARS = [
    1.5,
    -0.0,
    1e300,
    2.5e-10,
    float("nan"),
    float("inf"),
    -float("inf"),
    3,
    10**30,
    True,
    False,
    None,
    "",
    "a, b",
    'x\n\u00e9\x1b"',
]


def _value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 3 or r < 0.4:
        return rng.choice(SCALARS)
    if r < 0.55:  # a list of numbers, split over chunks
        return [rng.choice(SCALARS[:12]) for _ in range(rng.randrange(0, 12))]
    if r < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 7))]
    if r < 0.78:
        return tuple(_value(rng, depth + 1) for _ in range(rng.randrange(0, 5)))
    if r < 0.93:
        return {
            rng.choice(["k", "a, b", "\u00e9", "x\ny"]) + str(i): _value(rng, depth + 1)
            for i in range(rng.randrange(0, 5))
        }
    return {1: 2, 2.5: [1, 2], None: {"a": [], "b": {}}, False: "x"}  # keys json turns into text


@pytest.mark.parametrize("indent", [2, 0, 4])
def test_the_text_of_json_dumps(monkeypatch, indent):
    monkeypatch.setattr(jsonstream, "CHUNK", 3)
    monkeypatch.setattr(jsonstream, "PIECE", 50)
    rng = random.Random(7)
    for _ in range(1500):
        obj = _value(rng)
        got = list(jsonstream.pieces(obj, indent))
        assert "".join(got) == json.dumps(obj, indent=indent)
        assert all(len(p) >= 50 for p in got[:-1])  # gathered into pieces of PIECE or more


def test_a_long_list_of_floats_is_handed_on_a_chunk_at_a_time(monkeypatch):
    monkeypatch.setattr(jsonstream, "CHUNK", 100)
    monkeypatch.setattr(jsonstream, "PIECE", 1000)
    xs = [i / 7 for i in range(10_000)]
    xs[150], xs[480] = float("nan"), -float("inf")  # json's NaN and -Infinity amid floats
    obj = [{"a": xs, "b": {"c": xs[:10], "d": None}}, []]
    got = list(jsonstream.pieces(obj))
    assert "".join(got) == json.dumps(obj, indent=2)
    assert len(got) > 100 and max(map(len, got)) < 1000 + 100 * 30  # a piece, then at most a chunk's text


def test_what_json_refuses_is_refused():
    with pytest.raises(TypeError):
        "".join(jsonstream.pieces({"a": [1.0, object()]}))


def test_whole_thousandths_are_written_as_their_repr(monkeypatch):
    """Times in us made from integer ns are written digit by digit: every width of whole part,
    fractions with trailing zeros, and values that are not whole thousandths (or -0.0, or
    1e12 and up) beside them, all as json.dumps writes them."""
    monkeypatch.setattr(jsonstream, "CHUNK", 64)
    rng = random.Random(11)
    ks = [0, 1, 5, 10, 50, 100, 999, 1000, 1001, 1010, 1100, 10**15 - 1] + [
        rng.randrange(10 ** rng.randrange(1, 16)) for _ in range(3000)
    ]
    xs = [k / 1e3 for k in ks]
    assert jsonstream._thousandths(xs[:64], ", ") == ", ".join(map(repr, xs[:64]))  # (the digit path itself)
    for odd in (-0.0, 0.0001, 1 / 3, 1e12, 2.5e-10, -1.0, float("nan")):
        assert jsonstream._thousandths([*xs[:10], odd], ", ") is None
        ys = xs[:500] + [odd] + xs[500:]
        assert "".join(jsonstream.pieces({"a": ys})) == json.dumps({"a": ys}, indent=2)
    assert "".join(jsonstream.pieces(xs, 4)) == json.dumps(xs, indent=4)
