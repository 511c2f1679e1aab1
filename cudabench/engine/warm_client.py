"""The caller's side of warm workers (cudabench.engine.warm): where their sockets live, the key that
says whether one can serve this caller, and `SocketWorker`, which starts or reaches the warm worker
of a GPU and then speaks the worker protocol to it like `ProcessWorker` does to a fresh process.

The sockets live in a folder that only its user can enter: $XDG_RUNTIME_DIR/cudabench when that is
set, else `workers/` in cudabench's cache folder (a path too long for a socket falls back to
/tmp/cudabench-<uid>). A folder that others can enter is refused, as is a peer of another user (the
warm worker checks SO_PEERCRED). No TCP. (What only some callers need is imported where they need it.)"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from cudabench.engine import protocol
from cudabench.engine.workers import ProcessWorker, WorkerLost
from cudabench.errors import CudabenchError

START_TIMEOUT = 30.0      # a new warm worker's socket appears (before it imports torch)
SOCKET_PATH_MAX, NAME_MAX = 100, 32  # sun_path is 108 bytes on Linux; a socket's name (socket_name) at most
LOG_LIMIT = 1 << 20       # a warm worker's log (its stderr, a kernel's printf) starts over past this size
ELSEWHERE = "Set XDG_RUNTIME_DIR or CUDABENCH_CACHE to a folder of yours, or use `cudabench run --no-warm`."
# the environment a worker's results depend on: another value, another worker
KEY_VARIABLES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME",
                 "CUDA_PATH", "TORCH_CUDA_ARCH_LIST", "NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG")


def warm_by_default() -> bool:
    """Warm workers unless CUDABENCH_WARM says 0 / off / no."""
    return os.environ.get("CUDABENCH_WARM", "1").strip().lower() not in ("0", "off", "no", "false")


def worker_idle() -> float:
    """Seconds a warm worker waits for the next run before it exits: CUDABENCH_WORKER_IDLE (600)."""
    try:
        return max(1.0, float(os.environ.get("CUDABENCH_WORKER_IDLE", "600")))
    except ValueError:
        raise CudabenchError(f"CUDABENCH_WORKER_IDLE={os.environ['CUDABENCH_WORKER_IDLE']!r} is not a number "
                             "of seconds.", "Unset it or give seconds, e.g. 600.") from None


class WorkerFolderError(CudabenchError):
    """The warm workers' folder cannot be used (not writable, or others can enter it)."""


def worker_folder() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        folder = Path(runtime) / "cudabench"
    else:
        from cudabench.spec.build import cache_root

        folder = cache_root() / "workers"
    if len(str(folder)) > SOCKET_PATH_MAX - NAME_MAX - len("/.sock"):  # a short stand-in, one per long folder
        short = private(Path(f"/tmp/cudabench-{os.getuid()}"))
        folder = short / hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    return private(folder)


def private(folder: Path) -> Path:
    """`folder`, made if missing, owned by this user and closed to everyone else."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError as exc:
        raise WorkerFolderError(f"The warm workers' folder {folder} cannot be made: {exc.strerror}.",
                                ELSEWHERE) from None
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise WorkerFolderError(
            f"The warm workers' folder {folder} is not private (owner {info.st_uid}, mode "
            f"{stat.S_IMODE(info.st_mode):o}): another user could reach the workers through it.",
            f"Remove it or `chmod 700 {folder}`, or use `cudabench run --no-warm`.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise WorkerFolderError(f"The warm workers' folder {folder} is not writable.", ELSEWHERE)
    return folder


def socket_name(gpu: Any, env: Optional[dict[str, str]] = None) -> str:
    """One warm worker per GPU, named by its UUID (or index); the default GPU's by its CUDA_VISIBLE_DEVICES (callers
    that pick other GPUs would replace each other's worker). Past NAME_MAX characters, or unusual: hashed."""
    visible = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    raw = (f"default-{visible}" if visible is not None else "default") if gpu is None else \
        "gpu-" + (getattr(gpu, "uuid", "") or f"index-{getattr(gpu, 'index', 0)}")
    if len(raw) <= NAME_MAX and raw[-1] != "-" and all(c.isalnum() or c in "-_" for c in raw):
        return raw
    return "".join(c if c.isalnum() else "_" for c in raw[:15]) + "-" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def package_stamp() -> list[tuple[str, int, int]]:
    """cudabench's own files (name, size, mtime): an edited cudabench is another cudabench."""
    root = Path(__file__).resolve().parents[1]
    return sorted((str(p.relative_to(root)), st.st_size, st.st_mtime_ns)
                  for p in root.rglob("*") if p.suffix in (".py", ".h", ".cuh") and (st := p.stat()))


def worker_key(kernels_dirs: Sequence[Any], env: dict[str, str]) -> str:
    """What a warm worker must share with its caller: cudabench (version and files), the Python, the
    torch, the kernels folders and the environment its results depend on."""
    from importlib.metadata import PackageNotFoundError, version

    import cudabench

    torch_version = ""
    with contextlib.suppress(PackageNotFoundError):
        torch_version = version("torch")
    parts = {"cudabench": cudabench.__version__, "files": package_stamp(), "python": sys.executable,
             "torch": torch_version, "kernels": sorted(str(Path(d).resolve()) for d in kernels_dirs),
             "env": {k: v for k, v in sorted(env.items()) if k in KEY_VARIABLES or k.startswith("CUDABENCH_")}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def warm_command(path: Path, key: str, idle: float, handler: str = "") -> list[str]:
    return [sys.executable, "-m", "cudabench.engine.warm", "--socket", str(path), "--key", key, "--idle", str(idle),
            *(["--handler", handler] if handler else [])]


def connect(path: Path) -> Optional[socket.socket]:
    """A connection to the warm worker at `path`, or None when none listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        return sock
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
            return None
        raise


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    import fcntl

    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def reach(path: Path, key: str, env: Optional[dict[str, str]], idle: float, handler: str = "") -> socket.socket:
    """A connection to the warm worker at `path`, started first when none listens there (a socket file
    left by a worker that died is removed). One invocation starts it; another waits on the lock."""
    with _lock(path.with_suffix(".lock")):
        sock = connect(path)
        if sock is not None:
            return sock
        path.unlink(missing_ok=True)  # stale: nothing listens
        log_path = path.with_suffix(".log")
        fresh = not log_path.exists() or log_path.stat().st_size > LOG_LIMIT  # a long-lived log starts over
        with open(log_path, "wb" if fresh else "ab") as log:
            started = subprocess.Popen(warm_command(path, key, idle, handler), stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=log, env=env, start_new_session=True, close_fds=True)
        _STARTED[:] = [p for p in _STARTED if p.poll() is None] + [started]  # reaped, or kept (not collected)
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end and started.poll() is None:
            sock = connect(path)
            if sock is not None:
                return sock
            time.sleep(0.02)
    why = "exited" if started.poll() is not None else f"did not listen within {START_TIMEOUT:g} s"
    raise WorkerLost(f"the warm worker {why}{log_tail(path)}")


_STARTED: list[subprocess.Popen] = []  # warm workers this process started: they outlive it by design


def log_tail(path: Path, lines: int = 3) -> str:
    try:
        said = [ln.strip() for ln in path.with_suffix(".log").read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return (": " + " | ".join(said[-lines:])) if said else ""


def ask_once(path: Path, request: dict[str, Any], timeout: float = 10.0) -> Optional[dict[str, Any]]:
    """One info or stop request to the warm worker at `path`; None when none answers."""
    from cudabench.engine.protocol import decode

    sock = connect(path)
    if sock is None:
        return None
    with sock, sock.makefile("r", encoding="utf-8") as reader:
        sock.settimeout(timeout)
        with contextlib.suppress(OSError):  # a refusal is sent, and the socket closed, before it reads
            sock.sendall((json.dumps(request) + "\n").encode())
        try:
            for line in reader:
                message = decode(line)
                if message is not None:
                    return message
        except OSError:
            return None
    return None


class SocketWorker(ProcessWorker):
    """A connection to the warm worker of one GPU, started if needed, with ProcessWorker's watchdog:
    a deadline passed kills the warm worker's process group, and its log's last lines say what
    happened. `close` leaves it running for the next invocation."""

    def __init__(self, gpu: Any, kernels_dirs: Sequence[Any], env: Optional[dict[str, str]] = None,
                 idle: float = 600.0, handler: str = "") -> None:
        import collections
        import queue

        self.echo = None
        self.tail: collections.deque[str] = collections.deque(maxlen=50)
        self.messages: queue.Queue = queue.Queue()
        env = dict(os.environ if env is None else env)
        self.path = worker_folder() / f"{socket_name(gpu, env)}.sock"
        key = worker_key(kernels_dirs, env)
        for _ in range(3):
            self.sock = reach(self.path, key, env, idle, handler)
            self.reader = self.sock.makefile("r", encoding="utf-8")
            with contextlib.suppress(OSError):  # a refusal closes the socket before it reads
                self.sock.sendall((json.dumps({"op": "attach", "key": key}) + "\n").encode())
            reply = self._first_reply()
            if reply.get("type") == "attached":
                break
            self._drop_connection()
            last = reply
            if reply.get("type") == "gone":  # it was dying as this caller reached it (killed, or idle)
                time.sleep(0.1)
                continue
            if reply.get("type") != "mismatch":
                raise WorkerLost(f"the warm worker refused this caller: {reply.get('message', reply)}")
            _wait_gone(int(reply.get("pid", 0)))  # another version: it exits, a new one starts
        else:
            raise WorkerLost("the warm worker " + (last["message"] if last.get("type") == "gone" else
                                                   "kept being replaced by another caller's"))
        self.pid = int(reply["pid"])
        self._readers = [threading.Thread(target=self._read_messages, args=(self.reader,), daemon=True)]
        self._readers[0].start()

    def _first_reply(self) -> dict[str, Any]:
        """The answer to attach; it comes once the warm worker is free (another run may hold it)."""
        from cudabench.engine.protocol import decode

        try:
            for line in self.reader:
                message = decode(line)
                if message is not None and message.get("type") != "status":  # "waiting: ... another run"
                    return message
        except OSError:
            pass
        return {"type": "gone", "message": f"it closed the connection{log_tail(self.path)}"}

    def _drop_connection(self) -> None:
        for closable in (self.reader, self.sock):
            with contextlib.suppress(OSError):
                closable.close()

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.sendall((json.dumps(message) + "\n").encode())
        except OSError:
            pass  # it died: the next wait() says how

    def _exit_code(self) -> Optional[int]:
        return None

    def drain(self) -> None:
        self._readers[0].join(1.0)

    def last_words(self, lines: int = 3) -> str:
        return log_tail(self.path, lines)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        _wait_gone(self.pid)
        self._drop_connection()

    def close(self) -> None:
        """End this run's connection; the warm worker stays for the next one."""
        self.send(protocol.request(protocol.Exit()))
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
        self._drop_connection()


def _wait_gone(pid: int, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while pid and time.monotonic() < end and running(pid):
        time.sleep(0.02)


def running(pid: int) -> bool:
    """Whether any thread of `pid` still runs. An exited process its parent has not reaped does not;
    but a killed process's main thread turns zombie before its other threads have ended, and until
    the last one has, its files (a warm worker's listening socket) are still open."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False  # reaped meanwhile
    for task in tasks:
        try:
            if (task / "stat").read_text().split(") ", 1)[1][:1] not in "ZX":
                return True
        except (OSError, IndexError):
            continue  # that thread ended meanwhile
    return False


def warm_workers() -> list[tuple[Path, dict[str, Any]]]:
    """Every warm worker of this user that answers, with its info."""
    folder = worker_folder()
    found = []
    for path in sorted(folder.glob("*.sock")):
        info = ask_once(path, {"op": "info"})
        if info is not None and info.get("type") == "info":
            found.append((path, info))
    return found


def stop_workers() -> list[tuple[int, bool]]:
    """Stop every warm worker of this user: (pid, whether it ends only after the run it serves)."""
    stopped = []
    for path, _ in warm_workers():
        reply = ask_once(path, {"op": "stop"})
        if reply is not None and reply.get("type") == "stopped":
            pid = int(reply["pid"])
            _wait_gone(pid, timeout=15.0 if not reply.get("after_run") else 2.0)
            stopped.append((pid, running(pid)))  # still running: it ends after the run it serves
    return stopped

