"""Trick (class 2, channel): forge the runner's "done" reply on its socket, then exit.

The candidate finds the runner's socket among descriptors 0..50 (os.fstat, S_ISSOCK),
reads the current request's index from the runner's `on_call` frame, and sends a
correctly framed {"op": "done", "i": <index>, "us": 0.5, "out": <spec of the INPUT>}.
The forged output spec points at the input x in the arena (garbage for softmax), and the
runner is then ended with os._exit(0) so its own honest reply never arrives.
"""
import json
import os
import socket
import stat
import struct
import sys

import torch


def _runner_socket():
    for fd in range(0, 51):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
    return None


def _current_request():
    frame = sys._getframe(1)
    while frame is not None:
        req = frame.f_locals.get("request")
        if isinstance(req, dict) and req.get("op") == "call":
            return req
        frame = frame.f_back
    return None


def custom_kernel(data):
    (x,) = data
    req = _current_request()
    sock = _runner_socket()
    arena_mod = sys.modules.get("sandbox.shared.arena")
    runner = None
    frame = sys._getframe(0)
    while frame is not None and runner is None:
        runner = frame.f_locals.get("self") if type(frame.f_locals.get("self")).__name__ == "Runner" else None
        frame = frame.f_back
    if req is not None and sock is not None and runner is not None and runner.arena is not None:
        spec = runner.arena.spec_of(x)
        body = json.dumps({"op": "done", "i": req.get("i"), "us": 0.5, "out": {"t": spec} if False else spec},
                          separators=(",", ":")).encode()
        # The real tree format: encode() of a single tensor is its spec wrapped by the arena's encoder.
        if arena_mod is not None:
            tree = arena_mod.encode(x, lambda t: runner.arena.spec_of(t))
            body = json.dumps({"op": "done", "i": req.get("i"), "us": 0.5, "out": tree}, separators=(",", ":")).encode()
        sock.sendall(struct.pack("!I", len(body)) + body)
        os._exit(0)
    return torch.zeros_like(x)
