#!/usr/bin/env python3
"""Fails when a protobuf message is compared or hashed through its serialized bytes.

Serialized bytes are not canonical (map entries come out in the map's order; deterministic
serialization holds within one protobuf build only), so equality goes through
loom::proto::SameMessage and fingerprints through loom::proto::CanonicalFingerprint
(api/proto_util/fingerprint.h). Serializing to store or send a message is fine; a line
that serializes and also compares (==, !=, EXPECT_/ASSERT_ equality), hashes (Fnv1a64,
std::hash, *Hash*) or builds a key from the bytes is reported.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERIALIZE = re.compile(r"\.Serialize(Partial)?(AsString|ToString)\(")
SUSPECT = re.compile(r"==|!=|\b(EXPECT|ASSERT)_(EQ|NE)\b|Fnv1a|std::hash|[Hh]ash\(|\bkey\b|\bKey\(")


def main():
    files = subprocess.check_output(["git", "ls-files", "*.cc", "*.h"], cwd=ROOT,
                                    text=True).split()
    bad = []
    for f in files:
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if SERIALIZE.search(line) and SUSPECT.search(line):
                    bad.append("%s:%d: %s" % (f, n, line.strip()))
    if bad:
        print("check_serialize: messages compared or hashed by their serialized bytes "
              "(use loom::proto::SameMessage / CanonicalFingerprint):")
        print("\n".join(bad))
        return 1
    print("check_serialize: %d files, no message compared or hashed by its bytes" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
