"""Finding, loading and version-checking libfusedmoe.

The package has no compiled part: it binds whichever libfusedmoe it finds,
in this order, and records which way it went (:func:`library_info`):

1. an explicit path or install prefix given to :func:`load_library`;
2. the environment: ``FUSEDMOE_LIBRARY`` (the library file) or
   ``FUSEDMOE_PREFIX`` (an install prefix);
3. pkg-config: ``pkg-config --variable=libdir fusedmoe`` (honours
   ``PKG_CONFIG_PATH``);
4. the dynamic loader's own search (``LD_LIBRARY_PATH``, the ld.so cache).

A way that is named but fails (a path that does not exist, a prefix without
the library) is an error, never a silent fall-through to the next way: the
user asked for that library. When no way names a library the error lists
what each way found.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass

from . import _capi
from ._version import __version__
from .errors import FusedMoEError

SONAME = "libfusedmoe.so.0"


@dataclass(frozen=True)
class LibraryInfo:
    """Which libfusedmoe is in use and how it was found.

    Attributes:
        path: the file that was loaded (as given to the dynamic loader).
        found_by: "explicit path", "install prefix", "environment
            FUSEDMOE_LIBRARY", "environment FUSEDMOE_PREFIX", "pkg-config" or
            "dynamic loader".
        detail: what that way looked at (the prefix, the pkg-config libdir...).
        version: fmoe_version() of the loaded library ("0.1.0").
        plugin_abi: (major, minor) of the plugin ABI it speaks.
        libdir: the directory holding the library; installed plugins are in
            ``libdir/fusedmoe/plugins``.
    """

    path: str
    found_by: str
    detail: str
    version: str
    plugin_abi: tuple[int, int]
    libdir: str

    @property
    def plugin_dir(self) -> str:
        """``<libdir>/fusedmoe/plugins``, where an install puts its plugins."""
        return os.path.join(self.libdir, "fusedmoe", "plugins")

    def installed_plugins(self) -> list[str]:
        """The plugin manifests installed beside the library, sorted.

        Pass them (or some of them) as ``Context(plugins=...)`` together
        with ``isolated=True`` to get exactly these plugins.
        """
        return sorted(glob.glob(os.path.join(self.plugin_dir, "*.toml")))


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_info: LibraryInfo | None = None


def _in_prefix(prefix: str) -> str | None:
    """The library file under an install prefix: lib/<triplet>/, lib64/, lib/."""
    candidates = sorted(glob.glob(os.path.join(prefix, "lib", "*", SONAME)))
    candidates += [os.path.join(prefix, "lib64", SONAME), os.path.join(prefix, "lib", SONAME)]
    for c in candidates:
        if os.path.isfile(c):
            return c
    return None


def _from_prefix(prefix: str, how: str) -> tuple[str, str, str]:
    path = _in_prefix(prefix)
    if not path:
        raise FusedMoEError(
            FusedMoEError.NOT_FOUND,
            f"{how}: no {SONAME} under {prefix} (looked in lib/<triplet>/, lib64/ and lib/)",
        )
    return path, how, f"prefix {prefix}"


def _from_pkg_config() -> tuple[str | None, str]:
    """(path, note): the library pkg-config names, or None and why not."""
    exe = shutil.which("pkg-config")
    if not exe:
        return None, "pkg-config: not installed"
    try:
        r = subprocess.run([exe, "--variable=libdir", "fusedmoe"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"pkg-config: {e}"
    libdir = r.stdout.strip()
    if r.returncode != 0 or not libdir:
        return None, "pkg-config: no fusedmoe.pc on its search path (PKG_CONFIG_PATH)"
    path = os.path.join(libdir, SONAME)
    if not os.path.isfile(path):
        return None, f"pkg-config: fusedmoe.pc names libdir {libdir}, which has no {SONAME}"
    return path, f"libdir {libdir}"


def _locate(path: str | os.PathLike | None, prefix: str | os.PathLike | None) -> tuple[str, str, str]:
    """(file or loader name, found_by, detail), or FusedMoEError listing the tries."""
    if path is not None and prefix is not None:
        raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, "load_library: give path or prefix, not both")
    if path is not None:
        p = os.fspath(path)
        if not os.path.isfile(p):
            raise FusedMoEError(FusedMoEError.NOT_FOUND, f"explicit path: {p} does not exist")
        return p, "explicit path", p
    if prefix is not None:
        return _from_prefix(os.fspath(prefix), "install prefix")
    env_lib = os.environ.get("FUSEDMOE_LIBRARY")
    if env_lib:
        if not os.path.isfile(env_lib):
            raise FusedMoEError(FusedMoEError.NOT_FOUND, f"environment FUSEDMOE_LIBRARY: {env_lib} does not exist")
        return env_lib, "environment FUSEDMOE_LIBRARY", env_lib
    env_prefix = os.environ.get("FUSEDMOE_PREFIX")
    if env_prefix:
        return _from_prefix(env_prefix, "environment FUSEDMOE_PREFIX")
    tried = ["explicit path or prefix: none given", "FUSEDMOE_LIBRARY and FUSEDMOE_PREFIX: unset"]
    pc_path, note = _from_pkg_config()
    if pc_path:
        return pc_path, "pkg-config", note
    tried.append(note)
    try:
        ctypes.CDLL(SONAME)
    except OSError as e:
        tried.append(f"dynamic loader: {e}")
        raise FusedMoEError(
            FusedMoEError.NOT_FOUND,
            "libfusedmoe not found; tried: "
            + "; ".join(tried)
            + ". Install it (meson install) and call fusedmoe.load_library(prefix=...) or set FUSEDMOE_PREFIX.",
        ) from None
    return SONAME, "dynamic loader", "LD_LIBRARY_PATH / ld.so cache"


def _version_tuple(text: str) -> tuple[int, int, int]:
    parts = text.split(".")
    try:
        major, minor, patch = (int(p) for p in parts[:3])
    except ValueError:
        raise FusedMoEError(FusedMoEError.ABI_MISMATCH, f"library version '{text}' is not MAJOR.MINOR.PATCH") from None
    return major, minor, patch


def _check_version(lib_version: str, where: str) -> None:
    """The structures here are those of the package's version; the library
    may be newer within the same major version (fields are only appended),
    and within 0.x must have the same minor (0.x minors may change the API)."""
    lmaj, lmin, _ = _version_tuple(lib_version)
    pmaj, pmin, _ = _version_tuple(__version__)
    ok = lmaj == pmaj and (lmin == pmin if pmaj == 0 else lmin >= pmin)
    if not ok:
        want = f"{pmaj}.{pmin}.x" if pmaj == 0 else f"{pmaj}.x with x >= {pmin}"
        raise FusedMoEError(
            FusedMoEError.ABI_MISMATCH,
            f"{where} is libfusedmoe {lib_version}, but this fusedmoe package {__version__} needs {want}",
        )


def load_library(path: str | os.PathLike | None = None, *, prefix: str | os.PathLike | None = None) -> LibraryInfo:
    """Load libfusedmoe once per process and return how it was found.

    Args:
        path: the library file itself (``.../libfusedmoe.so.0``).
        prefix: an install prefix (``meson setup --prefix``); the library is
            looked up in ``lib/<triplet>``, ``lib64`` and ``lib`` under it.

    With neither, the environment, pkg-config and the dynamic loader are
    tried in that order (module docstring). Calling it again returns the
    loaded library's info; asking for a different file then is an error
    (one process holds one libfusedmoe).

    Raises:
        FusedMoEError: NOT_FOUND when no library was found (the message says
            what each way found), ABI_MISMATCH when its version does not fit
            this package, BAD_STATE when another library is already loaded.
    """
    global _lib, _info
    with _lock:
        if _info is not None:
            if path is None and prefix is None:
                return _info
            want, _, _ = _locate(path, prefix)
            if os.path.realpath(want) != os.path.realpath(_info.path):
                raise FusedMoEError(
                    FusedMoEError.BAD_STATE,
                    f"libfusedmoe is already loaded from {_info.path} ({_info.found_by}); cannot switch to {want}",
                )
            return _info
        file, found_by, detail = _locate(path, prefix)
        try:
            lib = ctypes.CDLL(file)
        except OSError as e:
            raise FusedMoEError(FusedMoEError.NOT_FOUND, f"{found_by}: cannot load {file}: {e}") from None
        # Check the version before declaring anything: an older library
        # may lack symbols, and the message should say why.
        lib.fmoe_version.restype = ctypes.c_char_p
        lib.fmoe_version.argtypes = []
        version = lib.fmoe_version().decode()
        _check_version(version, f"{file} ({found_by})")
        _capi.declare(lib)
        major, minor = ctypes.c_uint32(), ctypes.c_uint32()
        lib.fmoe_plugin_abi(ctypes.byref(major), ctypes.byref(minor))
        real = _loaded_path(lib, file)
        _lib = lib
        _info = LibraryInfo(
            path=real,
            found_by=found_by,
            detail=detail,
            version=version,
            plugin_abi=(major.value, minor.value),
            libdir=os.path.dirname(real),
        )
        return _info


def _loaded_path(lib: ctypes.CDLL, file: str) -> str:
    """The absolute path the loader actually mapped (for a bare soname, the
    file it found), read from /proc/self/maps; else `file`."""
    if os.path.isabs(file):
        return file
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                if line.rstrip().endswith("/" + SONAME) or "/libfusedmoe.so" in line:
                    return line.split(None, 5)[-1].strip()
    except OSError:
        pass
    return file


def library_info() -> LibraryInfo:
    """The loaded library's :class:`LibraryInfo` (loading it if needed)."""
    return load_library()


def lib() -> ctypes.CDLL:
    """The loaded library (loading it the default way if needed)."""
    if _lib is None:
        load_library()
    assert _lib is not None
    return _lib


def text(p: bytes | None) -> str:
    """A C string from the library as str ("" for NULL)."""
    return p.decode("utf-8", errors="replace") if p else ""


def last_error() -> str:
    return text(lib().fmoe_last_error())


def check(status: int, context: str | None = None) -> None:
    """Raise FusedMoEError for a non-OK status, with the library's message.

    fmoe_last_error is per thread and ctypes calls run on the calling
    thread, so the text read here is that of the call just made.
    """
    if status != _capi.STATUS_OK:
        msg = last_error() or f"{text(lib().fmoe_status_name(status))} (no message)"
        raise FusedMoEError(status, f"{context}: {msg}" if context else msg)


def encode(s: str | os.PathLike | None) -> bytes | None:
    return None if s is None else os.fsencode(s) if isinstance(s, os.PathLike) else s.encode()
