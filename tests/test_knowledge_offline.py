"""No network, ever: the model, Chroma and a reopened collection never try to connect.

Each check runs in a new process whose sockets refuse (and record) any address that is
not loopback, so the first model load and the first Chroma client are covered too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

GUARD = r"""
import json, os, socket, sys
os.environ["HF_HUB_OFFLINE"] = "1"
attempts = []

def _local(host):
    return str(host).startswith("127.") or str(host) in ("::1", "localhost", "") or str(host).startswith("/")

def _guard(name, original):
    def guarded(self, address, *args):
        host = address[0] if isinstance(address, tuple) else address
        if not _local(host):
            attempts.append(f"{name} {address!r}")
            raise OSError("network disabled by the test")
        return original(self, address, *args)
    return guarded

socket.socket.connect = _guard("connect", socket.socket.connect)
socket.socket.connect_ex = _guard("connect_ex", socket.socket.connect_ex)
socket.socket.sendto = lambda self, data, *rest: attempts.append(f"sendto {rest!r}") or (_ for _ in ()).throw(
    OSError("network disabled by the test"))
_getaddrinfo = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    if not _local(host):
        attempts.append(f"getaddrinfo {host!r}")
        raise socket.gaierror("network disabled by the test")
    return _getaddrinfo(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
"""

FULL_FLOW = (
    GUARD
    + r"""
store, doc = sys.argv[1], sys.argv[2]
from knowledge import Finding, KnowledgeBase
kb = KnowledgeBase(store)                      # loads the primer, hence the model
report = kb.ingest([doc])
hits = kb.search("LDS bank conflicts", k=3, target="amd")
kb.add_finding(Finding(hypothesis="pad LDS", change="pad rows by 4 bytes", kernel_id="k1",
                       problem="matmul_bf16", target="amd", measured_speedup=1.1))
found = kb.search_findings("LDS padding")
import chromadb
from knowledge.store import open_client
collection = open_client(kb.path).get_collection("literature")   # reopened without a function
reopened = collection.query(query_texts=["matrix cores"], n_results=2)
print(json.dumps({"attempts": attempts, "added": report.count("added"), "hits": len(hits),
                  "findings": len(found), "reopened": len(reopened["ids"][0]),
                  "function": collection.configuration["embedding_function"].name()}))
"""
)

BARE_CLIENT = (
    GUARD
    + r"""
store = sys.argv[1]
import chromadb
from chromadb.config import Settings
client = chromadb.PersistentClient(path=store, settings=Settings(anonymized_telemetry=False))
try:
    collection = client.get_collection("literature")
    collection.query(query_texts=["matrix cores"], n_results=1)
    outcome = "queried"
except Exception as exc:
    outcome = f"refused: {exc}"
print(json.dumps({"attempts": attempts, "outcome": outcome}))
"""
)


def _run(script: str, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    out = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_whole_flow_attempts_no_connection(tmp_path: Path) -> None:
    doc = tmp_path / "lds.md"
    doc.write_text(
        "# LDS on MI300\n\n## Bank conflicts\n\nPad LDS rows on AMD gfx942 so a wavefront avoids bank "
        "conflicts; ROCm and hipcc report LDS bytes.\n"
    )
    result = _run(FULL_FLOW, str(tmp_path / "store"), str(doc))
    assert result["attempts"] == []
    assert (
        result["added"] == 1 and result["hits"] == 3 and result["findings"] == 1 and result["reopened"] == 2
    )
    assert result["function"] == "kernel_scientist_minilm"
    # A process that never imported `knowledge` cannot rebuild the function: Chroma refuses
    # instead of falling back to its default model, which would be downloaded.
    bare = _run(BARE_CLIENT, str(tmp_path / "store"))
    assert bare["attempts"] == []
    assert bare["outcome"].startswith("refused") and "kernel_scientist_minilm" in bare["outcome"]


def test_the_guard_does_catch_a_connection() -> None:
    script = (
        GUARD
        + r"""
import urllib.request
try:
    urllib.request.urlopen("https://huggingface.co/api/models", timeout=2)
except Exception:
    pass
try:
    socket.create_connection(("8.8.8.8", 53), timeout=2)
except OSError:
    pass
print(json.dumps({"attempts": attempts}))
"""
    )
    attempts = _run(script)["attempts"]
    assert any("huggingface.co" in a for a in attempts) and any("8.8.8.8" in a for a in attempts)
