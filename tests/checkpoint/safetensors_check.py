#!/usr/bin/env python3
"""An independent check of trident's safetensors files, using only struct, json and numpy.

  safetensors_check.py check FILE   parses a file trident wrote (safetensors_python_test.cc)
                                    against the format, and checks every tensor's values
  safetensors_check.py write FILE   writes a file for trident's reader to check

Both sides agree on the tensors by convention, not by sharing code:
  known.<DT>       1-D, the values KNOWN[<DT>] (exactly representable in <DT>)
  hash.<DT>        shape (3, 5), element i's bytes are the low bytes of hash(i, salt), with
                   salt = SALTS[<DT>] + (0 for trident's file, 100 for this script's)
  scalar.F64       0-d, 2.5
  empty.BF16       shape (2, 0)
  transposed.F32   trident's file only: the transpose of arange(6).reshape(2, 3)

Exit status: 0 the file is right (or was written), 1 it is wrong (the reason is printed),
77 numpy is missing (the gtest then skips).
"""
import json
import math
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed")
    sys.exit(77)

MASK = (1 << 64) - 1
DTYPES = {  # safetensors name -> (numpy dtype used to read it, bytes per element)
    "F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
    "I64": ("<i8", 8), "I32": ("<i4", 4), "U16": ("<u2", 2),
}
SALTS = {"F32": 1, "F64": 2, "BF16": 3, "F16": 4, "I32": 5, "I64": 6, "U16": 7}
FLOATS = [0.0, -0.0, 1.5, -2.0, 0.25, 3.0, 2.0 ** -14, 2.0 ** -24, 448.0, -1024.0,
          math.inf, -math.inf]
KNOWN = {
    "F32": FLOATS, "F64": FLOATS, "F16": FLOATS, "BF16": FLOATS,
    "I32": [0, 1, -1, 2**31 - 1, -2**31, 123456789],
    "I64": [0, -1, 2**63 - 1, -2**63, 2**53 + 1],
    "U16": [0, 1, 65535, 32768, 12345],
}


def hashed_bytes(n, salt, size):
    """The bytes of hashed_tensor (checkpoint_test_util.h) for n elements of `size` bytes."""
    out = bytearray()
    for i in range(n):
        h = (((i + 1) * 0x9E3779B97F4A7C15) & MASK) ^ ((salt * 0xBF58476D1CE4E5B9) & MASK)
        bits = h ^ (h >> 29)
        out += bits.to_bytes(8, "little")[:size]
    return bytes(out)


def decode(dtype, raw):
    """The values of `raw` as Python numbers; BF16 by moving its bits into a float32."""
    np_dtype, _ = DTYPES[dtype]
    a = np.frombuffer(raw, dtype=np_dtype)
    if dtype == "BF16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a


def encode(dtype, values):
    np_dtype, _ = DTYPES[dtype]
    if dtype == "BF16":
        bits = np.array(values, dtype=np.float32).view(np.uint32)
        if np.any((bits & 0xFFFF) != 0):
            raise ValueError(f"{values} are not all exact in bfloat16")
        return (bits >> 16).astype("<u2").tobytes()
    return np.array(values, dtype=np_dtype).tobytes()


def same_values(got, want):
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        g = float(g) if isinstance(w, float) else int(g)
        if isinstance(w, float) and (math.copysign(1, g) != math.copysign(1, w)):
            return False  # -0.0 vs 0.0
        if g != w:
            return False
    return True


class Bad(Exception):
    pass


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise Bad(f"duplicate keys in {keys}")
    return dict(pairs)


def parse(path):
    """Validates the layout; returns (header dict, metadata, data bytes)."""
    blob = open(path, "rb").read()
    if len(blob) < 8:
        raise Bad(f"{len(blob)} bytes: no room for the length")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise Bad(f"header length {n} past the end")
    raw_header = blob[8:8 + n]
    if n % 8 != 0:
        raise Bad(f"header length {n} is not a multiple of 8")
    text = raw_header.decode("utf-8")
    stripped = text.rstrip(" ")
    if not stripped.endswith("}") or len(text) - len(stripped) >= 8:
        raise Bad("header padding is not 0-7 spaces after the JSON")
    header = json.loads(stripped, object_pairs_hook=no_duplicates)  # dicts keep key order
    if "__metadata__" in header and next(iter(header)) != "__metadata__":
        raise Bad("__metadata__ is not first")
    metadata = header.pop("__metadata__", {})
    for k, v in metadata.items():
        if not isinstance(v, str):
            raise Bad(f"metadata {k} is not a string")
    data = blob[8 + n:]
    entries = []
    for name, info in header.items():
        if set(info) != {"dtype", "shape", "data_offsets"}:
            raise Bad(f"{name}: fields {sorted(info)}")
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        count = 1
        for d in shape:
            count *= d
        if end - begin != count * DTYPES[dtype][1]:
            raise Bad(f"{name}: {end - begin} bytes for {dtype} {shape}")
        if begin % DTYPES[dtype][1] != 0:
            raise Bad(f"{name}: misaligned at {begin}")
        entries.append((begin, end, name))
    # The header lists tensors in data order, and the data tiles the rest of the file.
    if [e[2] for e in sorted(entries)] != [e[2] for e in entries]:
        raise Bad("header order is not data order")
    cursor = 0
    for begin, end, name in sorted(entries):
        if begin != cursor:
            raise Bad(f"{name}: begins at {begin}, expected {cursor}")
        cursor = end
    if cursor != len(data):
        raise Bad(f"data section is {len(data)} bytes, tensors cover {cursor}")
    return header, metadata, data


def check(path):
    header, metadata, data = parse(path)
    if metadata != {"writer": "trident", "unicode": "ünï ✓"}:
        raise Bad(f"metadata {metadata}")
    expected = {f"known.{d}" for d in KNOWN} | {f"hash.{d}" for d in KNOWN}
    expected |= {"scalar.F64", "empty.BF16", "transposed.F32"}
    if set(header) != expected:
        raise Bad(f"tensors {sorted(header)}")

    def tensor(name):
        info = header[name]
        begin, end = info["data_offsets"]
        return info["dtype"], info["shape"], data[begin:end]

    for d, values in KNOWN.items():
        dtype, shape, raw = tensor(f"known.{d}")
        if dtype != d or shape != [len(values)]:
            raise Bad(f"known.{d}: {dtype} {shape}")
        if not same_values(decode(d, raw), values):
            raise Bad(f"known.{d}: {list(decode(d, raw))} != {values}")
        dtype, shape, raw = tensor(f"hash.{d}")
        if dtype != d or shape != [3, 5] or raw != hashed_bytes(15, SALTS[d], DTYPES[d][1]):
            raise Bad(f"hash.{d}: wrong bytes")
    dtype, shape, raw = tensor("scalar.F64")
    if dtype != "F64" or shape != [] or struct.unpack("<d", raw) != (2.5,):
        raise Bad(f"scalar.F64: {dtype} {shape} {raw!r}")
    dtype, shape, raw = tensor("empty.BF16")
    if dtype != "BF16" or shape != [2, 0] or raw != b"":
        raise Bad(f"empty.BF16: {dtype} {shape}")
    dtype, shape, raw = tensor("transposed.F32")
    got = decode("F32", raw).reshape(shape)
    if dtype != "F32" or not np.array_equal(got, np.arange(6, dtype=np.float32).reshape(2, 3).T):
        raise Bad(f"transposed.F32: {dtype} {shape} {got}")


def write(path):
    """A file as another writer might make it: data in an order that leaves some tensors
    misaligned (trident must still read it), header keys in reverse data order, spaces in
    the JSON."""
    tensors = [("empty.BF16", "BF16", [2, 0], b"")]
    for d in ["BF16", "F64", "U16", "I64", "F16", "F32", "I32"]:
        tensors.append((f"known.{d}", d, [len(KNOWN[d])], encode(d, KNOWN[d])))
        tensors.append((f"hash.{d}", d, [3, 5], hashed_bytes(15, SALTS[d] + 100, DTYPES[d][1])))
    tensors.append(("scalar.F64", "F64", [], struct.pack("<d", 2.5)))
    header, offset = {}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    ordered = {"__metadata__": {"writer": "python"}}
    ordered.update(reversed(list(header.items())))
    text = json.dumps(ordered, ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "write"):
        print(__doc__)
        return 2
    try:
        (check if sys.argv[1] == "check" else write)(sys.argv[2])
    except Bad as e:
        print(f"{sys.argv[2]}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
