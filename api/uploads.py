"""Streaming ``multipart/form-data`` reader for trace uploads.

The request body goes straight from the socket to files in a private
temporary directory, chunk by chunk: an upload is never held in memory,
and the size limit is enforced while it streams (413 as soon as it is
crossed, without reading the rest).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from fastapi import HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

MAX_FIELD_BYTES = 64 * 1024
WRITE_BATCH = 1024 * 1024
# The form (api/traces.py: upload_schema): text fields, each at most once, and the files.
TEXT_FIELDS = ("trace", "format", "replace", "step_marker")
FILE_FIELD = "files"


@dataclass
class UploadedFile:
    name: str  # the client's file name, sanitized
    path: Path  # where it is on disk
    size: int = 0


@dataclass
class Upload:
    tmpdir: Path
    fields: dict[str, str] = field(default_factory=dict)
    files: list[UploadedFile] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def cleanup(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def safe_name(raw: str, index: int) -> str:
    """A client-side file name as a harmless base name."""
    base = re.split(r"[\\/]", raw or "")[-1]
    base = "".join(c for c in base if c.isprintable()).strip().lstrip(".")
    return base[:200] or f"upload-{index + 1}"


class _Reader:
    def __init__(self, tmpdir: Path, max_bytes: int, max_files: int) -> None:
        self.upload = Upload(tmpdir)
        self.max_bytes = max_bytes
        self.max_files = max_files
        self._header_name = b""
        self._header_value = b""
        self._disposition = b""
        self._field: str | None = None
        self._data = bytearray()
        self._file: UploadedFile | None = None
        self._fh: IO[bytes] | None = None  # open while a file part is read
        self.in_part = False

    # python-multipart callbacks -------------------------------------
    def on_part_begin(self) -> None:
        self.in_part = True
        self._disposition = b""
        self._field = None
        self._data = bytearray()
        self._file = None

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        if self._header_name.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name = b""
        self._header_value = b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        if b"name" not in options:
            raise _Refused(400, "a multipart part has no name (Content-Disposition: form-data; name=...)")
        name = options[b"name"].decode("utf-8", "replace")
        self._field = name
        if name not in (*TEXT_FIELDS, FILE_FIELD):
            have = ", ".join((*TEXT_FIELDS, FILE_FIELD))
            raise _Refused(422, f"form field {name!r}: no such field (the form has {have})")
        if name == FILE_FIELD:
            if len(self.upload.files) >= self.max_files:
                raise _Refused(422, f"files: too many files in one upload (at most {self.max_files})")
            index = len(self.upload.files)
            client = options.get(b"filename", b"").decode("utf-8", "replace")
            fname = safe_name(client, index)
            folder = self.upload.tmpdir / str(index)
            folder.mkdir()
            self._file = UploadedFile(fname, folder / fname)
            self._fh = open(self._file.path, "wb")  # noqa: SIM115 - written part by part, closed in on_part_end
            self.upload.files.append(self._file)

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        n = end - start
        if self._file is not None:
            self._file.size += n
            if self.upload.total_bytes > self.max_bytes:
                raise _Refused(413, f"upload larger than the limit of {self.max_bytes:,} bytes")
            assert self._fh is not None  # opened with the part's file
            self._fh.write(data[start:end])
        else:
            if len(self._data) + n > MAX_FIELD_BYTES:
                raise _Refused(400, f"form field {self._field!r} is longer than {MAX_FIELD_BYTES:,} bytes")
            self._data.extend(data[start:end])

    def on_part_end(self) -> None:
        self.in_part = False
        if self._file is not None:
            assert self._fh is not None  # opened with the part's file
            self._fh.close()
            self._fh = None
        elif self._field is not None:
            if self._field in self.upload.fields:
                raise _Refused(422, f"form field {self._field!r} given twice")
            self.upload.fields[self._field] = self._data.decode("utf-8", "replace")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class _Refused(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def read_upload(request: Request, *, max_bytes: int, max_files: int, upload_dir: str | None) -> Upload:
    """Stream a multipart body to disk; HTTPException on anything wrong.

    The caller owns the returned :class:`Upload` and must ``cleanup()`` it.
    """
    ctype = request.headers.get("content-type", "")
    kind, options = parse_options_header(ctype)
    if kind != b"multipart/form-data":
        raise HTTPException(
            415, f"expected a multipart/form-data upload, got {ctype.split(';')[0] or 'no content type'!r}"
        )
    boundary = options.get(b"boundary")
    if not boundary:
        raise HTTPException(400, "multipart upload without a boundary")
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > max_bytes + 1024 * 1024:
        raise HTTPException(413, f"upload larger than the limit of {max_bytes:,} bytes")
    if upload_dir:
        os.makedirs(upload_dir, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix="tracegraph-upload-", dir=upload_dir))
    reader = _Reader(tmpdir, max_bytes, max_files)
    callbacks: MultipartCallbacks = {
        "on_part_begin": reader.on_part_begin,
        "on_part_data": reader.on_part_data,
        "on_part_end": reader.on_part_end,
        "on_header_field": reader.on_header_field,
        "on_header_value": reader.on_header_value,
        "on_header_end": reader.on_header_end,
        "on_headers_finished": reader.on_headers_finished,
    }
    try:
        parser = MultipartParser(boundary, callbacks)
        # Parsing writes the files: do it off the event loop, a megabyte at a time.
        pending: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            pending.append(chunk)
            size += len(chunk)
            if size >= WRITE_BATCH:
                await run_in_threadpool(parser.write, b"".join(pending))
                pending, size = [], 0
        if pending:
            await run_in_threadpool(parser.write, b"".join(pending))
        parser.finalize()
        if reader.in_part:
            raise _Refused(400, "multipart upload ends in the middle of a part")
    except _Refused as e:
        reader.close()
        reader.upload.cleanup()
        raise HTTPException(e.status, e.detail) from None
    except (FormParserError, ValueError) as e:
        reader.close()
        reader.upload.cleanup()
        raise HTTPException(
            400, f"malformed multipart upload: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None
    except BaseException:
        reader.close()
        reader.upload.cleanup()
        raise
    reader.close()
    return reader.upload
