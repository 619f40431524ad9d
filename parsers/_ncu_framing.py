"""Is an `.ncu-rep` whole? Its own framing says, before NVIDIA's reader quietly returns fewer
kernels from a cut file (it does: a copy one byte short loaded 39 of 40).

The layout, the same in every report seen (ncu 2022.3, 2024.1, 2025.3):

    "NVR\\0"  then frames  [uint32 little-endian length][protobuf message of that length]
    frame 0           version                      {1: 7}
    then blocks       a header frame               {1: kind, 2: ..., 5: payload bytes, ...}
                      and, when the header's field 5 is N > 0, one payload frame of N - 4 bytes
                      (a module, a profiled launch, ...)

A whole file ends exactly where its last block ends. A cut inside a frame, or between a
header and the payload it announces, is caught here; a cut exactly between two blocks leaves
a well-formed report of fewer launches, which no framing can tell from a whole one (ncu writes
no launch count and no end marker): docs/reliability.md says so.
"""

from __future__ import annotations

import struct
from pathlib import Path

from profkit.core.unpack import varint

MAGIC = b"NVR\x00"
# what the framing cannot see, said with every load (docs/reliability.md)
CAVEAT = (
    ".ncu-rep records no launch count: a copy cut exactly between two launches would look whole "
    "(cuts anywhere else are refused)"
)


FACTS_END = 4  # the host, the session fact every ncu version writes last but one (2022.3+) or last


def header_fields(header: bytes) -> dict[int | str, int]:
    """The varint fields of a block header (1: kind, 2: ..., 5: payload bytes), and as "fact"
    the field number that opens its inline message (field 3: which session fact it holds).
    ValueError when it is not protobuf."""
    i = 0
    out: dict[int | str, int] = {}
    while i < len(header):
        key, i = varint(header, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            out[field], i = varint(header, i)
        elif wire == 2:
            n, i = varint(header, i)
            if field == 3 and n and i + n <= len(header):
                out["fact"] = varint(header, i)[0] >> 3
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(header):
            raise ValueError("field runs past the header")
    return out


def check(path: Path) -> str | None:
    """None when the file's framing is whole, else one line saying where it breaks."""
    with open(path, "rb") as f:
        return check_stream(f, path.stat().st_size)


def check_stream(f, size: int) -> str | None:
    """check() of the first `size` bytes of a binary file object (never reads past them)."""
    if size < 4 or f.read(4) != MAGIC:
        return "not an Nsight Compute report (no NVR header)"
    off = 4

    def frame(what: str) -> tuple[int, int] | str:
        nonlocal off
        if off + 4 > size:
            return f"truncated: the file ends inside the length of {what} at byte {off}"
        head = f.read(4)
        n = struct.unpack("<I", head)[0]
        if off + 4 + n > size:
            short = off + 4 + n - size
            return (
                f"truncated: {what} at byte {off} announces {n} bytes, the file ends "
                f"{short} byte{'s' if short > 1 else ''} early ({size} bytes)"
            )
        start = off + 4
        off = start + n
        return start, n

    got = frame("the version frame")
    if isinstance(got, str):
        return got
    f.seek(off)
    block = 0
    kinds: set = set()
    facts: list[int] = []
    last_kind = None
    while off < size:
        got = frame(f"block {block}'s header")
        if isinstance(got, str):
            return got
        start, n = got
        f.seek(start)
        try:
            fields = header_fields(f.read(n))
        except ValueError as e:
            return f"block {block}'s header at byte {start - 4} is not readable ({e}): corrupt"
        want = fields.get(5, 0)
        last_kind = (fields.get(1, 0), fields.get(2, 0), bool(want))
        kinds.add(last_kind)
        if last_kind == (0, 0, False) and "fact" in fields:
            facts.append(fields["fact"])
        if want:
            if off == size:
                return (
                    f"truncated: block {block}'s header announces {want} bytes of data, "
                    f"the file ends right after the header"
                )
            f.seek(off)
            at = off
            got = frame(f"block {block}'s data")
            if isinstance(got, str):
                return got
            if got[1] + 4 != want:
                return (
                    f"block {block}'s data at byte {at} holds {got[1] + 4} bytes, its header announced {want}: corrupt"
                )
        f.seek(off)
        block += 1
    # ncu writes a module (kind 1, with data) just before the first launch that runs its code,
    # and the session's facts (headers without data) right after the first launch
    if last_kind == (1, 0, True):
        return "truncated: the file ends with a code module and not the launch that follows it"
    # ... as one group: device (6), versions (8, 8, ...), 5, host (4), and from 2022.3 on the
    # tool's install folder (11): seen in 22 public reports of ncu 2020.3 to 2025.3. A cut before
    # the host is refused; one between the host and the install folder loses no launch data
    if (0, 1, True) in kinds and FACTS_END not in facts:
        return (
            "truncated: the session facts (device, driver, versions) ncu writes after the first launch "
            "are missing or incomplete"
        )
    return None
