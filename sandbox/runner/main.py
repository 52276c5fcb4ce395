"""The runner process: imports one candidate and calls it on the judge's request.

    python -I -c "<bootstrap>" SOCKET_FD [cpu|gpu]

Started by the judge, inside the OS sandbox where the host allows (sandbox/judge/isolation.py),
with one descriptor: its socket to the judge (the arena's memfd arrives over it; on a GPU the
arena is device memory, mapped through its IPC handle). Requests and replies are JSON
(sandbox/shared/protocol.py):

- setup: choose the device, attach the arena, set the thread count, put the problem on sys.path
- call: build the call's data from arena specs, time one call of the kernel (the trusted no-op
  before any candidate is loaded: the judge calibrates its clock with it), copy the output into
  the arena, reply with the time
- load: import the submission; native builds go to the judge (`build` requests), never to a
  compiler here
- exit

Standard library, torch and PyYAML only.
"""

from __future__ import annotations

import gc
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from sandbox.shared import protocol
from sandbox.runner.overlap import meet
from sandbox.shared.arena import (Arena, ArenaError, DeviceArena, align, contiguous_strides, decode, dtype_name,
                                  encode)

FLUSH_BYTES = 256 * 1024 * 1024  # larger than any L2 we target (H200: 60 MB)



def _install_module(name: str, source: str) -> None:
    """A module the problem places beside the submission from elsewhere (its text sent by the judge),
    written into this runner's own /tmp and imported under its name, once."""
    import importlib.util
    import tempfile

    known = sys.modules.get(name)
    if known is not None and getattr(known, "__ks_source__", None) == source:
        return
    path = Path(tempfile.mkdtemp(prefix=f"ks-{name}-")) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__ks_source__ = source  # type: ignore[attr-defined]
    sys.modules[name] = module
    spec.loader.exec_module(module)

class Runner:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.arena: Arena | None = None
        self.device = "cpu"
        self.kernel: Any = None
        self._flush: Any = None
        # Per shape: its two sets on this device, one set of call tensors per batch slot, the preallocated outputs.
        self.resident: dict[str, tuple[list[dict[str, Any]], list[Any], list[str]]] = {}
        self.kept: dict[Any, Any] = {}  # outputs of the last batch's calls (on recipes; on the CPU, read where they lie)
        self.kept_inputs: dict[Any, Any] = {}  # and the inputs each of them was given, as the call left them
        # A kernel that returns one buffer from every call overwrites the outputs kept for the judge:
        # once met, each call's output is copied as it returns (`_keep`), and the calls whose kept
        # output a later call overwrote in that batch are answered as such.
        self.copy_outputs = False
        self.overwritten: set[Any] = set()
        self.prepared: dict[Any, Any] = {}  # a GPU batch's inputs, built before its first call (`_prepare`)
        self._placing: Any = None  # where an output already in its region is copied to (`_output_placer`)
        self._token: Any = None  # the judge's probe of this process's memory (`on_setup`)
        # When the request being served arrived, and how long the collection after the last batch's answer
        # took (it runs while the judge reads that answer): a batch says both of itself (`on_batch`).
        self.received_ns = time.perf_counter_ns()
        self.collected_ns = 0

    # -- the judge's requests -----------------------------------------------------------

    def serve(self) -> None:
        while True:
            fds: list[int] = []
            request = protocol.receive(self.sock, fds)
            self.received_ns = time.perf_counter_ns()
            op = request.get("op")
            if op == "exit":
                return
            handler = getattr(self, f"on_{op}", None)
            if handler is None:
                protocol.send(self.sock, {"op": "error", "message": f"unknown request {op!r}"})
                continue
            if op == "call":  # one call alone (a check): its output is read before the next request
                self.kept, self.kept_inputs = {}, {}
            answer = handler(request, fds)
            self._arena_written(answer)
            protocol.send(self.sock, answer)
            if op == "batch":
                gc.enable()
                collecting = time.perf_counter_ns()
                gc.collect(1)
                self.collected_ns = time.perf_counter_ns() - collecting

    def _arena_written(self, answer: dict[str, Any]) -> None:
        """With the arena in device memory: what this process copied into it is there before the judge
        reads it. A device the candidate broke fails the sync too; an answer that already reports
        the failure goes out as it is (the judge names the error), any other ends the runner."""
        if self.arena is None or not self.arena.on_device:
            return
        import torch

        try:
            torch.cuda.synchronize()
        except Exception:
            if answer.get("op") != "error":
                raise

    def on_setup(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        import torch

        self.device = str(request.get("device", "cpu"))
        if self.device.startswith("cuda"):
            torch.cuda.set_device(0)
        arena_error = None
        described = request.get("arena") or {}
        if described.get("kind") == "device":
            if self.arena is not None:
                self.arena.close()  # the judge frees the old block once this answer is in
            self.arena = None
            try:
                self.arena = DeviceArena.attach_to(described, self.device)
            except Exception as exc:  # noqa: BLE001 - the judge offers host shared memory instead
                arena_error = f"{type(exc).__name__}: {exc}"
        elif fds:
            self.arena = Arena.attach(fds[0])
        if request.get("threads"):
            torch.set_num_threads(int(request["threads"]))
        problem_dir = request.get("problem_dir")
        if problem_dir:
            # GPU MODE submissions import `task` and `utils` as top-level modules.
            for entry in (str(Path(problem_dir).parent), str(problem_dir)):
                if entry not in sys.path:
                    sys.path.insert(0, entry)
        for name, source in (request.get("modules") or {}).items():
            _install_module(str(name), str(source))
        if self.device.startswith("cuda") and self._flush is None:
            self._flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=self.device)
        ready: dict[str, Any] = {"op": "ready", "pid": os.getpid()}
        token = request.get("token")
        if isinstance(token, str) and len(token) <= 128:
            # Bytes the judge reads back from this process's memory, to learn whether it can read outputs
            # where the kernel left them (sandbox/judge/remote.py).
            self._token = torch.frombuffer(bytearray(bytes.fromhex(token)), dtype=torch.uint8)
            ready["token_at"] = self._token.data_ptr()
        if arena_error:
            ready["arena_error"] = arena_error
        return ready

    def on_load(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """Import the submission from the source the judge sent, written into this runner's own /tmp."""
        import tempfile

        from sandbox import native, problem

        native.BUILD_SERVICE = self._remote_build
        self.copy_outputs = False
        path = Path(tempfile.mkdtemp(prefix="ks-candidate-")) / "submission.py"
        path.write_text(str(request["source"]))
        # Importable by name from processes the candidate spawns (multiprocessing's "spawn" and "forkserver"
        # re-import the functions they run: a pool of the submission's own function waited for ever).
        sys.path.append(str(path.parent))
        try:
            if request.get("kind") == "kernelbench":
                bound = problem.load_kernelbench(Path(request["problem"]))
                bound.bind()  # ModelNew is built from the problem's own init inputs
                self.kernel = bound.load_submission(path)
            else:
                module = problem._load_module("submission", path)
                self.kernel = getattr(module, "custom_kernel", None)
                if not callable(self.kernel):
                    raise problem.SubmissionError("the submission defines no custom_kernel(data)")
        except native.BuildError as exc:
            return {"op": "failed", "kind": "build", "message": str(exc)}
        except problem.SubmissionError as exc:  # the submission's own shape is wrong: no harness traceback
            return {"op": "failed", "kind": "import", "message": str(exc)}
        except BaseException as exc:  # noqa: BLE001 - the candidate's import failed, whatever it raised
            text = "".join(traceback.format_exception(exc)[-8:])
            message = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, ModuleNotFoundError) and exc.name:
                message += (f" (the submission needs the Python package {exc.name.split('.')[0]!r}, which is not "
                            "installed where it is evaluated: install it there, or evaluate where it is)")
            return {"op": "failed", "kind": "import", "message": message, "trace": text[-4000:]}
        return {"op": "loaded"}

    def _remote_build(self, **build: Any) -> Path:
        """Ask the judge to build; wait for its answer (other requests cannot arrive meanwhile)."""
        from sandbox import native

        protocol.send(self.sock, {"op": "build", **build})
        reply = protocol.receive(self.sock)
        if reply.get("op") != "built":
            raise native.BuildError(str(build.get("name")), str(reply.get("log", "the judge refused the build")))
        return Path(str(reply["path"]))

    def on_bases(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """Keep a shape's two generated sets on this device; calls then name a recipe, not data."""
        from sandbox.shared.arena import tensors

        key = str(request.get("key"))
        self.resident.pop(key, None)
        self.kept, self.kept_inputs = {}, {}  # the old sets' slots go now, before the new sets are copied in
        if not request["sets"]:  # the judge is done with this shape: free its sets
            if self.device.startswith("cuda"):
                import torch

                torch.cuda.empty_cache()
            return {"op": "based"}
        sets = [self._data(tree, copy=True) for tree in request["sets"]]
        buffers = [str(p) for p in request.get("buffers") or []]
        slots = max(1, min(64, int(request.get("slots") or 1)))
        self.resident[key] = ([dict(tensors(s)) for s in sets], [_empty_like_tree(sets[0]) for _ in range(slots)], buffers)
        return {"op": "based"}

    def on_batch(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """Calls one after another; the outputs of calls on recipes are all kept until the next batch."""
        self.kept, self.kept_inputs, self.overwritten = {}, {}, set()
        results = []
        # No collection inside a batch: a pause there lands on the judge's clock and on no call's.
        # The collector runs when the runner is idle, after answering (`serve`).
        gc.disable()
        items = [dict(item, kernel=request.get("kernel"), out_bytes=request.get("out_bytes"),
                      out_path=request.get("out_path")) for item in request.get("calls") or []]
        began = time.perf_counter_ns()
        self.prepared = self._prepare(items)
        prepared = time.perf_counter_ns()
        durations = []
        for item in items:
            entered = time.perf_counter_ns()
            answer = self.on_call(item, fds)
            durations.append(time.perf_counter_ns() - entered)
            results.append(answer)
            if answer.get("op") == "error":
                break
        for answer in results:
            if answer.get("i") in self.overwritten:
                answer["overwritten"] = True
        said = [prepared - began, sum(durations), max(durations, default=0), time.perf_counter_ns() - began,
                began - self.received_ns, self.collected_ns]
        return {"op": "batch_done", "results": results, "batch_us": [round(t / 1e3, 1) for t in said]}

    def _keep(self, out: Any) -> tuple[Any, bool]:
        """The output to keep for the judge, and whether it is a copy: a copy once this kernel was seen
        returning memory an earlier call of the batch returned (that call's kept output is then lost,
        and its answer says so)."""
        from sandbox.shared.arena import tensors

        if not self.copy_outputs:
            mine = [t for _, t in tensors(out) if t.numel()]
            for i, kept in self.kept.items():
                if any(meet(a, b) for a in mine for _, b in tensors(kept) if b.numel()):
                    self.overwritten.add(i)
                    self.copy_outputs = True
        if not self.copy_outputs:
            return out, False
        return _map_tensors(out, lambda t: t.clone()), True

    def _prepare(self, items: list[dict[str, Any]]) -> dict[Any, Any]:
        """Every call's inputs on recipes, built before the batch's first call: between the calls only the
        timing's own steps run, so the round trip's overhead is what calibration measured, whatever the
        candidate's code did to the host's caches (a call that fails to build is left to `on_call`)."""
        prepared: dict[Any, Any] = {}  # by call
        if not self.device.startswith("cuda"):  # the CPU's caches favour inputs built just before their call
            return prepared
        for item in items:
            if "recipe" in item:
                try:
                    prepared[item.get("i")] = self._from_recipe(item["recipe"])
                except Exception:  # noqa: BLE001 - on_call builds it again and answers the error
                    break
        return prepared

    def on_settle(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """A tiny kernel and a sync: the device switches back to this process before the next timed call."""
        import torch

        if self._flush is not None:
            self._flush[:1].zero_()
            torch.cuda.synchronize()
        return {"op": "settled"}

    def on_deliver(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """The bytes of a kept call's output, copied into the arena (the judge checks them against the
        digest), and on request its inputs as the call left them (the judge compares them with its own)."""
        index = request.get("i")
        if index not in self.kept:
            return {"op": "error", "i": index, "message": "no such call's output is kept"}
        try:
            place = self._output_placer(request["out"])
            tree = encode(self.kept[index], place)
            inputs = encode(self.kept_inputs[index], place) if request.get("inputs") else None
        except ArenaError as exc:
            return {"op": "error", "i": index, "message": f"output cannot be returned: {exc}"}
        return {"op": "delivered", "i": index, "out": tree, "inputs": inputs}

    def on_call(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        import torch

        index = request.get("i")
        entered = time.perf_counter_ns()
        prepared = self.prepared.pop(index, None) if "recipe" in request else None
        try:
            if prepared is not None:
                data = prepared
            elif "recipe" in request:
                data = self._from_recipe(request["recipe"])
            else:
                data = self._data(request["data"])
            noop = request.get("kernel") == "noop"
            size, path = int(request.get("out_bytes") or 0), request.get("out_path")
            fn = (lambda data: _noop(data, size, path)) if noop else self.kernel
            if fn is None:
                return {"op": "error", "i": index, "message": "no candidate loaded"}
            if self.device.startswith("cuda"):
                if size and path is None and not noop:  # a checked call's fresh output (timed batches send no size)
                    _poison_freed(size, self.device)
                torch.cuda.synchronize()
            if "recipe" not in request and not self.device.startswith("cuda") and request.get("out") is None:
                # The judge reads the output where it lies in this process's memory (sandbox/judge/remote.py),
                # so nothing is placed: no figure holds a copy a kernel could skip.
                us, out = self._timed(fn, data)
                out, copied = self._keep(out)
                self.kept[index] = out
                return {"op": "done", "i": index, "us": us, "out": encode(out, _located), "copied": copied}
            if "recipe" not in request and not self.device.startswith("cuda"):
                # Where the judge cannot read this process's memory, the output's placement in the arena is
                # part of the call: the judge's clock sees it, and a kernel that writes straight into the
                # arena skips it, so a figure that left it out would let such a kernel hide that much work
                # (calibration's no-op places its output the same way, inside its own figure).
                placer = self._output_placer(request["out"], data)
                us, tree = self._timed(lambda d: encode(fn(d), placer), data)
                return {"op": "done", "i": index, "us": us, "out": tree}
            called = time.perf_counter_ns()
            us, out = self._timed(fn, data)
            if "recipe" in request:
                from sandbox.shared.arena import tensors
                from sandbox.shared.blend import digest

                returned = time.perf_counter_ns()
                out, copied = self._keep(out)
                self.kept[index], self.kept_inputs[index] = out, data
                found = [t for _, t in tensors(out)]
                committed = digest(found) if found else "none"
                steps = [called - entered, returned - called, time.perf_counter_ns() - returned]
                return {"op": "done", "i": index, "us": us, "digest": committed,
                        "structure": encode(out, _describe), "copied": copied, "steps_us": [t / 1e3 for t in steps]}
            tree = encode(out, self._output_placer(request["out"], data))
        except ArenaError as exc:
            return {"op": "error", "i": index, "message": f"output cannot be returned: {exc}"}
        except BaseException as exc:  # noqa: BLE001 - anything a candidate raises is its failure
            text = "".join(traceback.format_exception(exc)[-8:])
            return {"op": "error", "i": index, "message": f"{type(exc).__name__}: {exc}", "trace": text[-4000:],
                    "fatal": _device_broken(exc)}
        return {"op": "done", "i": index, "us": us, "out": tree}

    # -- one call -------------------------------------------------------------------------

    def _data(self, tree: Any, copy: bool = False) -> Any:
        assert self.arena is not None, "setup first"
        arena = self.arena
        if self.device == "cpu" and not copy:
            return decode(tree, arena.view)
        return decode(tree, lambda spec: arena.view(spec).to(self.device, copy=True))

    def _from_recipe(self, recipe: dict[str, Any]) -> Any:
        from sandbox.shared.arena import tensors
        from sandbox.shared.blend import apply_recipe

        bases, works, buffers = self.resident[str(recipe.get("key"))]
        work = works[int(recipe.get("slot", 0)) % len(works)]
        apply_recipe(dict(tensors(work)), bases, recipe, buffers)
        return work

    def _timed(self, fn: Any, data: Any) -> tuple[float, Any]:
        import torch

        if not self.device.startswith("cuda"):
            t0 = time.perf_counter_ns()
            out = fn(data)
            return (time.perf_counter_ns() - t0) / 1e3, out
        from sandbox.shared.clock import timed_on_device

        return timed_on_device(fn, data, self._flush)

    def _output_placer(self, region: dict[str, Any], given: Any = None) -> Any:
        """Each output tensor's spec: where it already lies in the arena, else a copy in the region.

        An output that already lies in the call's output region was written there by the kernel (found
        from its inputs' place in the arena), or anywhere else in the arena: it is copied all the same, to
        memory of the runner's own, so that its figure holds the copy every other kernel's output, and
        the reference's, is placed with (red-team round 23: a softmax writing its rows straight into its
        region was paired 1.18-1.48 times faster than the same code writing into a buffer of its own).
        Only an output inside one of the call's own inputs (`given`: a preallocated output, written in
        place) is copied by no one."""
        from sandbox.shared.arena import tensors

        inputs = [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for _, t in tensors(given)] \
            if given is not None else []
        import torch

        assert self.arena is not None
        arena = self.arena
        cursor = {"at": int(region["offset"])}
        limit = int(region["offset"]) + int(region["capacity"])

        def place(tensor: torch.Tensor) -> dict[str, Any]:
            if type(tensor) is not torch.Tensor:
                tensor = torch.Tensor(tensor)  # subclasses cross as their plain data, nothing more
            spec = arena.spec_of(tensor)
            if spec is not None:
                start = tensor.data_ptr()
                if not any(low <= start < high for low, high in inputs):
                    self._copy_as_placed(tensor)
                return spec
            span = tensor.numel() * tensor.element_size()
            start = cursor["at"]
            if start + span > limit:
                raise ArenaError(f"the output ({span} bytes) is larger than the problem's output allows")
            spec = {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
                    "stride": contiguous_strides(list(tensor.shape)), "offset": start, "device": str(tensor.device)}
            arena.view(spec).copy_(tensor)
            cursor["at"] = align(start + span)
            return spec

        return place


    def _copy_as_placed(self, tensor: Any) -> None:
        """The bytes of `tensor` copied once, as placing an output copies them, into memory kept for it."""
        import torch

        raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
        if self._placing is None or self._placing.numel() < raw.numel() or self._placing.device != raw.device:
            self._placing = torch.empty(raw.numel(), dtype=torch.uint8, device=raw.device)
        self._placing[:raw.numel()].copy_(raw)


def _poison_freed(size: int, device: str, blocks: int = 4) -> None:
    """Leave NaN-filled blocks of the output's size in the device's memory cache: a fresh output the
    kernel allocates reuses one, so elements it forgets to write read as NaN (an unwritten output
    then says so) instead of holding an earlier call's values. Several blocks: a kernel often holds
    a copy of its inputs and a result of the same size while it allocates the output it returns.
    All bytes 0xFF are NaN in float32, float16, bfloat16 and float8 e4m3fn."""
    import torch

    held = [torch.empty(size, dtype=torch.uint8, device=device) for _ in range(blocks)]
    for block in held:
        block.fill_(0xFF)


def _map_tensors(data: Any, fn: Any) -> Any:
    """The same structure with each tensor replaced by fn(tensor)."""
    return decode(encode(data, lambda t: {"t": t}), lambda leaf: fn(leaf["t"]))


def _empty_like_tree(data: Any) -> Any:
    import torch

    return _map_tensors(data, torch.empty_like)


def _located(tensor: Any) -> dict[str, Any]:
    """Where an output lies in this process's memory, for the judge to read while the sandbox is stopped."""
    import torch

    if type(tensor) is not torch.Tensor:
        tensor = torch.Tensor(tensor)  # subclasses cross as their plain data, nothing more
    if tensor.device.type != "cpu":
        raise ArenaError(f"an output on {tensor.device} where the target is the CPU")
    return {"dtype": dtype_name(tensor.dtype), "shape": list(tensor.shape), "stride": list(tensor.stride()),
            "address": tensor.data_ptr() if tensor.numel() else 0}


def _describe(tensor: Any) -> dict[str, Any]:
    return {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape)}


def _noop(data: Any, out_bytes: int = 0, out_path: str | None = None) -> Any:
    """The judge's calibration call: the same path as a kernel's. It returns what a kernel returns: the
    preallocated output at `out_path`, else a copy of `out_bytes` of the largest input (all when 0)."""
    import torch

    from sandbox.shared.arena import tensors

    found = [t for _, t in tensors(data)]
    if not found:
        return None
    if out_path is not None:
        return dict(tensors(data)).get(out_path, found[-1])
    largest = max(found, key=lambda t: t.numel() * t.element_size()).contiguous().reshape(-1).view(torch.uint8)
    if out_bytes and out_bytes <= largest.numel():
        return largest[:out_bytes].clone()
    return largest.clone() if not out_bytes else torch.zeros(out_bytes, dtype=torch.uint8, device=largest.device)


def _device_broken(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(s in text for s in ("illegal memory access", "illegal instruction", "misaligned address",
                                   "unspecified launch failure", "device-side assert"))


# Limits set before any candidate code runs; with no capabilities in its sandbox, none can raise them.
# The largest file the runner's processes may write, its log (stdout and stderr, a file on the host's
# disk) included: a red-team kernel printed 512 MB there, which the orchestrator then read whole.
MAX_FILE_BYTES = 256 << 20
# Signals queued at once, which also bounds the POSIX timers a process may hold (each keeps one queued):
# a red-team kernel armed 5000 timers to expire while its sandbox was stopped, and each expiry's work
# landed on whatever the judge timed then (the base of a pair, the reference), charged to it.
MAX_PENDING_SIGNALS = 64


def _limit_resources() -> None:
    import resource

    for limit, value in ((resource.RLIMIT_FSIZE, MAX_FILE_BYTES), (resource.RLIMIT_SIGPENDING, MAX_PENDING_SIGNALS)):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass


def _seed_kernel_cache() -> None:
    """The judges' builds of their own Triton kernels (the digest's fold), copied into this runner's private
    Triton cache before any candidate code exists: the same kernels, loaded rather than built again. The
    judges' folder is read-only here; what a candidate later writes to the copy dies with this sandbox."""
    source, target = os.environ.pop("KS_JUDGE_KERNELS", None), os.environ.get("TRITON_CACHE_DIR")
    if not source or not target or not os.path.isdir(source):
        return
    import shutil

    try:
        shutil.copytree(source, target, dirs_exist_ok=True)
    except (OSError, shutil.Error) as exc:  # a build the judge was writing as it was copied: built here again
        sys.stderr.write(f"runner: the judges' kernel builds were not all copied ({str(exc)[:200]})\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv if argv is None else argv
    _limit_resources()
    _seed_kernel_cache()
    from sandbox.runner import seccomp

    on_gpu = len(argv) > 2 and argv[2] == "gpu"
    # Before any candidate code: all it starts inherit it.
    filtered = seccomp.install(deferred_work=not on_gpu, keep_cores=on_gpu)
    sock = socket.socket(fileno=int(argv[1]))
    import torch  # paid before the first request, while the judge prepares

    if not on_gpu:
        # oneDNN writes its kernels into memory and makes them executable, which a CPU runner may not
        # (`seccomp`): torch takes its other kernels instead (BLAS, its own), and a kernel that calls
        # such an operator still runs.
        torch.backends.mkldnn.enabled = False  # type: ignore[assignment]  # a flag torch types as its descriptor
    runner = Runner(sock)
    protocol.send(sock, {"op": "hello", "pid": os.getpid(), "system_calls": filtered})
    try:
        runner.serve()
    except (protocol.ChannelClosed, OSError):
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
