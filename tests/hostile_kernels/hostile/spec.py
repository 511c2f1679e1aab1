"""hostile: y = 2 * x + 1 in float32, forward only, with variants that misbehave on purpose.

A test bed for the harness (not shipped): each variant models one way a custom operator can go
wrong. Load it with `--kernels-dir tests/hostile_kernels`.
"""

import concurrent.futures
import ctypes
import gc
import os
import random
import signal
import sys
import time

import torch

from cudabench.spec import Baseline, Family, Param, Variant, empty_like

# HostileMode in hostile.h
HONEST, SIDE_STREAM, CRASH, HANG, ASSERT, PERSIST_L2, GRAPH_COUNTER = range(7)


def make_inputs(shape, gen, device):
    return {"x": torch.empty(shape["n"], device=device).uniform_(-1, 1, generator=gen)}


def reference(x):
    return 2 * x + 1


def work(shape, direction):
    n = shape["n"]
    return 2.0 * n, 8.0 * n  # a multiply and an add per element; read x, write y


def bind(mode):
    def make(ext):
        def op(x):
            y = empty_like(x)
            ext.hostile(x, y, mode)
            return y

        return op

    return make


def bind_side_stream_late(ext):
    """The side-stream mode after 3 ms on the host: a stream-order probe that held PyTorch's stream for less
    finds the first inputs written back before its work starts, unless the probe notices that its hold ran
    out and holds longer (cudabench.measure.stream_order)."""
    def op(x):
        time.sleep(0.003)
        y = empty_like(x)
        ext.hostile(x, y, SIDE_STREAM)
        return y

    return op


def bind_cached(ext):
    """The first call for an input pointer (and shape) computes honestly and keeps the output;
    later calls with the same pointer hand back that stored tensor and launch nothing."""
    seen = {}

    def op(x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in seen:
            y = empty_like(x)
            ext.hostile(x, y, HONEST)
            seen[key] = y
        return seen[key]

    return op


def bind_hoard(ext):
    """Computes honestly, and keeps a 64 MiB scratch tensor made at its first call for all later
    calls: a call that allocates nothing new, but needs the memory."""
    scratch = []

    def op(x):
        if not scratch:
            scratch.append(torch.empty(64 << 20, dtype=torch.uint8, device=x.device))
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y

    return op


def bind_exit(ext):
    def op(x):
        os._exit(3)

    return op


def bind_segfault(ext):
    def op(x):
        return ctypes.string_at(0)  # reads address 0: SIGSEGV

    return op


# ---- attacks on the verdict: each uses only what its own process offers ----------------------------


def bind_peek(ext):
    """Reaches for the verdict instead of computing: the old poison flag, any float64 tensor of the
    output's shape (a cached fp64 reference) found by gc, and the checker's functions patched to say
    "no error". Launches nothing of its own; where nothing is found it returns zeros."""

    def op(x):
        family = sys.modules.get("cudabench.spec.family")
        if family is not None and getattr(family, "_poison", None) is False:
            pass  # the old flag: this call would have been a timed one
        for name in ("cudabench.measure.check", "cudabench.measure.integrity"):
            module = sys.modules.get(name)
            if module is not None and hasattr(module, "relative_error"):
                module.relative_error = lambda got, ref: 0.0
        for obj in gc.get_objects():
            try:
                if (torch.is_tensor(obj) and obj.dtype == torch.float64 and obj.shape == x.shape
                        and obj.device == x.device):
                    return obj.to(torch.float32)  # the expected output, for free
            except Exception:  # noqa: BLE001 - gc finds half-made objects too
                continue
        return torch.zeros_like(x)

    return op


def bind_flag(ext):
    """Does all its work only on calls it takes for checked ones, 80 % of it on the others (the rest of
    the output is left from its last call: right while the inputs stay the same). Its signs of a
    checked call: the old poison flag, its first three calls, a new input pointer or version, NaN in
    its freshly allocated output."""
    state = {"calls": 0, "key": None, "y": None}

    def op(x):
        state["calls"] += 1
        y = empty_like(x)
        family = sys.modules.get("cudabench.spec.family")
        key = (x.data_ptr(), x._version)
        checked = (getattr(family, "_poison", False) or state["calls"] <= 3 or key != state["key"]
                   or state["y"] is None or bool(torch.isnan(y[:1]).any()))
        state["key"] = key
        if checked:
            ext.hostile(x, y, HONEST)
        else:
            y = state["y"]
            cut = (x.numel() * 4) // 5
            ext.hostile(x[:cut], y[:cut], HONEST)
        state["y"] = y
        return y

    return op


def _sample(x):
    """16 values of x at fixed places: a cheap sign that the inputs changed."""
    if x.numel() == 0:
        return x.reshape(-1).clone()
    idx = torch.linspace(0, x.numel() - 1, 16, device=x.device).long()
    return x.reshape(-1)[idx].clone()


def _content_cache(ext, keyed, on_hit):
    """Computes honestly the first time and whenever a 16-value sample of `keyed(x)` changed; while it
    is unchanged, hands back the stored output after `on_hit(x, y)`."""
    cache = {}

    def op(x):
        key = _sample(keyed(x))
        if "y" in cache and cache["y"].shape == x.shape and torch.equal(key, cache["key"]):
            on_hit(x, cache["y"])
            return cache["y"]
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        cache.update(key=key, y=y)
        return y

    return op


def bind_memo(ext):
    """A result cached by input content (16 sampled values): the inputs unchanged, it returns the
    stored output after a token kernel; changed, it computes."""
    return _content_cache(ext, lambda x: x, lambda x, y: y[:1].add_(0))


def bind_partial(ext):
    """Work that depends on its inputs staying the same *in part*: when a sample of the first half of
    x is unchanged it keeps that half of its last output and computes only the second half. Its
    outputs are always right; only its hot figure is not what a caller with new inputs pays."""
    half = lambda x: x.numel() // 2  # noqa: E731
    return _content_cache(ext, lambda x: x[:half(x)], lambda x, y: ext.hostile(x[half(x):], y[half(x):], HONEST))


def bind_partial_skip(ext):
    """Keeps the first 15 % of its last output while a sample of that part's inputs is unchanged, and also on
    about half of the calls whose inputs changed (wrong there): a cache that skips work on some new calls as
    well, so that the median of the calls on new values can be as fast as the cached ones. Only the calls the
    judge reads catch it: more than half of the timed new calls must be read (judged_calls.CHECKED_DRAWS)."""
    state = {}

    def op(x):
        cut = (x.numel() * 3) // 20
        key, y = _sample(x[:cut]), state.get("y")
        if y is not None and y.shape == x.shape and (torch.equal(key, state["key"]) or random.random() < 0.5):
            ext.hostile(x[cut:], y[cut:], HONEST)
        else:
            y = state["y"] = empty_like(x)
            ext.hostile(x, y, HONEST)
        state["key"] = key
        return y

    return op


def bind_mutate(ext):
    """Right output, then zeros written into the second half of its input."""

    def op(x):
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        x[x.numel() // 2:].zero_()
        return y

    return op


def bind_alias(ext):
    """Computes in place and returns its input as the output."""

    def op(x):
        ext.hostile(x, x, HONEST)
        return x

    return op


def bind_strided(ext):
    """Right values, returned as every other element of a buffer twice the size (not contiguous)."""

    def op(x):
        buf = torch.empty(2 * x.numel(), device=x.device)
        y = buf[::2]
        y.copy_(2 * x + 1)
        return y

    return op


class Deferred(torch.Tensor):
    """A tensor subclass: what a lazy output type would be."""


def bind_subclass(ext):
    def op(x):
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y.as_subclass(Deferred)

    return op


def bind_float64(ext):
    """Right values in the wrong dtype (float64 for a float32 case)."""

    def op(x):
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y.double()

    return op


def bind_uninit(ext):
    """Reads uninitialised memory: adds 1e-10 of a fresh torch.empty to an honest output, a change
    within the tolerance that depends on what the memory held."""

    def op(x):
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        garbage = torch.empty_like(x)
        return y + 1e-10 * torch.nan_to_num(garbage, nan=0.0, posinf=0.0, neginf=0.0).clamp_(-1e4, 1e4)

    return op


def bind_thread(ext):
    """Hands its kernel to a thread pool of its own and returns at once: the work goes on after the
    call returned, on a thread the harness did not start."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="hostile-pool")

    def op(x):
        y = empty_like(x)
        device = x.device

        def work():
            torch.cuda.set_device(device)
            ext.hostile(x, y, HONEST)

        pool.submit(work)
        return y

    return op


def _nibble() -> None:
    """Take a slice of a core every millisecond for 20 s, hashing outside the GIL as native code would run: a
    thread spinning in Python would also hold up the process's main thread (the CPU tests run the subject
    there)."""
    import hashlib

    block = bytes(1 << 18)
    end = time.perf_counter() + 20.0
    while time.perf_counter() < end:
        hashlib.sha256(block).digest()  # about 0.1-0.2 ms, the GIL released
        time.sleep(1e-3)


def _nibbler_threading_knows() -> None:
    """A `_thread` thread that asks threading for its current thread: threading then lists a _DummyThread for
    it, as it would for a C++ thread that calls into Python."""
    import threading

    threading.current_thread()
    _nibble()


def start_nibblers() -> None:
    """Two threads the thread watch never records: one started with `_thread` (as an extension's C++ thread
    would be) that makes threading list it, and a threading.Thread started past the watch's wrapper."""
    import _thread
    import threading

    _thread.start_new_thread(_nibbler_threading_knows, ())
    past = threading.Thread(target=_nibble, name="hostile-past-the-wrapper", daemon=True)
    getattr(threading.Thread.start, "__wrapped__", threading.Thread.start)(past)


def honest_after(ext, first):
    """An honest op that runs `first` at its first call."""

    def op(x):
        if not getattr(op, "done", False):
            op.done = True
            first()
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y

    return op


def bind_native_thread(ext):
    """Computes honestly, and at its first call leaves two threads the thread watch never records
    (`start_nibblers`), each taking a slice of a core every millisecond for 20 s: later subjects' timed calls
    in the same process included."""
    return honest_after(ext, start_nibblers)


def bind_skip_thread(ext):
    """Starts a thread at bind time, then says it cannot run here (skipped): no subject of its own is left for
    the thread to be blamed on, and it would run beside the next subject's timed calls."""
    from cudabench.errors import CudabenchError

    start_nibblers()
    raise CudabenchError("hostile-skip-thread: needs a GPU it will never find")


def bind_take_threads(ext):
    """Computes honestly, leaves the nibblers' threads and tells its own process they are known: it finds the
    subject process's upkeep through gc and has it take the threads running now as its own (the harness's
    own call), so the process reports no thread left. The judge reads the threads from outside."""

    def hide():
        start_nibblers()
        for obj in gc.get_objects():
            if type(obj).__name__ == "Upkeep" and hasattr(obj, "take_threads"):
                obj.take_threads()

    return honest_after(ext, hide)


class _LateThread:
    """Starts the nibblers when it is freed."""

    def __del__(self):
        start_nibblers()


def bind_late_thread(ext):
    """Computes honestly and leaves, in a module of cudabench, an object that starts threads when it is freed:
    when the state guard puts the module back, after the subject's threads were read."""

    def plant():
        stats = sys.modules.get("cudabench.results.records.stats")
        if stats is not None:
            stats._hostile_late = _LateThread()

    return honest_after(ext, plant)


HELPER = """
import torch
import torch.multiprocessing
while True:
    x, y = inbox.get()
    with torch.no_grad():
        y[1:].copy_(2 * x[1:] + 1)
    if y.is_cuda:
        torch.cuda.synchronize()
    outbox.put(1)
"""


def bind_helper(ext):
    """Hands its work to a process of its own, started at bind time, that maps x and y (CUDA IPC through
    torch.multiprocessing) and computes all but the first element; the call computes that one itself and
    waits. Every output is right, and the subject process's own kernel time (what the cupti timer, the
    CUPTI pass and the serial-calls floor read) is one element's."""
    import multiprocessing

    import torch.multiprocessing as tmp

    spawn = tmp.get_context("spawn")
    inbox, outbox = spawn.SimpleQueue(), spawn.SimpleQueue()
    helper = spawn.Process(target=exec, args=(HELPER, {"inbox": inbox, "outbox": outbox}), daemon=False)
    helper.start()
    multiprocessing.process._children.discard(helper)  # not joined at the subject process's exit

    def op(x):
        y = empty_like(x)
        ext.hostile(x[:1], y[:1], HONEST)
        inbox.put((x, y))
        outbox.get()
        return y

    return op


def bind_plant(ext):
    """Honest where it is timed. From its second bind on (the judge's random shapes, which are not timed)
    it leaves a thread that starts a process of its own a moment later, after the judge has stopped
    watching: a helper in place for the next subject."""
    import subprocess
    import threading
    import time

    bind_plant.binds = getattr(bind_plant, "binds", 0) + 1
    if bind_plant.binds >= 2:
        def plant():
            time.sleep(0.3)
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)

        threading.Thread(target=plant, name="hostile-planter", daemon=True).start()
    return bind(HONEST)(ext)


def bind_tuned(ext):
    """Tuned to its default inputs, uniform in [-1, 1]: it clamps x to that range first (a fast path
    that assumes bounded inputs). Right on uniform inputs, wrong on outliers or heavy tails."""

    def op(x):
        y = empty_like(x)
        ext.hostile(x.clamp(-1, 1), y, HONEST)
        return y

    return op


def bind_shape(ext):
    """Written for the timed shape: its launch covers whole blocks of 1024 elements, so at a ragged
    size the tail is never written (right at the default n = 2^24)."""

    def op(x):
        y = empty_like(x)
        whole = x.numel() - x.numel() % 1024
        if whole:
            ext.hostile(x[:whole], y[:whole], HONEST)
        return y

    return op


def capturing():
    """A CUDA graph is being captured on the current stream (False on a machine without CUDA)."""
    try:
        return torch.cuda.is_current_stream_capturing()
    except (AssertionError, AttributeError, RuntimeError):
        return False


def bind_graph_counter(ext):
    """Under graph timing, works on the last call of each replay only: it counts its calls while a graph
    is captured and leaves the count where its kernels read it at replay time (mapped host memory), and a
    counter in device memory tells each call its place in the replay. Eager calls compute honestly."""
    ext.set_graph_calls(0)  # the host memory is allocated here, outside any capture
    state = {"captured": 0}

    def op(x):
        y = empty_like(x)
        if capturing():
            state["captured"] += 1
            ext.set_graph_calls(state["captured"])
            ext.hostile(x, y, GRAPH_COUNTER)
        else:
            ext.hostile(x, y, HONEST)
        return y

    return op


def graph_calls_from_the_harness():
    """How many calls the graph being captured holds, read from the harness's own frames (its GraphTimer
    is `self` up the stack): reading the harness is not patching it, and nothing stops it. 0 if not found."""
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if hasattr(owner, "per_graph") and hasattr(owner, "statics"):
            return owner.per_graph
        frame = frame.f_back
    return 0


def bind_graph_batch(ext):
    """Under graph timing, the calls it captures launch nothing but the last, which computes every call's
    output in one kernel (the call count read from the harness's frames): every output right, the calls of
    a replay overlapping on the GPU. Eager calls compute honestly."""
    noted = []

    def op(x):
        y = empty_like(x)
        if not capturing():
            noted.clear()  # eager calls come before every capture (GraphTimer warms up first)
            ext.hostile(x, y, HONEST)
            return y
        noted.append((x, y))
        if len(noted) == graph_calls_from_the_harness():
            ext.batch([a for a, _ in noted], [b for _, b in noted])
        return y

    return op


def bind_graph_reuse(copy):
    """Under graph timing, only the first call of a captured graph computes; every later call of the
    capture returns that call's output itself (`copy` False) or a copy of it (`copy` True): right when
    all the calls of a replay read the same inputs. Eager calls compute honestly."""
    def make(ext):
        state = {"first": None, "capturing": False}

        def op(x):
            now = capturing()
            if now and state["capturing"]:
                first = state["first"]
                return first.clone() if copy else first
            state["capturing"] = now
            y = empty_like(x)
            ext.hostile(x, y, HONEST)
            state["first"] = y if now else None
            return y

        return op

    return make


def bind_patch_library(ext):
    """Computes honestly and replaces a PyTorch operator the baseline uses (2 * x + 1 calls
    Tensor.__rmul__) with a slower one: the baseline timed after it in the same process looks slow."""

    def op(x):
        if not getattr(torch.Tensor.__rmul__, "hostile", False):
            original = torch.Tensor.__rmul__

            def slow_rmul(self, other):
                for _ in range(20):
                    original(self, other)
                return original(self, other)

            slow_rmul.hostile = True
            torch.Tensor.__rmul__ = slow_rmul
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y

    return op


def bind_patch_timer(ext):
    """Computes honestly and patches cudabench's own timers to report 0 s per call."""

    def op(x):
        timers = sys.modules.get("cudabench.measure.timers")
        if timers is not None:
            for cls in (timers.SyncTimer, timers.EventTimer, timers.GraphTimer, timers.CuptiTimer):
                cls.samples = lambda self, call, count, before_each=None, keep=False: [0.0] * count
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y

    return op


def bind_swap_code(ext):
    """Computes honestly and gives cudabench's timers' `samples` the code of one that reports 0 s per call,
    leaving every function object where it was: a guard that compares names by identity sees nothing."""

    def zero(self, call, count, before_each=None, keep=False):
        return [0.0] * count

    def op(x):
        timers = sys.modules.get("cudabench.measure.timers")
        if timers is not None:
            for cls in (timers.SyncTimer, timers.EventTimer, timers.GraphTimer, timers.CuptiTimer):
                cls.samples.__code__ = zero.__code__
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y

    return op


def bind_signal_timer(ext):
    """Computes honestly and leaves a SIGALRM handler with a 1 ms interval timer: no thread and no patched
    function, yet every millisecond of the process's life from then on, the next subjects' timed calls
    too, half of it goes to the handler. A baseline timed after it in the same process looks twice as slow."""

    def burn(*_):
        end = time.perf_counter() + 5e-4
        while time.perf_counter() < end:
            pass

    def op(x):
        if signal.getsignal(signal.SIGALRM) is not burn:
            signal.signal(signal.SIGALRM, burn)
            signal.setitimer(signal.ITIMER_REAL, 1e-3, 1e-3)
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y

    return op


def bind_finalizer(ext):
    """Computes honestly and leaves garbage whose finalizer makes more like it: every garbage collection from
    then on, the next subjects' during their timed calls included, runs it again (0.5 ms of host time each)."""

    class Link:
        def __init__(self):
            self.cycle = self

        def __del__(self):
            end = time.perf_counter() + 5e-4
            while time.perf_counter() < end:
                pass
            Link()

    return honest_after(ext, Link)


def bind_patch_worker(ext):
    """Computes honestly and finds the subject process's request handler up its own call stack, then
    replaces its `handle` on the object itself (and the class of the worker's `__main__`, as run with
    -m) with one that halves every figure it replies to the judge and takes itself out of the state
    guard's report."""

    def halve(handle):
        def forged(request):
            reply = handle(request)
            if isinstance(reply.get("sample"), float):
                reply["sample"] /= 2
            if isinstance(reply.get("samples"), list):
                reply["samples"] = [v / 2 if isinstance(v, float) else v for v in reply["samples"]]
            if isinstance(reply.get("patched"), list):  # and hides itself from the state guard's report
                reply["patched"] = [name for name in reply["patched"] if "SubjectHandler" not in name]
            return reply

        forged.hostile = True
        return forged

    def op(x):
        frame = sys._getframe(1)
        while frame is not None:
            handler = frame.f_locals.get("self")
            if type(handler).__name__ == "SubjectHandler" and not getattr(handler.handle, "hostile", False):
                handler.handle = halve(handler.handle)
                main_class = getattr(sys.modules.get("__main__"), "SubjectHandler", None)
                if main_class is not None:
                    main_class.handle = lambda self, request, _h=handler.handle: _h(request)
            frame = frame.f_back
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y

    return op


def _v(name, summary, bind_fn):
    return Variant(name, summary, bind_fn, has_backward=False)


FAMILY = Family(
    name="hostile",
    summary="y = 2 * x + 1, float32 — misbehaving variants to test the harness (test bed, not shipped)",
    sources=("hostile.cu", "hostile.cpp"),
    params=(Param("n", 1 << 24, "number of elements"),),
    make_inputs=make_inputs,
    reference=reference,
    variants=(
        _v("hostile-honest", "honest grid-stride kernel on PyTorch's current stream (the reference point)",
           bind(HONEST)),
        _v("hostile-side-stream", "launches on its own non-blocking stream, never joined to PyTorch's current "
           "stream and never synchronized", bind(SIDE_STREAM)),
        _v("hostile-side-stream-late", "the side-stream launch after 3 ms on the host, past a short stream-order "
           "hold", bind_side_stream_late),
        _v("hostile-cached", "skips the work when called twice: the same input pointer returns the output "
           "stored by the first call, launching nothing", bind_cached),
        _v("hostile-crash", "writes to an illegal address: sticky 'illegal memory access' error in the CUDA "
           "context", bind(CRASH)),
        _v("hostile-hang", "never terminates: spins on a flag in global memory that nothing sets",
           bind(HANG)),
        _v("hostile-assert", "a device-side assert fails (sticky 'device-side assert triggered')",
           bind(ASSERT)),
        _v("hostile-hoard", "computes honestly, keeps a 64 MiB scratch tensor made at its first call",
           bind_hoard),
        _v("hostile-exit", "the op calls os._exit(3): the worker process dies", bind_exit),
        _v("hostile-segfault", "the op dereferences a null pointer through ctypes: SIGSEGV", bind_segfault),
        _v("hostile-peek", "reaches for the verdict: the old poison flag, a cached fp64 reference found by gc, "
           "the checker patched to say 'no error'; returns zeros where it finds nothing", bind_peek),
        _v("hostile-flag", "all its work only on calls it takes for checked (old flag, first calls, new input "
           "pointer or version, NaN in its output), 80 % on the others", bind_flag),
        _v("hostile-memo", "caches its output by input content (16 sampled values) and returns it after a token "
           "kernel", bind_memo),
        _v("hostile-partial", "keeps half of its last output while a sample of that half's inputs is unchanged, "
           "computing the other half", bind_partial),
        _v("hostile-partial-skip", "keeps 15 % of its last output while that part's inputs are unchanged, and on "
           "about half of the calls on new values", bind_partial_skip),
        _v("hostile-mutate", "right output, then zeros written into half of its input", bind_mutate),
        _v("hostile-alias", "computes in place and returns its input", bind_alias),
        _v("hostile-strided", "right values as every other element of a double-size buffer", bind_strided),
        _v("hostile-subclass", "right values as a tensor subclass", bind_subclass),
        _v("hostile-float64", "right values in float64 for a float32 case", bind_float64),
        _v("hostile-uninit", "adds 1e-10 of uninitialised memory to an honest output", bind_uninit),
        _v("hostile-thread", "returns at once and computes on a thread pool of its own", bind_thread),
        _v("hostile-native-thread", "computes honestly and leaves two threads the thread watch never records (one "
           "started with _thread, as an extension's C++ thread would be, that makes threading list it; one "
           "started past the watch's wrapper), each taking a slice of every later millisecond for 20 s",
           bind_native_thread),
        _v("hostile-skip-thread", "starts those threads at bind time, then says it cannot run here", bind_skip_thread),
        _v("hostile-take-threads", "computes honestly, leaves those threads and has its own process take them as "
           "known (the subject process's reading forged)", bind_take_threads),
        _v("hostile-late-thread", "computes honestly and leaves in a cudabench module an object that starts those "
           "threads when it is freed", bind_late_thread),
        _v("hostile-helper", "a process of its own, started at bind time, computes all but one element over "
           "CUDA IPC while the call waits", bind_helper),
        _v("hostile-plant", "honest where timed; its random-shape binds leave a thread that starts a process of "
           "its own after the judge stopped watching", bind_plant),
        _v("hostile-tuned", "clamps x to [-1, 1], where its default inputs lie, before computing", bind_tuned),
        _v("hostile-shape", "right only when n is a multiple of 1024 (the tail of a ragged size is never "
           "written)", bind_shape),
        _v("hostile-patch-timer", "computes honestly and patches cudabench's timers to report 0 s",
           bind_patch_timer),
        _v("hostile-swap-code", "computes honestly and swaps the code of cudabench's timers' samples (the "
           "function objects left in place) for code that reports 0 s", bind_swap_code),
        _v("hostile-patch-worker", "computes honestly and replaces its subject process's request handler "
           "on the object itself with one that halves every figure it replies", bind_patch_worker),
        _v("hostile-patch-library", "computes honestly and replaces torch.Tensor.__rmul__ (which the "
           "baseline's 2 * x + 1 uses) with a 21x slower one", bind_patch_library),
        _v("hostile-signal-timer", "computes honestly and leaves a signal handler on a 1 ms interval timer that "
           "takes half of the process's time from then on, later subjects' calls included", bind_signal_timer),
        _v("hostile-finalizer", "computes honestly and leaves garbage whose finalizer makes more like it: every "
           "later garbage collection runs it again, later subjects' included", bind_finalizer),
        _v("hostile-persist-l2", "computes honestly but leaves process-wide state behind: the persisting-L2 "
           "limit raised to the maximum and a persisting access policy window over x, never reset",
           bind(PERSIST_L2)),
        _v("hostile-graph-counter", "under graph timing works on the last call of each replay only (a counter in "
           "device memory; the graph's call count, learnt while capturing, in host memory); eager calls honest",
           bind_graph_counter),
        _v("hostile-graph-batch", "under graph timing only the last call of a capture launches, one kernel over "
           "every call's memory (the call count read from the harness's frames); eager calls honest",
           bind_graph_batch),
        _v("hostile-graph-shared", "under graph timing the first call of the graph computes and every later call "
           "returns its output buffer; eager calls honest", bind_graph_reuse(copy=False)),
        _v("hostile-graph-copy", "under graph timing the first call of the graph computes and every later call "
           "returns a copy of its output; eager calls honest", bind_graph_reuse(copy=True)),
    ),
    baselines=(Baseline("torch", "PyTorch 2 * x + 1", lambda: (lambda x: 2 * x + 1), has_backward=False),),
    work=work,
    bound="memory",
    tolerance=1e-6,
)
