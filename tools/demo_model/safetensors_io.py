"""Minimal safetensors reader/writer (no dependency on the `safetensors` package).

Format: 8-byte little-endian header length N, N bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}), then the
data block; offsets are relative to its start. Tensors are written in alphabetical order, the
header is padded with spaces to a multiple of 8 bytes.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Dict, Optional, Tuple

import numpy as np
import torch

# safetensors dtype tag -> (torch dtype, bytes per element)
_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8,
}
_TAGS = {v: k for k, v in _DTYPES.items()}


def load(path: str) -> Tuple[Dict[str, torch.Tensor], Dict[str, str]]:
    """Read every tensor of a safetensors file (CPU tensors) and its metadata."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt = _DTYPES[info["dtype"]]
        buf = bytearray(raw[base + b:base + e])  # own copy, writable
        # Interpret the bytes via a uint8 tensor, then reinterpret as the target dtype.
        t = torch.frombuffer(buf, dtype=torch.uint8) if len(buf) else torch.zeros(0, dtype=torch.uint8)
        t = t.view(dt) if len(buf) else torch.zeros(0, dtype=dt)
        out[name] = t.reshape(info["shape"]).clone()
    return out, meta


def save(path: str, tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None):
    """Write tensors (any device; stored as-is in their dtype) atomically to ``path``."""
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, off = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _TAGS[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
