#!/usr/bin/env python3
"""A process other than the session's owner presents a restored
checkpoint's token to the server (migrate.sh): the server must refuse it
("belongs to another process") and keep the checkpoint for its owner.
Usage: resume_forged.py SOCKET CHECKPOINT_FILE"""
import socket
import struct
import sys

sock_path, ckpt = sys.argv[1], sys.argv[2]
with open(ckpt, "rb") as f:
    header = f.read(96)
token = header[80:96]  # CheckpointHeader::token (wormhole/server/checkpoint.hpp)
hello = struct.pack("<IHHIIQ", 0x4F4C4857, 3, 3, 1, 1, 0) + token  # Hello (kHelloResume) + ResumeHello
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sock_path)
s.sendall(hello)
reply = b""
while len(reply) < 120:
    chunk = s.recv(120 - len(reply))
    if not chunk:
        break
    reply += chunk
magic, status = struct.unpack("<Ii", reply[:8])
message = reply[24:120].split(b"\0")[0].decode()
print(f"status {status}: {message}")
sys.exit(0 if magic == 0x4F4C4857 and status != 0 and "another process" in message else 1)
