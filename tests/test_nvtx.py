from profkit.nvtx import project, range_paths


def test_nested_push_pop_and_start_end():
    ranges = [
        (None, "outer", "push_pop", 0, 100, 1, 1),
        (None, "inner", "push_pop", 10, 20, 1, 1),
        (None, "later", "push_pop", 30, 40, 1, 1),
        ("d", "window", "start_end", 25, 60, 1, 1),
        (None, "other_thread", "push_pop", 0, 100, 1, 2),
    ]
    calls = [(0, 1, 1, 15), (1, 1, 1, 22), (2, 1, 1, 35), (3, 1, 1, 200), (4, 1, 2, 50), (5, 1, 1, 20)]
    p = project(ranges, calls)
    assert p[0] == ("inner", "outer/inner")
    assert p[1] == ("outer", "outer")          # inner closed at 20
    assert p[2] == ("later", "outer/window/later")
    assert p[3] == (None, None)
    assert p[4] == ("window", "other_thread/window")  # start/end ranges are process-wide
    assert p[5] == ("inner", "outer/inner")     # a call at the closing instant is still inside
    assert range_paths(ranges) == [(0, "outer"), (1, "outer/inner"), (1, "outer/later"), (0, "window"),
                                   (0, "other_thread")]


def test_unterminated_range_encloses_to_the_end():
    p = project([(None, "open", "push_pop", 5, None, 1, 1)], [(0, 1, 1, 10**12)])
    assert p[0] == ("open", "open")
