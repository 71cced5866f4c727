"""A content hash of a frame: the same rows and columns give the same hash, in any process."""

from __future__ import annotations

import hashlib

import pandas as pd


def frame_content_hash(frame: pd.DataFrame) -> str:
    """Return a short sha256 over column names, dtypes and row values (row order matters).

    Callers sort before hashing; the hash is the partition's DataVersion, so it must change
    exactly when the content does.
    """
    digest = hashlib.sha256()
    digest.update(repr([(str(c), str(t)) for c, t in frame.dtypes.items()]).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()[:16]
