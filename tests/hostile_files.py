"""Hostile files for the import tests, built as bytes here: nothing to download or check in."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

from PIL import Image as PILImage
from PIL.PngImagePlugin import PngInfo

ALERT = "alert(document.domain)"


def gif_js_polyglot(script: str = ALERT) -> bytes:
    """A GIF that Pillow opens and that is also JavaScript: its logical screen width is the
    bytes '/*', so the rest of the file up to '*/' is a comment, and the script follows the
    GIF's trailer. Loaded by <script src> as JavaScript, it runs `script`."""
    buffer = io.BytesIO()
    PILImage.new("P", (8, 8), 1).save(buffer, format="GIF")
    data = bytearray(buffer.getvalue())
    data[6:8] = b"/*"  # width: 0x2a2f pixels, and the start of a JS comment
    assert b"*/" not in data
    return bytes(data) + b"*/=1;" + script.encode() + b";//"


def png_html_polyglot(html: str) -> bytes:
    """A PNG (any decoder shows it) whose text chunk holds `html`: a browser that takes the
    file for a page parses the chunk as markup."""
    info = PngInfo()
    info.add_text("Comment", html)
    buffer = io.BytesIO()
    PILImage.new("RGB", (16, 16), (250, 20, 20)).save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims width x height pixels in a few dozen bytes (a decompression bomb's
    header: decoding it would need width*height*3 bytes)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


def png_blank(width: int, height: int) -> bytes:
    """A whole, valid grey PNG of width x height pixels, all black: a few hundred KB on disk
    for a 9459x9459 image (89 million pixels to decode). Compressed a row at a time, so the
    pixels are never held here."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    pack = zlib.compressobj(9)
    row = bytes(width + 1)  # filter byte 0, then the row's grey values
    data = b"".join(pack.compress(row) for _ in range(height)) + pack.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
    )


def webp_header_only(width: int, height: int) -> bytes:
    """A lossless WebP that states width x height pixels in 30 bytes (the largest a WebP may
    be is 16383 on a side): opening it reads the header only."""
    bits = (width - 1) | ((height - 1) << 14)
    payload = b"\x2f" + struct.pack("<I", bits) + bytes(5)
    body = b"WEBP" + b"VP8L" + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def gif_frames(count: int, width: int = 100, height: int = 100) -> bytes:
    """An animated GIF of `count` frames (each one pixel drawn on a width x height canvas):
    about 23 bytes a frame, every frame a full canvas for whoever shows it."""
    head = b"GIF89a" + struct.pack("<HH", width, height) + bytes([0xF0, 0, 0])
    colors = bytes([0, 0, 0, 255, 255, 255])
    loop = b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"
    frame = (
        b"\x21\xf9\x04\x00\x01\x00\x00\x00"  # graphic control: 10 ms
        + b"\x2c"
        + struct.pack("<HHHH", 0, 0, 1, 1)
        + b"\x00\x02\x02\x44\x01\x00"  # one pixel, LZW minimum code size 2
    )
    return head + colors + loop + frame * count + b"\x3b"


def jpeg_with_icc(size: int) -> bytes:
    """An 8x8 JPEG carrying an ICC profile of `size` bytes (split over APP2 markers, as a JPEG
    holds up to about 16 MB of one)."""
    buffer = io.BytesIO()
    PILImage.new("RGB", (8, 8), (10, 20, 30)).save(buffer, format="JPEG", icc_profile=bytes(size))
    return buffer.getvalue()


def other_format(kind: str) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (8, 8), (1, 2, 3)).save(buffer, format=kind)
    return buffer.getvalue()


def zip_bytes(files: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def zip_encrypted(name: str, data: bytes) -> bytes:
    """A one-member zip whose member is marked encrypted (general purpose flag bit 0), in the
    local and the central header, as a zip made with a password is. zipfile cannot write one."""
    archive = bytearray(zip_bytes({name: data}))
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = archive.index(signature) + offset
        archive[at] |= 0x1
    return bytes(archive)


def zip_with_bad_crc(name: str, data: bytes, others: dict[str, bytes] | None = None) -> bytes:
    """A zip whose member `name` no longer matches its CRC-32: one byte changed after zipping
    (stored, not compressed, so the byte is easy to find). `others` are sound members."""
    files = {**(others or {}), name: data}
    archive = bytearray(zip_bytes(files, method=zipfile.ZIP_STORED))
    at = archive.index(data) + len(data) // 2
    archive[at] ^= 0xFF
    return bytes(archive)


# --- CRAG-MM shards that are small on disk and huge decoded (Parquet bombs) ------------------
# Written with values repeated through a dictionary (nothing large is ever held here but one
# value) and compressed with zstd; without the Arrow schema in the file, so that a reader sees
# plain strings and binaries, as in a shard from any writer.


def _repeated(value, count: int, kind):
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(
        pa.array([0] * count if count < 1000 else _zeros(count), type=pa.int8()),
        pa.array([value], type=kind),
    )


def _zeros(count: int):
    import numpy as np

    return np.zeros(count, dtype=np.int8)


def _crag_table(sessions: list[str], turns_per_row: int, image):
    import pyarrow as pa

    count = len(sessions) * turns_per_row
    turn = pa.StructArray.from_arrays(
        [
            _repeated("i-0", count, pa.string()),
            _repeated("animal", count, pa.string()),
            _repeated("what is this?", count, pa.string()),
        ],
        names=["interaction_id", "domain", "query"],
    )
    offsets = pa.array([k * turns_per_row for k in range(len(sessions) + 1)], type=pa.int32())
    return pa.table(
        {
            "session_id": pa.array(sessions),
            "image": image,
            "turns": pa.ListArray.from_arrays(offsets, turn),
        }
    )


def crag_many_turns(path, turns: int = 4_000_000) -> None:
    """One row holding `turns` turns: about 1.4 KB on disk, gigabytes as Python objects."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.StructArray.from_arrays(
        [pa.array([None], type=pa.binary()), pa.array([None], type=pa.string())],
        names=["bytes", "path"],
    )
    table = _crag_table(["s-0"], turns, image)
    pq.write_table(table, path, compression="zstd", store_schema=False)


def crag_image_bombs(path, rows: int = 8, size: int = 64 * 1024 * 1024, *, shared: bool) -> None:
    """`rows` rows whose image bytes are `size` zero bytes each: a few KB on disk. `shared`: one
    row group whose rows all point at one dictionary value (the metadata counts it once);
    else a row group per row, each value written out plainly and compressed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    blob = bytes(size)
    sessions = [f"s-{k}" for k in range(rows)]

    def images(count: int):
        data = (
            _repeated(blob, count, pa.binary())
            if shared
            else pa.array([blob] * count, type=pa.binary())
        )
        return pa.StructArray.from_arrays(
            [data, pa.array([None] * count, type=pa.string())], names=["bytes", "path"]
        )

    if shared:
        table = _crag_table(sessions, 1, images(rows))
        pq.write_table(table, path, compression="zstd", store_schema=False)
        return
    first = _crag_table(sessions[:1], 1, images(1))
    with pq.ParquetWriter(
        path, first.schema, compression="zstd", use_dictionary=False, store_schema=False
    ) as writer:
        for session in sessions:
            writer.write_table(_crag_table([session], 1, images(1)))
