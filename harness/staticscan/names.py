"""The names the static scan's rules match whatever the problem: imports a candidate may
not make, and the calls, attributes and decorators that reach for processes, dynamic or
encoded code, frames, the harness's own recording, its channel, early exits, precomputed
data, caches and tensor identity. What a problem itself forbids (ops, methods, ATen ops)
is its ``Policy`` (``problems/policy.py``).
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FORBIDDEN_IMPORTS = {
    "subprocess": "subprocess",
    "threading": "threads",
    "_thread": "threads",
    "multiprocessing": "processes",
    "concurrent": "threads/processes",
    "socket": "network",
    "ctypes": "raw memory access",
    "signal": "signals",
    "asyncio": "background tasks",
    "pty": "processes",
    "urllib.request": "network",
    "http.client": "network",
    "requests": "network",
    "gc": "heap walking",
    "marshal": "encoded code",
    "pickle": "encoded data",
    "dill": "encoded data",
    "harness": "the harness itself",
    "ctxkernel": "the harness itself",
    "faulthandler": "crash handling",
    "resource": "process limits",
}
PROCESS_CALLS = _words(
    "os.abort os.execl os.execle os.execlp os.execv os.execve os.execvp os.execvpe "
    "os.fork os.forkpty os.kill os.killpg os.popen os.posix_spawn os.posix_spawnp "
    "os.setpgid os.setsid os.spawnl os.spawnv os.spawnve os.system "
)
DYNAMIC_CALLS = _words(
    "__import__ compile eval exec importlib.__import__ importlib.import_module "
    "runpy.run_module runpy.run_path types.CodeType types.FunctionType "
)
PAYLOAD_CALLS = _words(
    "base64.a85decode base64.b16decode base64.b32decode base64.b64decode base64.b85decode "
    "base64.decodebytes base64.urlsafe_b64decode binascii.a2b_base64 binascii.a2b_hex "
    "binascii.unhexlify bytes.fromhex bz2.decompress codecs.decode gzip.decompress "
    "lzma.decompress marshal.loads pickle.load pickle.loads zlib.decompress "
)
FRAME_CALLS = _words(
    "gc.get_objects gc.get_referents gc.get_referrers inspect.currentframe "
    "inspect.getframeinfo inspect.getouterframes inspect.stack inspect.trace "
    "sys._current_frames sys._getframe traceback.walk_stack "
)
FRAME_ATTRS = _words(
    "__builtins__ __closure__ __code__ __globals__ cell_contents cr_frame f_back "
    "f_builtins f_globals f_locals gi_frame tb_frame "
)
EVASION_NAMES = tuple(
    _words(
        "_DisableTorchDispatch _DisableTorchFunction _pop_mode _push_mode "
        "_unset_dispatch_mode _set_dispatch_mode _python_dispatch _pop_torch_function_stack "
        "DisableTorchFunction _disabled_torch_function_impl "
    )
)
EVASION_CALLS = _words(
    "sys.addaudithook sys.setprofile sys.setrecursionlimit sys.settrace threading.settrace "
)
CHANNEL_CALLS = _words(
    "os.close os.closerange os.dup os.dup2 os.fdopen os.pipe os.read os.write os.writev "
)
EXIT_CALLS = {"sys.exit", "os._exit", "exit", "quit", "os.abort"}
LOAD_CALLS = _words(
    "numpy.fromfile numpy.load numpy.loadtxt safetensors.torch.load_file torch.from_file "
    "torch.load "
)
CACHE_DECORATORS = _words(
    "cache functools.cache functools.cached_property functools.lru_cache lru_cache "
)
GENERIC_JIT = ("jit",)  # any decorator whose name ends in jit (numba.jit, a bare @jit)
KEY_ATTRS = {"data_ptr", "_version", "untyped_storage", "storage", "_cdata"}


def aten_op(name: str) -> str | None:
    """``torch.ops.aten.add.Tensor`` -> ``aten::add``."""
    parts = name.split(".")
    if len(parts) >= 4 and parts[:3] == ["torch", "ops", "aten"]:
        return "aten::" + parts[3]
    return None
