"""The project's two fingerprints: of a configuration (checkpoints, caches and run folders are reused only for the
same one) and of a text (the key of a cached sentence)."""

from __future__ import annotations

import hashlib
import json


def config_digest(obj) -> str:
    """A short, stable fingerprint of a JSON-able configuration (key order does not matter; other objects by str)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def text_key(text: str) -> str:
    """The cache key of one text: sha1 of its UTF-8 bytes (40 hex digits; a key, not a security measure)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()
