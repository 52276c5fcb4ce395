"""Device memory that two processes share: the GPU's arena, through CUDA IPC.

On a GPU the judge's inputs, the runner's outputs and the inputs a call leaves behind are all on
the device. Through host shared memory each of them crossed the bus twice (device to host in one
process, host to device in the other): on the H100, 18 of a vector_add evaluation's 35 s went to
those copies. Here the judge allocates one block of device memory outside torch's caching
allocator (so the block holds nothing else of the judge's), exports an IPC handle for it, and the
runner maps the same block: a crossing is one device-to-device copy.

The CUDA driver API is called directly through ctypes (libcuda.so.1 is present wherever a CUDA
GPU works; torch keeps no public handle to it), in the primary context torch uses. Where any step
fails (no driver, a ROCm build of torch, a sandbox that hides the other process), `DeviceMemoryError`
says why and the caller falls back to host shared memory.

Standard library and torch only: the runner imports this.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import torch

_IPC_LAZY_ENABLE_PEER_ACCESS = 1


class DeviceMemoryError(RuntimeError):
    """Shared device memory is not available here; host shared memory is the way."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


_DRIVER: Any = None


def _driver() -> Any:
    """libcuda, once, with the signatures used here; only for a CUDA (not ROCm) build of torch."""
    global _DRIVER
    if _DRIVER is not None:
        return _DRIVER
    if torch.version.cuda is None:
        raise DeviceMemoryError("this torch is not a CUDA build: no CUDA IPC")
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise DeviceMemoryError(f"the CUDA driver library cannot be loaded: {exc}") from exc
    ptr = ctypes.POINTER
    u64 = ctypes.c_uint64
    lib.cuCtxGetCurrent.argtypes = [ptr(ctypes.c_void_p)]
    lib.cuMemAlloc_v2.argtypes = [ptr(u64), ctypes.c_size_t]
    lib.cuMemFree_v2.argtypes = [u64]
    lib.cuIpcGetMemHandle.argtypes = [ptr(_Handle), u64]
    lib.cuIpcOpenMemHandle_v2.argtypes = [ptr(u64), _Handle, ctypes.c_uint]
    lib.cuIpcCloseMemHandle.argtypes = [u64]
    lib.cuGetErrorString.argtypes = [ctypes.c_int, ptr(ctypes.c_char_p)]
    _DRIVER = lib
    return lib


def _check(status: int, what: str) -> None:
    if status == 0:
        return
    text = ctypes.c_char_p()
    _driver().cuGetErrorString(status, ctypes.byref(text))
    raise DeviceMemoryError(f"{what} failed: CUDA error {status} ({(text.value or b'?').decode(errors='replace')})")


def _in_torch_context(device: str) -> Any:
    """The driver, with torch's primary context of `device` current on this thread."""
    lib = _driver()
    torch.cuda.set_device(torch.device(device))
    torch.empty(1, device=device)  # the runtime makes the primary context current here
    context = ctypes.c_void_p()
    _check(lib.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
    if not context.value:
        raise DeviceMemoryError("no CUDA context is current after torch's first allocation")
    return lib


class _Block:
    """A device pointer seen as a torch tensor; `release` runs when the last tensor over it is gone.

    torch keeps the object that exposes `__cuda_array_interface__` alive as long as any tensor
    (any view) over its memory lives, so the block is freed (or unmapped) only after its last view:
    never under a tensor still in use."""

    def __init__(self, pointer: int, size: int, release: Callable[[int], None]) -> None:
        self.pointer = pointer
        self._release: Callable[[int], None] | None = release
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (pointer, False),
                                          "version": 2, "strides": None}

    def __del__(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            try:
                release(self.pointer)
            except Exception:  # noqa: BLE001 - at teardown the context may already be gone
                pass


def allocate(size: int, device: str) -> tuple[torch.Tensor, bytes]:
    """A new block of `size` bytes on `device`, as a uint8 tensor, and the IPC handle that maps it."""
    lib = _in_torch_context(device)
    pointer = ctypes.c_uint64()
    _check(lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)), f"allocating {size} bytes of device memory")
    block = _Block(pointer.value, size, lambda p: lib.cuMemFree_v2(ctypes.c_uint64(p)))
    handle = _Handle()
    _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), pointer), "cuIpcGetMemHandle")
    return torch.as_tensor(block, device=device), bytes(handle.reserved)


def attach(handle: bytes, size: int, device: str) -> torch.Tensor:
    """The block another process exported with `handle`, mapped here as a uint8 tensor of `size` bytes."""
    if len(handle) != 64:
        raise DeviceMemoryError(f"an IPC handle has 64 bytes, not {len(handle)}")
    lib = _in_torch_context(device)
    pointer = ctypes.c_uint64()
    given = _Handle.from_buffer_copy(handle)
    _check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), given, _IPC_LAZY_ENABLE_PEER_ACCESS),
           "opening the judge's device memory (cuIpcOpenMemHandle)")
    block = _Block(pointer.value, size, lambda p: lib.cuIpcCloseMemHandle(ctypes.c_uint64(p)))
    return torch.as_tensor(block, device=device)
