"""The events of a Kineto trace's ``traceEvents`` list scanned into
columns by compiled code (numba): no Python object per event.

:func:`scan` reads the list's text (the bytes after its ``[``), in pieces
as they are decompressed, and fills :class:`Columns`: one int64 table per
kind of event the graph reads (host spans, device spans, synchronization
records, memory records, ``ac2g`` flows), each row the event's index,
times in exact integer nanoseconds and its fields as *values*: a JSON
integer as itself, any other value as a code into one dictionary of the
values' texts (strings, decimals, ``null``), decoded by Python once per
distinct text. Names and categories are dictionary codes too; an op's
``attrs`` (its category, pid, tid and kept args) is written as JSON text
straight from the file's bytes.

The scanner checks the JSON it reads (the grammar and UTF-8) as strictly
as the decoders the trace reader uses. Anything it does not read exactly
as :mod:`.read`'s decoders would (malformed or truncated text, a number
past 19 digits, a time given as a string, an escape in a kept arg, a
field of an unusual type, an event the format refuses...) stops it with
:data:`FALLBACK`: the caller then reads the file with :mod:`.read`, which
reads it the old way or refuses it with its one-line error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegraph.columns import I64, U8, U64, kernel, read_only

# What scan answers.
DONE = 0  # the list ended (its closing bracket is consumed)
MORE = 1  # the text ended inside an event: call again with more
GROW = 2  # a table or buffer is full: grow it (Columns.grow) and call again
FALLBACK = 3  # read the file the old way (see the module docstring)

# Event-level keys, by index.
K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ID, K_ARGS = range(9)
EVENT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args")

# The args the graph reads, by index: an op's kept args first (its attrs, in this order).
KEPT_ARGS = (
    "External id",
    "Sequence number",
    "Fwd thread id",
    "Input Dims",
    "Input type",
    "correlation",
    "Record function id",
    "stream",
    "device",
    "kernel_backend",
)
OTHER_ARGS = (
    "bytes",
    "Collective name",
    "Process Group Name",
    "Process Group Ranks",
    "cuda_sync_kind",
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
    "Bytes",
    "Addr",
    "Total Allocated",
    "Device Type",
    "Device Id",
)
ARGS = KEPT_ARGS + OTHER_ARGS
A = {name: i for i, name in enumerate(ARGS)}

# A field a row has not (see _put_values).
NONE = (-1, -1, -1)
# Lowercased span categories, by class (see .rank): host, device, sync.
HOST_CATEGORIES = ("cpu_op", "operator", "user_annotation", "python_function", "cuda_runtime", "runtime", "cuda_driver")
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset")
SYNC_CATEGORY = "cuda_sync"

# Columns of the tables. A value is two columns: its kind (V_*) and value.
V_NONE, V_INT, V_CODE = 0, 1, 2
# host spans
O_INDEX, O_NAME, O_CAT, O_PID, O_PIDV, O_TID, O_TIDV, O_TS, O_END, O_CORR, O_CORRV = range(11)
O_FIELDS = 11
# Device spans and cuda_sync records share their leading columns: the
# event, its device (args, else pid) and stream (args; device spans: else
# tid), its times and its correlation; then their own.
X_INDEX, X_DEV, X_DEVV, X_STREAM, X_STREAMV, X_TS, X_END, X_CORR, X_CORRV = range(9)
# device spans: then name, category, and the kept args
D_INDEX, D_DEV, D_DEVV, D_STREAM, D_STREAMV, D_TS, D_END, D_CORR, D_CORRV = range(9)
D_NAME, D_CAT, D_BYTES, D_BYTESV, D_COLL, D_COLLV, D_GROUP, D_GROUPV, D_RANKS, D_RANKSV = range(9, 19)
D_FIELDS = 19
# cuda_sync records: then kind (cuda_sync_kind, else the name), the stream and record waited on
S_INDEX, S_DEV, S_DEVV, S_STREAM, S_STREAMV, S_TS, S_END, S_CORR, S_CORRV = range(9)
S_KIND, S_KINDV, S_WSTREAM, S_WSTREAMV, S_WREC, S_WRECV = range(9, 15)
S_FIELDS = 15
# [memory] records
M_INDEX, M_PID, M_PIDV, M_TID, M_TIDV, M_TS, M_BYTES, M_BYTESV, M_ADDR, M_ADDRV, M_TOTAL, M_TOTALV = range(12)
M_DTYPE, M_DTYPEV, M_DID, M_DIDV = range(12, 16)
M_FIELDS = 16
# ac2g flows: 0 start (s) / 1 end (f), pid, tid, ts, id
F_INDEX, F_END, F_PID, F_PIDV, F_TID, F_TIDV, F_TS, F_ID, F_IDV = range(9)
F_FIELDS = 9


def _table(*words: str) -> tuple[np.ndarray, np.ndarray]:
    """Words as one byte array and their offsets (n + 1)."""
    data = [w.encode("utf-8") for w in words]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(d) for d in data])
    return np.frombuffer(b"".join(data), dtype=np.uint8).copy(), offsets


_EVENT_KEYS = _table(*EVENT_KEYS)
_ARG_KEYS = _table(*ARGS)
_QUOTED_KEPT = _table(*(f',"{k}":' for k in KEPT_ARGS))
_CATEGORIES = _table(*HOST_CATEGORIES, *DEVICE_CATEGORIES, SYNC_CATEGORY)
# The host categories' names in attrs (category), as .rank maps them.
_HOST_SHOWN = _table(*({"operator": "cpu_op", "runtime": "cuda_runtime"}.get(c, c) for c in HOST_CATEGORIES))
_MEMORY_NAME = np.frombuffer(b"[memory]", dtype=np.uint8).copy()
_AC2G = np.frombuffer(b"ac2g", dtype=np.uint8).copy()


class Dictionary:
    """Texts by code: an open-addressing hash table over the bytes kept."""

    def __init__(self, capacity: int = 1 << 12) -> None:
        self.slots = np.full(capacity * 2, -1, dtype=np.int64)
        self.offsets = np.zeros(capacity + 1, dtype=np.int64)
        self.hashes = np.zeros(capacity, dtype=np.uint64)
        self.data = np.zeros(capacity * 32, dtype=np.uint8)
        self.count = np.zeros(1, dtype=np.int64)

    def grow(self) -> None:
        n = int(self.count[0])
        cap = len(self.hashes)
        if n * 2 + 64 >= cap:
            cap *= 2
            self.hashes = np.resize(self.hashes, cap)
            self.offsets = np.resize(self.offsets, cap + 1)
            self.slots = _rehash(self.hashes[:n], cap * 2)
        used = int(self.offsets[n])
        if used + (1 << 20) >= len(self.data):
            self.data = np.resize(self.data, max(len(self.data) * 2, used + (2 << 20)))

    def texts(self) -> list[bytes]:
        n = int(self.count[0])
        raw = self.data[: self.offsets[n]].tobytes()
        off = self.offsets[: n + 1].tolist()
        return [raw[off[i] : off[i + 1]] for i in range(n)]


@kernel
def _rehash(hashes: np.ndarray, size: int) -> np.ndarray:  # pragma: no cover - compiled
    slots = np.full(size, -1, dtype=np.int64)
    mask = size - 1
    for i in range(len(hashes)):
        j = np.int64(hashes[i] & np.uint64(mask))
        while slots[j] >= 0:
            j = (j + 1) & mask
        slots[j] = i
    return slots


class Columns:
    """What :func:`scan` fills (the tables grow on :data:`GROW`)."""

    def __init__(self) -> None:
        self.ops = np.zeros((1 << 14, O_FIELDS), dtype=np.int64)
        self.devs = np.zeros((1 << 12, D_FIELDS), dtype=np.int64)
        self.syncs = np.zeros((1 << 8, S_FIELDS), dtype=np.int64)
        self.mems = np.zeros((1 << 8, M_FIELDS), dtype=np.int64)
        self.flows = np.zeros((1 << 12, F_FIELDS), dtype=np.int64)
        self.attrs = np.zeros(1 << 20, dtype=np.uint8)
        self.attr_offsets = np.zeros((1 << 14) + 1, dtype=np.int64)
        # rows of ops, devs, syncs, mems, flows; (unused); attrs bytes used
        self.n = np.zeros(7, dtype=np.int64)
        self.names = Dictionary()  # names (raw text, quotes removed)
        self.cats = Dictionary()  # categories lowercased (raw text, quotes removed)
        self.values = Dictionary()  # any other value's raw text
        # spans of other categories, by category code (see cats)
        self.skipped = np.zeros(len(self.cats.hashes), dtype=np.int64)

    def grow(self) -> None:
        """Double what is full (at least what an event may need next)."""
        for name, k in (("ops", 0), ("devs", 1), ("syncs", 2), ("mems", 3), ("flows", 4)):
            t = getattr(self, name)
            if self.n[k] + 16 >= len(t):
                shape = (len(t) * 2, t.shape[1])
                del t  # (the table's only reference is then its attribute: resize can realloc it in place)
                self.resize(name, shape)
        if self.n[0] + 16 >= len(self.attr_offsets) - 1:
            self.resize("attr_offsets", (len(self.attr_offsets) * 2,))
        if self.n[6] + (1 << 20) >= len(self.attrs):
            self.resize("attrs", (len(self.attrs) * 2,))
        for d in (self.names, self.cats, self.values):
            d.grow()
        if len(self.skipped) < len(self.cats.hashes):
            grown = np.zeros(len(self.cats.hashes), dtype=np.int64)
            grown[: len(self.skipped)] = self.skipped
            self.skipped = grown

    def reserve(self, scale: float) -> None:
        """Grow each table at once to ``scale`` times what it holds (the
        text read so far is ``1 / scale`` of the whole): growing by
        doubling alone costs a copy and a zeroing of the whole table per
        step, a tenth of a 16 MB rank's read. The grown tables are fresh
        zeroed memory (the system's zero pages until written), so room
        the rest of the file does not use (its events are not like the
        first piece's) costs no memory."""
        n = self.n.tolist()
        for name, k in (("ops", 0), ("devs", 1), ("syncs", 2), ("mems", 3), ("flows", 4)):
            self._regrown(name, int(n[k] * scale) + 16, n[k])
        self._regrown("attr_offsets", int(n[0] * scale) + 17, n[0] + 1)
        self._regrown("attrs", int(n[6] * scale) + (1 << 20), n[6])

    def _regrown(self, name: str, rows: int, used: int) -> None:
        old = getattr(self, name)
        if rows > len(old):
            grown = np.zeros((rows, *old.shape[1:]), dtype=old.dtype)
            grown[:used] = old[:used]
            setattr(self, name, grown)

    def resize(self, name: str, shape: tuple[int, ...]) -> None:
        """Table ``name`` grown or cut to ``shape`` rows in place where it
        can be (a realloc: a large table is remapped, not copied, so its
        old and new copies are never held together: the read's peak is
        the tables once, not three times); a copy when something else
        still refers to it."""
        try:
            getattr(self, name).resize(shape)
        except ValueError:
            setattr(self, name, np.resize(getattr(self, name), shape))


# --- the compiled scanner -------------------------------------------------------------------------

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@kernel
def _insert(
    slots: I64, offsets: I64, hashes: U64, data: U8, count: I64, buf: U8, s: int, e: int, lower: bool
) -> Any:  # pragma: no cover - compiled
    """The code of text ``buf[s:e]`` (ASCII-lowercased with ``lower``),
    added when new; -1 when the dictionary is full."""
    h = _FNV_OFFSET
    for i in range(s, e):
        c = buf[i]
        if lower and 65 <= c <= 90:
            c += 32
        h = (h ^ np.uint64(c)) * _FNV_PRIME
    mask = len(slots) - 1
    j = np.int64(h & np.uint64(mask))
    n = e - s
    while True:
        k = slots[j]
        if k < 0:
            break
        if hashes[k] == h and offsets[k + 1] - offsets[k] == n:
            o = offsets[k]
            same = True
            for i in range(n):
                c = buf[s + i]
                if lower and 65 <= c <= 90:
                    c += 32
                if data[o + i] != c:
                    same = False
                    break
            if same:
                return k
        j = (j + 1) & mask
    k = count[0]
    if k * 2 + 2 >= len(slots) or k + 1 >= len(hashes) or offsets[k] + n > len(data):
        return -1
    o = offsets[k]
    for i in range(n):
        c = buf[s + i]
        if lower and 65 <= c <= 90:
            c += 32
        data[o + i] = c
    offsets[k + 1] = o + n
    hashes[k] = h
    slots[j] = k
    count[0] = k + 1
    return k


# Scan results of the primitives below: an index past the token, or these.
_INCOMPLETE = -1  # the text ended inside the token
_BAD = -2  # not what FALLBACK reads the same way


@kernel
def _ws(buf: U8, i: int, n: int) -> int:  # pragma: no cover - compiled
    while i < n:
        c = buf[i]
        if c != 32 and c != 10 and c != 13 and c != 9:
            return i
        i += 1
    return i


@kernel
def _string(buf: U8, i: int, n: int) -> tuple[Any, bool]:  # pragma: no cover - compiled
    """``buf[i]`` is a quote: the index after the closing quote, and
    whether the string has an escape (UTF-8 and escapes checked)."""
    i += 1
    escaped = False
    while i < n:
        c = buf[i]
        if c == 34:
            return i + 1, escaped
        if c == 92:
            escaped = True
            if i + 1 >= n:
                return _INCOMPLETE, escaped
            d = buf[i + 1]
            if d == 117:  # \uXXXX
                if i + 6 > n:
                    return _INCOMPLETE, escaped
                for k in range(i + 2, i + 6):
                    h = buf[k]
                    if not (48 <= h <= 57 or 65 <= h <= 70 or 97 <= h <= 102):
                        return _BAD, escaped
                h0, h1 = buf[i + 2] | 32, buf[i + 3] | 32
                if h0 == 100 and (h1 >= 97 or h1 == 56 or h1 == 57):  # \uD800-\uDFFF: read the old way
                    return _BAD, escaped
                i += 6
                continue
            if d in (34, 92, 47, 98, 102, 110, 114, 116):
                i += 2
                continue
            return _BAD, escaped
        if c < 32:
            return _BAD, escaped
        if c < 128:
            i += 1
            continue
        # UTF-8: a lead byte and its continuation bytes (no overlongs, surrogates or past U+10FFFF)
        if 0xC2 <= c <= 0xDF:
            m = 1
        elif 0xE0 <= c <= 0xEF:
            m = 2
        elif 0xF0 <= c <= 0xF4:
            m = 3
        else:
            return _BAD, escaped
        if i + m >= n:
            return _INCOMPLETE, escaped
        c1 = buf[i + 1]
        if (
            (c == 0xE0 and c1 < 0xA0)
            or (c == 0xED and c1 > 0x9F)
            or (c == 0xF0 and c1 < 0x90)
            or (c == 0xF4 and c1 > 0x8F)
        ):
            return _BAD, escaped
        for k in range(i + 1, i + 1 + m):
            if buf[k] & 0xC0 != 0x80:
                return _BAD, escaped
        i += 1 + m
    return _INCOMPLETE, escaped


@kernel
def _number(buf: U8, i: int, n: int) -> tuple[Any, bool]:  # pragma: no cover - compiled
    """A JSON number at ``i``: the index after it, and whether it is an
    integer (no fraction, no exponent)."""
    start = i
    if i < n and buf[i] == 45:
        i += 1
    if i >= n:
        return _INCOMPLETE, False
    if buf[i] == 48:
        i += 1
    elif 49 <= buf[i] <= 57:
        while i < n and 48 <= buf[i] <= 57:
            i += 1
    else:
        return _BAD, False
    integer = True
    for part in range(2):  # a fraction (.digits), then an exponent (e[+-]digits)
        if i >= n or not ((part == 0 and buf[i] == 46) or (part == 1 and (buf[i] == 101 or buf[i] == 69))):
            continue
        integer = False
        i += 1
        if part == 1 and i < n and (buf[i] == 43 or buf[i] == 45):
            i += 1
        d = i
        while i < n and 48 <= buf[i] <= 57:
            i += 1
        if i == d:
            return (_INCOMPLETE if i >= n else _BAD), False
    if i >= n:
        return _INCOMPLETE, integer  # a number may go on in the next piece
    if i == start:
        return _BAD, False
    return i, integer


@kernel
def _literal(buf: U8, i: int, n: int) -> int:  # pragma: no cover - compiled
    c = buf[i]
    if c == 116:
        word = "true"
    elif c == 102:
        word = "false"
    else:
        word = "null"
    for k in range(len(word)):
        if i + k >= n:
            return _INCOMPLETE
        if buf[i + k] != ord(word[k]):
            return _BAD
    return i + len(word)


@kernel
def _key(buf: U8, i: int, n: int) -> Any:  # pragma: no cover - compiled
    """An object's key at ``i``, its colon and the space after: the index
    of its value (or _INCOMPLETE / _BAD)."""
    if buf[i] != 34:
        return _BAD
    i, _ = _string(buf, i, n)
    if i < 0:
        return i
    i = _ws(buf, i, n)
    if i >= n:
        return _INCOMPLETE
    if buf[i] != 58:
        return _BAD
    i = _ws(buf, i + 1, n)
    if i >= n:
        return _INCOMPLETE
    return i


@kernel
def _value(buf: U8, i: int, n: int, stack: U8) -> Any:  # pragma: no cover - compiled
    """Skip one JSON value at ``i`` (checked): the index after it."""
    c = buf[i]
    if c == 34:
        j, _ = _string(buf, i, n)
        return j
    if c == 45 or 48 <= c <= 57:
        j, _ = _number(buf, i, n)
        return j
    if c == 116 or c == 102 or c == 110:
        return _literal(buf, i, n)
    if c != 123 and c != 91:
        return _BAD
    depth = 0
    while True:
        # at a value (or a closing bracket right after an opening one)
        c = buf[i]
        if c == 123 or c == 91:
            if depth >= len(stack):
                return _BAD  # deeper than the decoders read in one go: FALLBACK reads it
            stack[depth] = c
            depth += 1
            i = _ws(buf, i + 1, n)
            if i >= n:
                return _INCOMPLETE
            if buf[i] == (125 if c == 123 else 93):
                depth -= 1
                i += 1
            elif c == 123:
                i = _key(buf, i, n)
                if i < 0:
                    return i
                continue
            else:
                continue
        else:
            if c == 34:
                i, _ = _string(buf, i, n)
            elif c == 45 or 48 <= c <= 57:
                i, _ = _number(buf, i, n)
            elif c == 116 or c == 102 or c == 110:
                i = _literal(buf, i, n)
            else:
                return _BAD
            if i < 0:
                return i
        # after a value inside containers: a comma or the container's end
        while depth > 0:
            i = _ws(buf, i, n)
            if i >= n:
                return _INCOMPLETE
            c = buf[i]
            top = stack[depth - 1]
            if c == 44:
                i = _ws(buf, i + 1, n)
                if i >= n:
                    return _INCOMPLETE
                if top == 123:
                    i = _key(buf, i, n)
                    if i < 0:
                        return i
                break
            if c == (125 if top == 123 else 93):
                depth -= 1
                i += 1
                continue
            return _BAD
        if depth == 0:
            return i


@kernel
def _match(buf: U8, s: int, e: int, words: U8, offsets: I64, lower: bool = False) -> int:  # pragma: no cover - compiled
    """The index of the word ``buf[s:e]`` (ASCII-lowercased with ``lower``)
    among ``words``, or -1."""
    n = e - s
    for w in range(len(offsets) - 1):
        o = offsets[w]
        if offsets[w + 1] - o != n:
            continue
        same = True
        for k in range(n):
            c = buf[s + k]
            if lower and 65 <= c <= 90:
                c += 32
            if c != words[o + k]:
                same = False
                break
        if same:
            return w
    return -1


@kernel
def _same(buf: U8, s: int, e: int, word: U8) -> bool:  # pragma: no cover - compiled
    if e - s != len(word):
        return False
    for k in range(len(word)):  # noqa: SIM110 - compiled code: no generators
        if buf[s + k] != word[k]:
            return False
    return True


_POW10 = np.array([10**k for k in range(19)], dtype=np.int64)


@kernel
def _ns(buf: U8, s: int, e: int) -> tuple[Any, bool]:  # pragma: no cover - compiled
    """Microseconds (a JSON number ``buf[s:e]``) as exact integer
    nanoseconds, half-even past the nanosecond; ok False when the number
    is beyond what this reads exactly."""
    i = s
    neg = False
    if buf[i] == 45:
        neg = True
        i += 1
    digits = np.int64(0)
    count = 0
    scale = 3  # value * 10**scale = ns, before the fraction
    frac = 0
    dropped = np.int64(0)  # the dropped digits past the nanosecond
    dropped_n = 0
    point = False
    while i < e:
        c = buf[i]
        if c == 46 and not point:
            point = True
            i += 1
            continue
        if not 48 <= c <= 57:
            break
        if not point or frac < 3:
            if count >= 18:
                return np.int64(0), False
            digits = digits * 10 + (c - 48)
            if digits > 0:
                count += 1
            if point:
                frac += 1
        else:
            if dropped_n >= 18:
                return np.int64(0), False
            dropped = dropped * 10 + (c - 48)
            dropped_n += 1
        i += 1
    if i < e:
        return np.int64(0), False  # an exponent: read by FALLBACK
    scale -= frac
    value = digits
    for _ in range(scale):
        if value > 922337203685477580:
            return np.int64(0), False
        value *= 10
    if dropped_n:
        half = 5 * _POW10[dropped_n - 1]
        if dropped > half or (dropped == half and value % 2 == 1):
            value += 1
    return (-value if neg else value), True


@kernel
def _int(buf: U8, s: int, e: int) -> tuple[Any, bool]:  # pragma: no cover - compiled
    """A JSON integer of at most 18 digits, or ok False."""
    i = s
    neg = False
    if buf[i] == 45:
        neg = True
        i += 1
    if e - i > 18 or e - i < 1:
        return np.int64(0), False
    v = np.int64(0)
    while i < e:
        c = buf[i]
        if not 48 <= c <= 57:
            return np.int64(0), False
        v = v * 10 + (c - 48)
        i += 1
    if neg and v == 0:
        return np.int64(0), False  # -0: the decoders make it 0
    return (-v if neg else v), True


@kernel
def _scalar(
    buf: U8, s: int, e: int, vslots: I64, voff: I64, vhash: U64, vdata: U8, vcount: I64
) -> tuple[int, Any]:  # pragma: no cover - compiled
    """A field's value: (kind, value) -- V_NONE for no value, V_INT an
    integer, V_CODE the code of its text (a string's with its quotes);
    kind -1: full dictionary, -2: not a scalar this reads."""
    if s < 0:
        return V_NONE, np.int64(0)
    c = buf[s]
    if c == 123 or c == 91:
        return -2, np.int64(0)
    if c == 45 or 48 <= c <= 57:
        v, ok = _int(buf, s, e)
        if ok:
            return V_INT, v
        integer = True
        for k in range(s, e):
            if buf[k] == 46 or buf[k] == 101 or buf[k] == 69:
                integer = False
        if integer:
            return -2, np.int64(0)  # past 18 digits
    if c == 34:
        for k in range(s, e):
            if buf[k] == 92:
                return -2, np.int64(0)  # an escape: decoded by FALLBACK
    code = _insert(vslots, voff, vhash, vdata, vcount, buf, s, e, False)
    if code < 0:
        return -1, np.int64(0)
    return V_CODE, code


@kernel
def _put_values(
    table: I64,
    r: int,
    buf: U8,
    fields: Any,
    vslots: I64,
    voff: I64,
    vhash: U64,
    vdata: U8,
    vcount: I64,
) -> int:  # pragma: no cover - compiled
    """Row ``r`` of ``table``: each field (column, start, end of its value
    in ``buf``) as (kind, value) in columns (column, column + 1); 0, or
    -1 (a dictionary is full: grow) / -2 (FALLBACK)."""
    for col, s, e in fields:
        if col < 0:
            continue
        kd, v = _scalar(buf, s, e, vslots, voff, vhash, vdata, vcount)
        if kd < 0:
            return -1 if kd == -1 else -2
        table[r, col] = kd
        table[r, col + 1] = v
    return 0


@kernel
def _compact(buf: U8, s: int, e: int, out: U8, o: int) -> int:  # pragma: no cover - compiled
    """Copy the JSON value ``buf[s:e]`` to ``out[o:]`` as the attrs
    encoder writes it (no whitespace; a decimal number as a string):
    the index after it, -1 past ``out``, -2 when it would not be the same."""
    i = s
    in_string = False
    while i < e:
        c = buf[i]
        if in_string and c == 92:
            return -2
        if not in_string and (c == 32 or c == 10 or c == 13 or c == 9):
            i += 1
            continue
        if in_string or c == 34:
            if c == 34:
                in_string = not in_string
            if o >= len(out):
                return -1
            out[o] = c
            o += 1
            i += 1
            continue
        if c == 45 or 48 <= c <= 57:
            j = i
            point = -1
            while j < e and (
                buf[j] == 45 or buf[j] == 43 or buf[j] == 46 or buf[j] == 101 or buf[j] == 69 or 48 <= buf[j] <= 57
            ):
                if buf[j] == 101 or buf[j] == 69:
                    return -2  # an exponent: str(Decimal) may write it otherwise
                if buf[j] == 46:
                    point = j
                j += 1
            if point < 0:
                if buf[i] == 45 and j - i == 2 and buf[i + 1] == 48:
                    return -2  # -0: decoded as 0
                if o + (j - i) > len(out):
                    return -1
                for k in range(i, j):
                    out[o] = buf[k]
                    o += 1
            else:
                # a decimal: written as str(Decimal(text)), the text itself
                # unless its adjusted exponent is below -6 (then scientific)
                digits = 0
                leading = True
                for k in range(i, j):
                    b = buf[k]
                    if 48 <= b <= 57:
                        if leading and b == 48:
                            continue
                        leading = False
                        digits += 1
                if digits == 0:
                    digits = 1
                if digits - 1 - (j - point - 1) < -6:
                    return -2
                if o + (j - i) + 2 > len(out):
                    return -1
                out[o] = 34
                o += 1
                for k in range(i, j):
                    out[o] = buf[k]
                    o += 1
                out[o] = 34
                o += 1
            i = j
            continue
        if o >= len(out):
            return -1
        out[o] = c
        o += 1
        i += 1
    return o


@kernel
def scan(
    buf: U8,
    pos: int,
    n: int,
    final: bool,
    index: int,
    ops: I64,
    devs: I64,
    syncs: I64,
    mems: I64,
    flows: I64,
    attrs: U8,
    attr_offsets: I64,
    skipped: I64,
    counts: I64,
    nslots: I64,
    noff: I64,
    nhash: U64,
    ndata: U8,
    ncount: I64,
    cslots: I64,
    coff: I64,
    chash: U64,
    cdata: U8,
    ccount: I64,
    vslots: I64,
    voff: I64,
    vhash: U64,
    vdata: U8,
    vcount: I64,
    event_keys: U8,
    event_key_offsets: I64,
    arg_keys: U8,
    arg_key_offsets: I64,
    quoted_kept: U8,
    quoted_kept_offsets: I64,
    categories: U8,
    category_offsets: I64,
    host_shown: U8,
    host_shown_offsets: I64,
    memory_name: U8,
    ac2g: U8,
) -> tuple[int, int, int, int]:  # pragma: no cover - compiled
    """Scan events of ``buf[pos:n]`` (after the list's ``[`` or after an
    event's comma); returns (status, position, event index, reason).
    ``final``: no text comes after ``buf[:n]``."""
    stack = np.zeros(900, dtype=np.uint8)
    ev_s = np.full(9, -1, dtype=np.int64)
    ev_e = np.full(9, -1, dtype=np.int64)
    ev_x = np.zeros(9, dtype=np.bool_)  # the field is a string with an escape
    ar_s = np.full(len(arg_key_offsets) - 1, -1, dtype=np.int64)
    ar_e = np.full(len(arg_key_offsets) - 1, -1, dtype=np.int64)
    n_host = 7
    n_dev = 5
    first = index == 0
    while True:
        start = pos
        i = _ws(buf, pos, n)
        if i >= n:
            return (FALLBACK if final else MORE), start, index, 1
        c = buf[i]
        if c == 93:  # the list's end
            return DONE, i + 1, index, 0
        if c == 44:
            if first:
                return FALLBACK, start, index, 2
            i = _ws(buf, i + 1, n)
            if i >= n:
                return (FALLBACK if final else MORE), start, index, 1
            c = buf[i]
        elif not first:
            return FALLBACK, start, index, 3
        if c != 123:
            # not an object: FALLBACK names the event (or the malformed text)
            return FALLBACK, start, index, 4
        # room for this event in every table
        if (
            counts[0] + 1 >= len(ops)
            or counts[1] + 1 >= len(devs)
            or counts[2] + 1 >= len(syncs)
            or counts[3] + 1 >= len(mems)
            or counts[4] + 1 >= len(flows)
            or counts[0] + 2 >= len(attr_offsets)
        ):
            return GROW, start, index, 0
        for k in range(9):
            ev_s[k] = -1
            ev_e[k] = -1
            ev_x[k] = False
        # the event's keys
        i = _ws(buf, i + 1, n)
        if i >= n:
            return (FALLBACK if final else MORE), start, index, 1
        if buf[i] == 125:
            i += 1
        else:
            while True:
                if buf[i] != 34:
                    return FALLBACK, start, index, 5
                ks = i + 1
                j, esc = _string(buf, i, n)
                if j < 0:
                    return (FALLBACK if (final or j == _BAD) else MORE), start, index, 6
                ke = j - 1
                i = _ws(buf, j, n)
                if i >= n:
                    return (FALLBACK if final else MORE), start, index, 1
                if buf[i] != 58:
                    return FALLBACK, start, index, 7
                i = _ws(buf, i + 1, n)
                if i >= n:
                    return (FALLBACK if final else MORE), start, index, 1
                vs = i
                j = _value(buf, i, n, stack)
                if j < 0:
                    return (FALLBACK if (final or j == _BAD) else MORE), start, index, 8
                key = -1 if esc else _match(buf, ks, ke, event_keys, event_key_offsets)
                if esc:
                    return FALLBACK, start, index, 9  # an escaped key: the decoders may read it as one of ours
                if key >= 0:
                    ev_s[key] = vs
                    ev_e[key] = j
                    if buf[vs] == 34:
                        for k in range(vs, j):
                            if buf[k] == 92:
                                ev_x[key] = True
                i = _ws(buf, j, n)
                if i >= n:
                    return (FALLBACK if final else MORE), start, index, 1
                if buf[i] == 44:
                    i = _ws(buf, i + 1, n)
                    if i >= n:
                        return (FALLBACK if final else MORE), start, index, 1
                    continue
                if buf[i] == 125:
                    i += 1
                    break
                return FALLBACK, start, index, 10
        end_of_event = i
        # --- what the event is ---
        ph_s = ev_s[K_PH]
        if ph_s < 0 or buf[ph_s] == 110:  # no ph, or null: the format refuses it (FALLBACK says so)
            return FALLBACK, start, index, 11
        if ev_x[K_PH]:
            return FALLBACK, start, index, 11
        if buf[ph_s] != 34:
            index += 1
            pos = end_of_event
            first = False
            continue  # a ph of another type: not an event the graph reads
        ph = 0
        if ev_e[K_PH] - ph_s == 3:
            ph = buf[ph_s + 1]
        kind = 0  # 1 host, 2 device, 3 sync, 4 memory, 5 flow
        cat_class = -1
        if ph == 88:  # X
            cs = ev_s[K_CAT]
            named = cs >= 0 and buf[cs] != 110  # (no category, or null: "")
            if named and (buf[cs] != 34 or ev_x[K_CAT]):
                return FALLBACK, start, index, 12
            if named:
                cat_class = _match(buf, cs + 1, ev_e[K_CAT] - 1, categories, category_offsets, True)
            if cat_class < 0:  # a span of a category the graph does not read: counted
                a, b = (cs + 1, ev_e[K_CAT] - 1) if named else (0, 0)
                code = _insert(cslots, coff, chash, cdata, ccount, buf, a, b, True)
                if code < 0 or code >= len(skipped):
                    return GROW, start, index, 0
                skipped[code] += 1
                index += 1
                pos = end_of_event
                first = False
                continue
            if cat_class < n_host:
                kind = 1
            elif cat_class < n_host + n_dev:
                kind = 2
            else:
                kind = 3
        elif ph == 105 or ph == 73:  # i, I
            if ev_x[K_NAME]:
                return FALLBACK, start, index, 12
            ns_ = ev_s[K_NAME]
            if ns_ >= 0 and _same(buf, ns_ + 1, ev_e[K_NAME] - 1, memory_name) and buf[ns_] == 34:
                kind = 4
        elif ph == 115 or ph == 102:  # s, f
            if ev_x[K_CAT]:
                return FALLBACK, start, index, 12
            cs = ev_s[K_CAT]
            if cs >= 0 and buf[cs] == 34 and _same(buf, cs + 1, ev_e[K_CAT] - 1, ac2g):
                kind = 5
        if kind == 0:
            index += 1
            pos = end_of_event
            first = False
            continue
        # times
        ts_s = ev_s[K_TS]
        if ts_s < 0 or not (buf[ts_s] == 45 or 48 <= buf[ts_s] <= 57):
            return FALLBACK, start, index, 13  # no ts, or one FALLBACK reads (a string) or refuses
        ts, ok = _ns(buf, ts_s, ev_e[K_TS])
        if not ok:
            return FALLBACK, start, index, 14
        end = ts
        if kind <= 3:
            du_s = ev_s[K_DUR]
            if du_s < 0 or not (buf[du_s] == 45 or 48 <= buf[du_s] <= 57):
                return FALLBACK, start, index, 15
            dur, ok = _ns(buf, du_s, ev_e[K_DUR])
            if not ok or dur < 0:
                return FALLBACK, start, index, 16
            end = ts + dur
        # the name: a string (or none)
        name_code = -1
        if kind <= 3:
            ns_ = ev_s[K_NAME]
            if ns_ < 0 or buf[ns_] == 110:
                name_code = _insert(nslots, noff, nhash, ndata, ncount, buf, 0, 0, False)
            elif buf[ns_] == 34:
                name_code = _insert(nslots, noff, nhash, ndata, ncount, buf, ns_ + 1, ev_e[K_NAME] - 1, False)
            else:
                return FALLBACK, start, index, 17
            if name_code < 0:
                return GROW, start, index, 0
        # the args
        for k in range(len(ar_s)):
            ar_s[k] = -1
            ar_e[k] = -1
        as_ = ev_s[K_ARGS]
        if kind != 5 and as_ >= 0:
            c = buf[as_]
            if c == 123:
                i = _ws(buf, as_ + 1, n)
                if buf[i] != 125:
                    while True:
                        ks = i + 1
                        j, esc = _string(buf, i, n)
                        if esc:
                            return FALLBACK, start, index, 18
                        ke = j - 1
                        i = _ws(buf, j, n)
                        i = _ws(buf, i + 1, n)  # past the colon (checked above)
                        vs = i
                        j = _value(buf, i, n, stack)
                        a = _match(buf, ks, ke, arg_keys, arg_key_offsets)
                        if a >= 0:
                            ar_s[a] = vs
                            ar_e[a] = j
                        i = _ws(buf, j, n)
                        if buf[i] == 44:
                            i = _ws(buf, i + 1, n)
                            continue
                        break
            elif c == 91:
                if buf[_ws(buf, as_ + 1, n)] != 93:
                    return FALLBACK, start, index, 19  # args neither an object nor empty
            elif c == 34:
                if ev_e[K_ARGS] - as_ != 2:
                    return FALLBACK, start, index, 19
            elif not (c == 102 or c == 110 or (c == 48 and ev_e[K_ARGS] - as_ == 1)):  # false, null, 0
                return FALLBACK, start, index, 19
        # --- the row ---
        if kind == 1:
            r = counts[0]
            ops[r, O_INDEX] = index
            ops[r, O_NAME] = name_code
            ops[r, O_CAT] = cat_class
            kd, v = _scalar(buf, ev_s[K_PID], ev_e[K_PID], vslots, voff, vhash, vdata, vcount)
            if kd < 0:
                return (GROW if kd == -1 else FALLBACK), start, index, 20
            ops[r, O_PID] = kd
            ops[r, O_PIDV] = v
            kd, v = _scalar(buf, ev_s[K_TID], ev_e[K_TID], vslots, voff, vhash, vdata, vcount)
            if kd < 0:
                return (GROW if kd == -1 else FALLBACK), start, index, 20
            ops[r, O_TID] = kd
            ops[r, O_TIDV] = v
            ops[r, O_TS] = ts
            ops[r, O_END] = end
            a = 5  # correlation
            kd, v = _scalar(buf, ar_s[a], ar_e[a], vslots, voff, vhash, vdata, vcount)
            if kd < 0:
                return (GROW if kd == -1 else FALLBACK), start, index, 21
            ops[r, O_CORR] = kd
            ops[r, O_CORRV] = v
            # attrs: {"category":..,"pid":..,"tid":..[, kept args]}
            o = counts[6]
            if o + (end_of_event - start) + 128 > len(attrs):
                return GROW, start, index, 0
            for b in b'{"category":"':
                attrs[o] = b
                o += 1
            for k in range(host_shown_offsets[cat_class], host_shown_offsets[cat_class + 1]):
                attrs[o] = host_shown[k]
                o += 1
            for f in (K_PID, K_TID):
                for b in b'","pid":' if f == K_PID else b',"tid":':
                    attrs[o] = b
                    o += 1
                if ev_s[f] < 0:
                    for b in b"null":
                        attrs[o] = b
                        o += 1
                else:
                    o = _compact(buf, ev_s[f], ev_e[f], attrs, o)
                    if o < 0:
                        return (GROW if o == -1 else FALLBACK), start, index, 22
            for a in range(len(quoted_kept_offsets) - 1):
                if ar_s[a] < 0:
                    continue
                for k in range(quoted_kept_offsets[a], quoted_kept_offsets[a + 1]):
                    attrs[o] = quoted_kept[k]
                    o += 1
                o = _compact(buf, ar_s[a], ar_e[a], attrs, o)
                if o < 0:
                    return (GROW if o == -1 else FALLBACK), start, index, 23
            attrs[o] = 125
            o += 1
            counts[6] = o
            attr_offsets[r + 1] = o
            counts[0] = r + 1
        else:
            # the row of a device span, sync record, memory record or flow:
            # its fixed columns, then its values (NONE: a field it has not)
            if kind == 2 or kind == 3:
                dev_s, dev_e = (ar_s[8], ar_e[8]) if ar_s[8] >= 0 else (ev_s[K_PID], ev_e[K_PID])  # device, else pid
                str_s, str_e = ar_s[7], ar_e[7]
                if str_s < 0 and kind == 2:  # a device span's stream: else its tid
                    str_s, str_e = ev_s[K_TID], ev_e[K_TID]
                shared = ((X_DEV, dev_s, dev_e), (X_STREAM, str_s, str_e), (X_CORR, ar_s[5], ar_e[5]))
                if kind == 2:
                    table, t_col = devs, 1
                    devs[counts[1], D_NAME] = name_code
                    devs[counts[1], D_CAT] = cat_class - n_host
                    own = (
                        (D_BYTES, ar_s[10], ar_e[10]),
                        (D_COLL, ar_s[11], ar_e[11]),
                        (D_GROUP, ar_s[12], ar_e[12]),
                        (D_RANKS, ar_s[13], ar_e[13]),
                    )
                else:
                    table, t_col = syncs, 2
                    kind_s, kind_e = (ar_s[14], ar_e[14]) if ar_s[14] >= 0 else (ev_s[K_NAME], ev_e[K_NAME])
                    own = (
                        (S_KIND, kind_s, kind_e),
                        (S_WSTREAM, ar_s[15], ar_e[15]),
                        (S_WREC, ar_s[16], ar_e[16]),
                        NONE,
                    )
                fields = shared + own
                times = (X_TS, X_END)
            elif kind == 4:
                if ar_s[17] < 0:
                    return FALLBACK, start, index, 27  # [memory] without Bytes: refused
                table, t_col = mems, 3
                fields = (
                    (M_PID, ev_s[K_PID], ev_e[K_PID]),
                    (M_TID, ev_s[K_TID], ev_e[K_TID]),
                    (M_BYTES, ar_s[17], ar_e[17]),
                    (M_ADDR, ar_s[18], ar_e[18]),
                    (M_TOTAL, ar_s[19], ar_e[19]),
                    (M_DTYPE, ar_s[20], ar_e[20]),
                    (M_DID, ar_s[21], ar_e[21]),
                )
                times = (M_TS, -1)
            else:
                table, t_col = flows, 4
                flows[counts[4], F_END] = 1 if ph == 102 else 0
                fields = (
                    (F_PID, ev_s[K_PID], ev_e[K_PID]),
                    (F_TID, ev_s[K_TID], ev_e[K_TID]),
                    (F_ID, ev_s[K_ID], ev_e[K_ID]),
                    NONE,
                    NONE,
                    NONE,
                    NONE,
                )
                times = (F_TS, -1)
            r = counts[t_col]
            table[r, 0] = index
            table[r, times[0]] = ts
            if times[1] >= 0:
                table[r, times[1]] = end
            got = _put_values(table, r, buf, fields, vslots, voff, vhash, vdata, vcount)
            if got < 0:
                return (GROW if got == -1 else FALLBACK), start, index, 24
            counts[t_col] = r + 1
        index += 1
        pos = end_of_event
        first = False


_TRACE_EVENTS = np.frombuffer(b"traceEvents", dtype=np.uint8).copy()


@kernel
def _events_start(buf: U8, n: int) -> Any:  # pragma: no cover - compiled
    """The index after the ``[`` of the top-level ``traceEvents`` list;
    -1: more text needed, -2: not what this reads."""
    stack = np.zeros(900, dtype=np.uint8)
    i = _ws(buf, 0, n)
    if i >= n:
        return -1
    if buf[i] != 123:
        return -2
    i = _ws(buf, i + 1, n)
    while True:
        if i >= n:
            return -1
        if buf[i] != 34:
            return -2
        ks = i + 1
        j, esc = _string(buf, i, n)
        if j < 0:
            return j
        if esc:
            return -2
        i = _key(buf, i, n)  # past the key, its colon and the space after
        if i < 0:
            return i
        if _same(buf, ks, j - 1, _TRACE_EVENTS):
            if buf[i] != 91:
                return -2
            return i + 1
        j = _value(buf, i, n, stack)
        if j < 0:
            return j
        i = _ws(buf, j, n)
        if i >= n:
            return -1
        if buf[i] != 44:
            return -2
        i = _ws(buf, i + 1, n)


def run(cols: Columns, buf: np.ndarray, pos: int, n: int, final: bool, index: int) -> tuple[int, int, int, int]:
    """:func:`scan` over ``buf[pos:n]`` with ``cols``' tables, growing them as needed."""
    buf = read_only(buf)  # one compilation, whether buf came from the file or was joined here
    while True:
        status, at, index, reason = scan(
            buf,
            pos,
            n,
            final,
            index,
            cols.ops,
            cols.devs,
            cols.syncs,
            cols.mems,
            cols.flows,
            cols.attrs,
            cols.attr_offsets,
            cols.skipped,
            cols.n,
            *_dictionary(cols.names),
            *_dictionary(cols.cats),
            *_dictionary(cols.values),
            *_EVENT_KEYS,
            *_ARG_KEYS,
            *_QUOTED_KEPT,
            *_CATEGORIES,
            *_HOST_SHOWN,
            _MEMORY_NAME,
            _AC2G,
        )
        if status != GROW:
            return int(status), int(at), int(index), int(reason)
        cols.grow()
        pos = at


def _dictionary(d: Dictionary) -> tuple[I64, I64, U64, U8, I64]:
    return d.slots, d.offsets, d.hashes, d.data, d.count


def events_start(buf: np.ndarray, n: int) -> int:
    return int(_events_start(read_only(buf), n))
