"""Append-only chunk files: the one on-disk format of the project's stores (title embeddings, teacher targets).

A chunk is self-describing, so a store's index is rebuilt from its chunks on open and no second file can fall out of
step with them::

    MAGIC | sha256 hex of everything after it (64 B) | header length (uint64 LE) | header JSON | pad | payload

The payload starts on a 64-byte boundary, so np.memmap / np.frombuffer views of it are aligned. A chunk appears only
through rename(2) (`atomic_write_bytes`), so a kill loses at most the chunk being written. The one corruption policy
of every store: a chunk that fails its checks is moved aside to `<name>.corrupt` with a warning that names it, and
the store recomputes what it held.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

ALIGN = 64


class ChunkCorrupt(Exception):
    """A chunk file fails its checks; the message says which."""


def pack(magic: bytes, header: dict, payload: bytes) -> bytes:
    """The bytes of one chunk file (write them with lib.common.paths.atomic_write_bytes)."""
    head = json.dumps(header, ensure_ascii=False).encode("utf-8")
    head = struct.pack("<Q", len(head)) + head
    body = head + b"\0" * ((-(len(magic) + 64 + len(head))) % ALIGN) + payload
    return magic + hashlib.sha256(body).hexdigest().encode() + body


def read_header(path: Path, magic: bytes, verify: bool = True) -> tuple[dict, int]:
    """(header, payload offset) of the chunk at `path`; raises ChunkCorrupt on a bad magic, a truncated file, a sha256
    mismatch (checked when `verify`, streamed so a large chunk is not held in memory) or an unreadable header."""
    n0 = len(magic) + 64
    with open(path, "rb") as fh:
        data = fh.read(n0 + 8)
        if len(data) < n0 + 8 or data[: len(magic)] != magic:
            raise ChunkCorrupt("bad magic or truncated")
        digest = data[len(magic) : n0].decode("ascii", "replace")
        (hlen,) = struct.unpack("<Q", data[n0:])
        if verify:
            h = hashlib.sha256(data[n0:])
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
            if h.hexdigest() != digest:
                raise ChunkCorrupt("sha256 mismatch")
        fh.seek(n0 + 8)
        try:
            header = json.loads(fh.read(hlen).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ChunkCorrupt("unreadable header") from None
    offset = n0 + 8 + hlen
    return header, offset + (-offset) % ALIGN


def payload_size(path: Path, offset: int) -> int:
    """Bytes after the payload offset (a caller compares it with what its header promises)."""
    return path.stat().st_size - offset
