"""Zero-code solver swap: mujoco.mj_step / mj_forward run contactkit under an unchanged program."""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Dict, Iterator, Optional, Tuple

import mujoco

from ._handle import Handle

_lock = threading.Lock()
_originals: Dict[str, Any] = {}
_config: Dict[str, Any] = {}
# id(data) -> (weak reference to the data, model signature, handle); dropped with the data
_handles: Dict[int, Tuple[weakref.ref, Handle]] = {}


def _drop(key: int) -> None:
    with _lock:
        _handles.pop(key, None)


def _handle(model: mujoco.MjModel, data: mujoco.MjData) -> Handle:
    key = id(data)
    with _lock:
        entry = _handles.get(key)
        if entry is not None and entry[0]() is data and entry[1]._core.same_model(model._address):
            return entry[1]
        handle = Handle(model, **_config)
        _handles[key] = (weakref.ref(data), handle)
        weakref.finalize(data, _drop, key)
        return handle


def _mj_step(m: mujoco.MjModel, d: mujoco.MjData, nstep: int = 1) -> None:
    _handle(m, d).step(m, d, nstep)


def _mj_forward(m: mujoco.MjModel, d: mujoco.MjData) -> None:
    _handle(m, d).forward(m, d)


def _reset_after(name: str):
    original = getattr(mujoco, name)

    def reset(m, d, *args, **kwargs):
        original(m, d, *args, **kwargs)
        with _lock:
            entry = _handles.get(id(d))
        if entry is not None and entry[0]() is d:
            entry[1].reset()

    reset.__name__ = name
    reset.__doc__ = original.__doc__
    return reset


def patch(solver: Optional[str] = None, **settings: Any) -> None:
    """Replace mujoco.mj_step and mujoco.mj_forward with contactkit's pipeline.

    Each (model, data) pair gets its own Handle on first use, made with these settings (on top of
    the model's own; with none, the model's settings, else MuJoCo's solver), dropped when the data
    is collected; mj_resetData / mj_resetDataKeyframe also reset its warm starts. The settings are
    checked here (ValueError on a bad key or value). Calling patch again changes the settings for
    data seen from then on."""
    global _config
    config = dict(settings)
    if solver is not None:
        config["solver"] = solver
    # validate on a tiny model before anything is replaced
    probe = mujoco.MjModel.from_xml_string("<mujoco/>")
    Handle(probe, **config)
    with _lock:
        _config = config
        _handles.clear()
        if not _originals:
            for name in ("mj_step", "mj_forward", "mj_resetData", "mj_resetDataKeyframe"):
                _originals[name] = getattr(mujoco, name)
            mujoco.mj_step = _mj_step
            mujoco.mj_forward = _mj_forward
            mujoco.mj_resetData = _reset_after("mj_resetData")
            mujoco.mj_resetDataKeyframe = _reset_after("mj_resetDataKeyframe")


def unpatch() -> None:
    """Restore MuJoCo's own functions and drop every handle."""
    with _lock:
        for name, fn in _originals.items():
            setattr(mujoco, name, fn)
        _originals.clear()
        _handles.clear()


def is_patched() -> bool:
    """True while mujoco.mj_step runs through contactkit."""
    return bool(_originals)


def handle_for(data: mujoco.MjData) -> Optional[Handle]:
    """The handle that the patch made for data, if any (for its stats)."""
    with _lock:
        entry = _handles.get(id(data))
    return entry[1] if entry is not None and entry[0]() is data else None


@contextlib.contextmanager
def patched(solver: Optional[str] = None, **settings: Any) -> Iterator[None]:
    """`with contactkit.patched(solver="ipm"): ...` patches inside the block only."""
    patch(solver, **settings)
    try:
        yield
    finally:
        unpatch()
