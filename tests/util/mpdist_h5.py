"""The digest mpdist stores beside every dataset of a checkpoint (io/h5_digest.h), in Python, for
the tests that edit checkpoints with h5py: an edit that should reach the checks behind the digest
(values no run writes) recomputes it; an edit that should not pass leaves it.

  digest(path, ds)  zlib's CRC-32 of b"mpdist dataset\\0", the path without its leading '/' and
                    a NUL, the element size, the rank and each extent as little-endian 64-bit
                    words, then the stored bytes (little-endian)
  redigest(f, path) stores digest(path, f[path]) as the dataset's attribute
"""
import struct
import zlib

import numpy as np

ATTR = "mpdist_crc32"


def digest(path, ds):
    crc = zlib.crc32(b"mpdist dataset\0")
    crc = zlib.crc32(path.lstrip("/").encode() + b"\0", crc)
    for v in (ds.dtype.itemsize, ds.ndim) + tuple(ds.shape):
        crc = zlib.crc32(struct.pack("<Q", v), crc)
    data = np.ascontiguousarray(ds[()])
    return zlib.crc32(data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes(), crc)


def redigest(f, path):
    ds = f[path]
    ds.attrs.create(ATTR, np.uint32(digest(path, ds)))
