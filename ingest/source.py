"""Reading a trace file: the one place that opens one, within the limits.

Every format reads its file through these functions, so that every one of
them refuses the same things the same way, before holding much of the file:
a file past its format's size limit (checked with ``stat``, before reading),
a line past :data:`~tracegraph.ingest.limits.MAX_LINE_BYTES` (line formats
are streamed, so the rest of such a line is never read), binary content in
a text format (a NUL byte), and text that is not UTF-8. Errors are one line
naming the file and, where there is one, the line.

A gzipped file is read as its content (:func:`read_text`, :func:`lines`,
:func:`read_content`), whatever the format: people compress every kind of
trace. Its content is held to the format's size limit as it is
decompressed, so a small file that expands without end (a gzip bomb) is
refused once past the limit, never held whole; a gzip stream that ends
early is a truncated file.
"""

from __future__ import annotations

import io
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path

from tracegraph.errors import InputError, TooLarge, first_line
from tracegraph.ingest.limits import MAX_FILE_BYTES, MAX_LINE_BYTES, SNIFF_BYTES, human

# Line formats are read in blocks of this size (a line longer than
# MAX_LINE_BYTES is refused within one block of its start).
_BLOCK = 4 * 1024 * 1024


def _cannot_read(path: Path, exc: OSError) -> InputError:
    return InputError(path, f"cannot read: {exc.strerror or exc}")


def size(path: Path) -> int:
    """The file's size on disk, 0 when it cannot be read (what reads it
    later names the file and the problem)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def check_size(path: Path, fmt: str) -> int:
    """The size of regular file ``path``; TooLarge past ``fmt``'s limit."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _cannot_read(path, exc) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(path, "is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(path, "not a regular file")
    limit = MAX_FILE_BYTES[fmt]
    if st.st_size > limit:
        raise TooLarge(path, f"{st.st_size:,} bytes is over the {fmt} size limit of {human(limit)}")
    return st.st_size


def head(path: Path) -> bytes:
    """The first :data:`SNIFF_BYTES` of the file: what format detection reads."""
    try:
        with open(path, "rb") as f:
            return f.read(SNIFF_BYTES)
    except OSError as exc:
        raise _cannot_read(path, exc) from None


GZIP_MAGIC = b"\x1f\x8b"


def unzipped_head(head: bytes) -> bytes:
    """The start of a file's content, from its :func:`head`: gunzipped (as
    much as the head holds) when it is gzip, else the head itself; empty
    when the gzip data is broken. What binary formats sniff."""
    if head.startswith(GZIP_MAGIC):
        try:
            return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(head, SNIFF_BYTES)
        except zlib.error:
            return b""
    return head


def gunzip(path: Path, raw: bytes, fmt: str) -> bytes:
    """Every gzip member of ``raw``, decompressed, within ``fmt``'s size
    limit (TooLarge past it, before more is decompressed)."""
    out = bytearray()
    for piece in _gunzipped(path, [raw], fmt):
        out += piece
    return bytes(out)


def _gunzipped(path: Path, blocks: Iterator[bytes] | list[bytes], fmt: str) -> Iterator[bytes]:
    """The decompressed content of the gzip file whose bytes come in
    ``blocks`` (several members one after the other, as ``cat`` of gzip
    files makes; trailing NUL padding ignored), a piece at a time."""
    limit = MAX_FILE_BYTES[fmt]
    total = 0
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = b""
    try:
        for block in blocks:
            pending += block
            while pending:
                if d.eof:  # the next member (or padding)
                    if not pending.strip(b"\0"):
                        pending = b""
                        break
                    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                piece = d.decompress(pending, _BLOCK)
                pending = d.unconsumed_tail or d.unused_data
                total += len(piece)
                if total > limit:
                    raise TooLarge(path, f"more than the {fmt} size limit of {human(limit)} (decompressed)")
                if piece:
                    yield piece
                elif not d.unconsumed_tail and not d.eof:
                    break  # needs more input
    except zlib.error as e:
        raise InputError(path, f"not a valid gzip file: {first_line(e)}") from None
    if not d.eof:
        raise InputError(path, "gzip stream ends early (truncated file)")


def _raw_blocks(path: Path, fmt: str) -> Iterator[bytes]:
    """The file's bytes a block at a time, after the size check."""
    with open_binary(path, fmt) as f:
        while True:
            try:
                block = f.read(_BLOCK)
            except OSError as exc:
                raise _cannot_read(path, exc) from None
            if not block:
                return
            yield block


def _content_blocks(path: Path, fmt: str) -> Iterator[bytes]:
    """The file's content a block at a time: decompressed when it is gzip."""
    if head(path).startswith(GZIP_MAGIC):
        return _gunzipped(path, _raw_blocks(path, fmt), fmt)
    return _raw_blocks(path, fmt)


def gzipped(path: Path) -> bool:
    """Does the file start with the gzip magic?"""
    return head(path).startswith(GZIP_MAGIC)


def head_lines(head: bytes) -> list[str] | None:
    """The complete, non-empty lines of a file's head (stripped), or None
    when the head is not UTF-8 text (or holds a NUL byte).

    A head of :data:`SNIFF_BYTES` may stop mid-line (and mid-character), so
    its last line counts only when the head ends with a newline or is
    shorter than that (the file ended there)."""
    if b"\0" in head:
        return None
    if len(head) >= SNIFF_BYTES:
        cut = head.rfind(b"\n")
        head = head[: cut + 1] if cut >= 0 else b""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _binary(path: Path, data: bytes, fmt: str, first_line: int = 1) -> None:
    """InputError when ``data`` (starting at line ``first_line``) holds a NUL byte."""
    at = data.find(b"\0")
    if at >= 0:
        line = first_line + data.count(b"\n", 0, at)
        raise InputError(path, f"binary content (a NUL byte), not a {fmt} text file", f"line {line}")


def _decode(path: Path, data: bytes, first_line: int = 1) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        raise InputError(path, "not UTF-8 text", f"line {line}") from None


def open_binary(path: Path, fmt: str) -> io.BufferedReader:
    """The file opened for reading bytes, after the size check."""
    check_size(path, fmt)
    try:
        return open(path, "rb")
    except OSError as exc:
        raise _cannot_read(path, exc) from None


def read_bytes(path: Path, fmt: str) -> bytes:
    """The whole file, after the size check."""
    check_size(path, fmt)
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise _cannot_read(path, exc) from None


def read_content(path: Path, fmt: str) -> bytes:
    """The whole file, after the size check: its content when gzipped
    (decompressed within the size limit), else its bytes."""
    if gzipped(path):
        return gunzip(path, read_bytes(path, fmt), fmt)
    return read_bytes(path, fmt)


def read_text(path: Path, fmt: str) -> str:
    """The whole file (its content when gzipped) as UTF-8 text, after the
    size check and a look at its head for binary content (so a large
    binary file is refused unread)."""
    check_size(path, fmt)
    first = head(path)
    if not first.startswith(GZIP_MAGIC):
        _binary(path, first, fmt)
    data = read_content(path, fmt)
    _binary(path, data, fmt)
    return _decode(path, data)


def lines(path: Path, fmt: str) -> Iterator[str]:
    """The file's lines as ``text.split("\\n")`` would give them (so the
    last one is ``""`` when the file ends with a newline), read a block at
    a time: a line longer than :data:`MAX_LINE_BYTES` is TooLarge, a NUL byte
    or bytes that are not UTF-8 an InputError, each naming the line. A
    gzipped file's lines are its content's, decompressed as they are read."""
    check_size(path, fmt)
    number = 1  # of the first line not yet yielded
    carry = b""
    for block in _content_blocks(path, fmt):
        parts = (carry + block).split(b"\n")
        carry = parts.pop()
        for raw in parts:
            yield _line(path, raw, fmt, number)
            number += 1
        if len(carry) > MAX_LINE_BYTES:
            _binary(path, carry, fmt, number)  # binary content is the better news
            raise _long_line(path, number)
    yield _line(path, carry, fmt, number)


def _line(path: Path, raw: bytes, fmt: str, number: int) -> str:
    _binary(path, raw, fmt, number)
    if len(raw) > MAX_LINE_BYTES:
        raise _long_line(path, number)
    return _decode(path, raw, number)


def _long_line(path: Path, number: int) -> TooLarge:
    return TooLarge(path, f"line longer than the limit of {human(MAX_LINE_BYTES)}", f"line {number}")
