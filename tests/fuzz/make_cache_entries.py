"""Writes the seed entries of fuzz_cache_entry.c (corpus/cache_entry): an
object entry and a PTX entry in the cache's format 2 (runtime/disk_cache.c),
under the harness's key and secret.

    python3 tests/fuzz/make_cache_entries.py
"""

import hashlib
import hmac
import pathlib
import struct

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = bytes(range(32))


def entry(ext, payload):
    header = b"EMBRCODE" + struct.pack("<II", 2, 0) + KEY + ext.ljust(8, b"\0") + struct.pack("<Q", len(payload))
    mac = hmac.new(SECRET, header + bytes(32) + payload, hashlib.sha256).digest()
    return header + mac + payload


out = pathlib.Path(__file__).resolve().parent / "corpus" / "cache_entry"
out.mkdir(parents=True, exist_ok=True)
(out / "object.entry").write_bytes(entry(b"o", b"\x7fELF\x02\x01\x01" + bytes(41)))
(out / "ptx.entry").write_bytes(entry(b"ptx", b".version 8.0\n.target sm_90\n"))
