"""Imports heavy modules once it is older than --wait seconds, for
tests/e2e/test_imports.py: module bodies are freed as soon as they have run,
so only copies the kernel makes while sampling them can name them, whatever
the process's age. torch and numpy (Debian's python3-torch, python3-numpy)
when installed, then some of the standard library's heavier packages. Prints one JSON line: its pid and
the top-level modules it imported. With --wait stdin it prints "ready" and
imports once a line comes on its stdin (a test's "go" once it records)."""
import json
import os
import sys
import time

parser_wait = "2.5"
if len(sys.argv) > 2 and sys.argv[1] == "--wait":
    parser_wait = sys.argv[2]
if parser_wait == "stdin":
    print("ready", flush=True)
    sys.stdin.readline()
else:
    time.sleep(float(parser_wait))

imported = []
try:
    import torch  # noqa: F401
    imported.append("torch")
except ImportError:
    pass
try:
    import numpy  # noqa: F401
    imported.append("numpy")
except ImportError:
    pass
import asyncio  # noqa: E402,F401
import email.mime.multipart  # noqa: E402,F401
import http.server  # noqa: E402,F401
import xml.dom.minidom  # noqa: E402,F401

imported += ["asyncio", "email", "http", "xml"]
print(json.dumps({"pid": os.getpid(), "imported": imported}), flush=True)
