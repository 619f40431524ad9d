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
