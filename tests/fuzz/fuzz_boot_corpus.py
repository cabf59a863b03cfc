#!/usr/bin/env python3
"""Write the seed corpus of tests/fuzz/fuzz_boot (boot-corpus/): well-formed and broken hellos,
handshakes and frames, in the chunk format of boot_tcp_fuzz_root/rank (core/bootstrap_tcp.c).
Run from anywhere: python3 tests/fuzz/fuzz_boot_corpus.py"""
import os
import struct

SECRET = b"mscclpp bootstrap fuzz secret..\0"
VERSION = 3
ROOT, RANK = b"\x00", b"\x01"


def chunk(conn, data, close=False):
    out = b""
    while True:
        part, data = data[:255], data[255:]
        out += bytes([conn | (0x80 if close and not data else 0), len(part)]) + part
        if not data:
            return out


def hello(rank, nranks, secret=SECRET, magic=b"MSCCLPPH", version=VERSION):
    addr = struct.pack(">HH4s12x", 4, 40000 + rank, bytes([127, 0, 0, 1]))
    return magic + struct.pack(">HH", version, 0) + secret + struct.pack(">II", rank, nranks) + addr


def handshake(rank, nranks, secret=SECRET, magic=b"MSCCLPPC", version=VERSION):
    return magic + struct.pack(">HH", version, 0) + secret + struct.pack(">II", rank, nranks)


def frame(kind, tag, payload, length=None):
    n = len(payload) if length is None else length
    return struct.pack(">IIQ", kind, tag & 0xFFFFFFFF, n) + payload


def seeds():
    bad_secret = bytes(b ^ 1 for b in SECRET)
    # Root: byte 1 is the nranks a rank of the root's process announced (0: none).
    yield "root-two-ranks", ROOT + b"\x00" + chunk(0, hello(0, 2)) + chunk(1, hello(1, 2))
    yield "root-expect-two", ROOT + b"\x02" + chunk(0, hello(1, 2)) + chunk(1, hello(0, 2))
    yield "root-squatter", ROOT + b"\x00" + chunk(2, hello(0, 1)) + chunk(0, hello(0, 3)) + \
        chunk(1, hello(1, 3)) + chunk(3, hello(2, 3))
    yield "root-squatter-refused", ROOT + b"\x03" + chunk(2, hello(0, 1)) + \
        chunk(0, hello(0, 3)) + chunk(1, hello(1, 3))
    h = hello(1, 4)
    yield "root-split-hello", ROOT + b"\x00" + chunk(0, h[:10]) + chunk(1, hello(0, 4)) + \
        chunk(0, h[10:50]) + chunk(0, h[50:])
    yield "root-bad-secret", ROOT + b"\x00" + chunk(0, hello(0, 2, bad_secret)) + \
        chunk(1, hello(0, 2))
    yield "root-bad-magic", ROOT + b"\x00" + chunk(0, hello(0, 2, magic=b"MSCCLPPX"))
    yield "root-old-version", ROOT + b"\x00" + chunk(0, hello(0, 2, version=1))
    yield "root-rank-range", ROOT + b"\x00" + chunk(0, hello(5, 2)) + chunk(1, hello(0, 0)) + \
        chunk(2, hello(0, 0xFFFFFFFF)) + chunk(3, hello(7, (1 << 20) + 1))
    yield "root-duplicate", ROOT + b"\x00" + chunk(0, hello(0, 3)) + chunk(1, hello(0, 3)) + \
        chunk(2, hello(2, 3))
    yield "root-close-early", ROOT + b"\x00" + chunk(0, hello(0, 2)[:30], close=True) + \
        chunk(1, hello(1, 2), close=True)
    yield "root-many-groups", ROOT + b"\x00" + b"".join(
        chunk(i, hello(0, 2 + i)) for i in range(6))
    yield "root-pending-cap", ROOT + b"\x00" + b"".join(chunk(i, b"M") for i in range(8)) + \
        chunk(7, hello(0, 1)[1:])
    # Rank (rank 1 of 4): handshakes, then frames on verified connections.
    hs0 = handshake(0, 4)
    yield "rank-frames", RANK + chunk(0, hs0 + frame(0, 5, b"abc") + frame(1, 0, b"") +
                                      frame(2, 0, b"\x01") + frame(0, -5, bytes(range(200))))
    yield "rank-abort", RANK + chunk(0, hs0 + frame(3, 2, b"rank 0: connection to rank 2 closed"))
    yield "rank-abort-binary", RANK + chunk(0, hs0 + frame(3, 7, bytes([0, 1, 0x1B, 0xFF]) * 8))
    yield "rank-abort-too-long", RANK + chunk(0, hs0 + frame(3, 2, b"x" * 100, length=5000))
    yield "rank-huge-frame", RANK + chunk(0, hs0 + frame(0, 1, b"", length=(1 << 40) + 1))
    yield "rank-big-frame", RANK + chunk(0, hs0 + frame(0, 1, b"z" * 100, length=1 << 20))
    yield "rank-bye", RANK + chunk(0, hs0 + frame(0, 5, b"abc") + frame(4, 0, b""), close=True)
    yield "rank-bye-with-payload", RANK + chunk(0, hs0 + frame(4, 0, b"x"))
    yield "rank-bad-kind", RANK + chunk(0, hs0 + frame(9, 1, b"q"))
    yield "rank-bad-handshakes", RANK + chunk(0, handshake(0, 5)) + chunk(1, handshake(1, 4)) + \
        chunk(2, handshake(9, 4)) + chunk(3, handshake(2, 4, bad_secret)) + \
        chunk(4, handshake(3, 4, magic=b"MSCCLPPH")) + chunk(5, handshake(3, 4, version=1))
    yield "rank-same-peer-twice", RANK + chunk(0, hs0) + chunk(1, hs0 + frame(0, 1, b"a")) + \
        chunk(0, frame(0, 1, b"b"))
    f = frame(0, 3, b"0123456789" * 30)
    yield "rank-split-close", RANK + chunk(0, hs0 + f[:7]) + chunk(2, handshake(2, 4)) + \
        chunk(0, f[7:100]) + chunk(0, f[100:200], close=True) + chunk(2, frame(1, 0, b"k"))
    yield "rank-three-peers", RANK + chunk(0, hs0) + chunk(1, handshake(2, 4)) + \
        chunk(2, handshake(3, 4)) + chunk(0, frame(1, 0, b"0" * 8)) + \
        chunk(1, frame(1, 0, b"2" * 8)) + chunk(2, frame(2, 0, b"\x01"))


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot-corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
