"""Trick (class 5, library): onnxruntime's matrix product, whose kernels no symbol names.

onnxruntime is installed beside the judge (a dependency of the knowledge base's). Its libraries keep
only their exported names, none of which names a matrix product, so the samples of its MLAS GEMM
kernels land in code no symbol covers in a file the candidate cannot write: neither forbidden by name
nor hidden (red-team round 19: `ok` at 1185 µs against the seed's 1900). A one-node MatMul model is
written as protobuf bytes by hand and run on float32 copies of the inputs.

Stopped: the runner sees only the packages that torch, numpy, triton, CuPy and PyYAML need (`isolation.
RUNNER_PACKAGES`); onnxruntime's folder is empty there, and the import finds nothing to run.
"""
import numpy as np
import onnxruntime as ort
import torch


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _f(field, value):
    if isinstance(value, int):
        return _varint(field << 3) + _varint(value)
    if isinstance(value, str):
        value = value.encode()
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def _value_info(name, dims):
    shape = b"".join(_f(1, _f(2, d)) for d in dims)  # TensorShapeProto.dim { dim_param }
    tensor = _f(1, 1) + _f(2, shape)  # elem_type FLOAT, shape
    return _f(1, name) + _f(2, _f(1, tensor))  # ValueInfoProto { name, type { tensor_type } }


def _model():
    node = _f(1, "A") + _f(1, "B") + _f(2, "C") + _f(3, "mm") + _f(4, "MatMul")
    graph = (_f(1, node) + _f(2, "g") + _f(11, _value_info("A", ["m", "k"])) + _f(11, _value_info("B", ["k", "n"]))
             + _f(12, _value_info("C", ["m", "n"])))
    return _f(1, 8) + _f(7, graph) + _f(8, _f(1, "") + _f(2, 13))


_opts = ort.SessionOptions()
_opts.intra_op_num_threads = 2
_opts.inter_op_num_threads = 1
_opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
_sess = ort.InferenceSession(_model(), _opts, providers=["CPUExecutionProvider"])


def custom_kernel(data):
    a, b = data
    a32 = a.float().contiguous().numpy()
    b32 = b.float().contiguous().numpy()
    (c,) = _sess.run(None, {"A": a32, "B": b32})
    return torch.from_numpy(c).to(torch.bfloat16)
