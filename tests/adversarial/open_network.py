"""Trick: talk to the outside world (to fetch an answer or leak one)."""
import os
import socket

REPORT = os.environ.get("KS_TEST_NET_REPORT", "")


def custom_kernel(data):
    a, b, out = data
    try:
        socket.create_connection(("127.0.0.1", int(os.environ.get("KS_TEST_NET_PORT", "9"))), timeout=2).close()
        outcome = "connected"
    except OSError as exc:
        outcome = f"refused: {exc}"
    raise RuntimeError(f"network probe: {outcome}")
