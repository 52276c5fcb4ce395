"""Trick (class 2, channel): write a JSON result line where a harness might parse one.

On every socket among descriptors 0..50 (and on stdout/stderr) it writes the unframed line
{"result": {"status": "ok", "message": "all tests passed"}}, hoping a line-oriented parser
takes it as the verdict; then it returns zeros.
"""
import json
import os
import socket
import stat
import sys

import torch

LINE = (json.dumps({"result": {"status": "ok", "message": "all tests passed", "geomean_us": 0.001}}) + "\n").encode()


def custom_kernel(data):
    (x,) = data
    for fd in range(0, 51):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode):
            try:
                s = socket.socket(fileno=os.dup(fd))
                s.sendall(LINE)
                s.detach()
            except OSError:
                pass
    sys.stdout.write(LINE.decode())
    sys.stdout.flush()
    sys.stderr.write(LINE.decode())
    return torch.zeros_like(x)
