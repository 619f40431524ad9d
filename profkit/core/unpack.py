"""Bounded decompression: a compressed report is unpacked only when its whole size is known
and fits, so a 1.5 MB file cannot write 10 GB (a decompression bomb) or fill the disk; a
.gz read as a stream stops at the same ratio.

xz: the stream's own index says how large the data is (read from the end of the file before
anything is written); the size must stay under `RATIO` times the compressed size and leave
room on the disk, and unpacking stops the moment the data grows past what the index said.
The xz stream check (CRC) and index are verified by lzma as it reads: a cut or damaged stream
is refused, never half-read.
"""

from __future__ import annotations

import gzip
import io
import lzma
import shutil
import struct
import zlib
from pathlib import Path

from profkit.core.errors import BadInput

# real reports compress up to 143x (an ncu "full" report of small kernels; most 40-47x):
# 1000x is far above any report seen and far below a bomb's 7000x
RATIO = 1000
FLOOR = 64 << 20  # any file may unpack to 64 MB
RESERVE_FRACTION = 0.05  # leave 5 % of the temp file system free (at most 1 GiB of it)
XZ_MAGIC = b"\xfd7zXZ\x00"
CHUNK = 1 << 20


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def varint(b: bytes, i: int) -> tuple[int, int]:
    """(value, next offset) of the unsigned LEB128 number at b[i] (xz's index and protobuf,
    which .ncu-rep blocks are framed with, both write them); ValueError past the end of b or
    over 63 bits."""
    out = shift = 0
    for _ in range(9):
        if i >= len(b):
            raise ValueError("the bytes end inside a number")
        x = b[i]
        i += 1
        out |= (x & 0x7F) << shift
        shift += 7
        if x < 0x80:
            return out, i
    raise ValueError("number over 63 bits")


def xz_size(path: Path) -> int:
    """The uncompressed size an .xz file declares: the sum over its streams' indexes, read
    from the end. ValueError when the tail is not a whole xz stream (cut, or not xz)."""
    size = path.stat().st_size
    total = 0
    with open(path, "rb") as f:
        f.seek(0)
        if f.read(6) != XZ_MAGIC:
            raise ValueError("no xz header")
        end = size
        while end > 0:
            f.seek(end - 4 if end >= 4 else 0)
            if end >= 4 and f.read(4) == b"\0\0\0\0":  # stream padding between streams
                end -= 4
                continue
            if end < 24:
                raise ValueError("too short for an xz stream")
            f.seek(end - 12)
            footer = f.read(12)
            if footer[10:12] != b"YZ":
                raise ValueError("no xz stream footer at the end (truncated?)")
            if zlib.crc32(footer[4:10]) != struct.unpack("<I", footer[:4])[0]:
                raise ValueError("xz stream footer fails its check")
            index_size = (struct.unpack("<I", footer[4:8])[0] + 1) * 4
            if index_size > end - 24:
                raise ValueError("xz index larger than the stream")
            f.seek(end - 12 - index_size)
            index = f.read(index_size)
            if index[0] != 0 or zlib.crc32(index[:-4]) != struct.unpack("<I", index[-4:])[0]:
                raise ValueError("xz index fails its check")
            n, i = varint(index, 1)
            blocks = 0
            for _ in range(n):
                unpadded, i = varint(index, i)
                uncompressed, i = varint(index, i)
                blocks += (unpadded + 3) // 4 * 4
                total += uncompressed
            stream = 12 + blocks + index_size + 12
            if stream > end:
                raise ValueError("xz index describes more data than the file holds")
            end -= stream
            if end:
                f.seek(end)  # the stream before must end here with its own footer
    return total


def limit(compressed: int, folder: Path) -> tuple[int, str]:
    """The most a file of `compressed` bytes may unpack to in `folder`, and why that much."""
    usage = shutil.disk_usage(folder)
    room = usage.free - min(1 << 30, int(usage.total * RESERVE_FRACTION))
    by_ratio = max(FLOOR, compressed * RATIO)
    if room < by_ratio:
        return max(0, room), f"the free space of {folder} ({_size(usage.free)} free, some kept in reserve)"
    return by_ratio, f"profkit's limit of {RATIO}x its compressed size (real reports compress up to ~150x)"


def _unxz_streams(src: Path, dst: Path, declared: int) -> int:
    """Every stream of the file, with the padding xz allows between them (zeros, in fours), and
    nothing else: lzma.open would stop quietly at anything after the first stream."""
    written = 0
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    padding = 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while True:
            data = fin.read(CHUNK)
            if not data:
                break
            while data:
                if dec.eof:  # between streams: padding, then the next stream
                    zeros = len(data) - len(data.lstrip(b"\0"))
                    padding += zeros
                    data = data[zeros:]
                    if not data:
                        break
                    if padding % 4:
                        raise ValueError("stream padding that is not a multiple of 4 bytes")
                    dec, padding = lzma.LZMADecompressor(format=lzma.FORMAT_XZ), 0
                # max_length keeps each piece small: a bomb never lands in memory whole
                out = dec.decompress(data, max_length=CHUNK)
                data = b""
                while True:
                    written += len(out)
                    if written > declared:
                        raise BadInput(
                            src, f"unpacks to more than its xz index says ({_size(declared)}): damaged or forged"
                        )
                    fout.write(out)
                    if dec.eof or dec.needs_input:
                        break
                    out = dec.decompress(b"", max_length=CHUNK)
                if dec.eof:
                    data = dec.unused_data
    if not dec.eof:
        raise EOFError("the file ends inside a stream")
    if padding % 4:
        raise ValueError("stream padding that is not a multiple of 4 bytes")
    return written


def unxz(src: Path, dst: Path) -> int:
    """Decompress src (.xz) to dst within the limits; returns the bytes written. BadInput (one
    line, naming the limit and a way round it) for a bomb, a cut or damaged stream, a full disk."""
    try:
        declared = xz_size(src)
    except (ValueError, IndexError) as e:
        raise BadInput(src, f"broken xz stream ({e})") from None
    cap, why = limit(src.stat().st_size, dst.parent)
    if declared > cap:
        raise BadInput(
            src,
            f"unpacks to {_size(declared)} (its xz index says so), over {why}: "
            f"a decompression bomb or damaged file; if you trust it, unpack it yourself "
            f"(xz -dk) somewhere with room and ingest the .ncu-rep",
        )
    try:
        written = _unxz_streams(src, dst, declared)
    except (lzma.LZMAError, EOFError, ValueError) as e:
        raise BadInput(src, f"broken xz stream ({e}); is the file truncated?") from None
    except OSError as e:
        raise BadInput(src, f"cannot unpack into {dst.parent} ({e.strerror or e})") from None
    if written != declared:
        raise BadInput(src, f"unpacked {written} bytes, its xz index says {declared}: damaged")
    return written


class _Capped(io.RawIOBase):
    """A binary stream that stops with one line once more than `cap` bytes came out of it."""

    def __init__(self, inner, cap: int, path: Path, why: str):
        self.inner, self.cap, self.path, self.why, self.seen = inner, cap, path, why, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.inner.read(len(b))
        self.seen += len(data)
        if self.seen > self.cap:
            raise BadInput(
                self.path,
                f"unpacks to more than {_size(self.cap)}, over {self.why}: a decompression "
                "bomb or damaged file; if you trust it, unpack it yourself (gunzip -k)",
            )
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


def open_gzip(path: Path, text: bool = False, **text_kw):
    """A .gz file as a stream (never unpacked to disk), which stops with one line past RATIO
    times the compressed size: a file read in memory cannot fill the disk, but a bomb would
    keep a parser busy for ever. gzip's own CRC and length checks still apply at its end."""
    path = Path(path)
    cap = max(FLOOR, path.stat().st_size * RATIO)
    raw = io.BufferedReader(
        _Capped(gzip.open(path, "rb"), cap, path, f"profkit's limit of {RATIO}x its compressed size"), CHUNK
    )
    return io.TextIOWrapper(raw, **text_kw) if text else raw
