"""contactkit: alternative contact solvers and analytic derivatives for MuJoCo.

Works on the official `mujoco` package's own objects::

    import mujoco, contactkit
    model = mujoco.MjModel.from_xml_path("scene.xml")   # the plugin tag is understood
    data = mujoco.MjData(model)
    h = contactkit.Handle(model, solver="ipm", kappa_tol=1e-8)
    h.step(model, data, nstep=100)
    A, B, C, D = h.transition_jac(model, data)

or swaps the solver under an unchanged program: ``with contactkit.patched(solver="ipm"): ...``;
``contactkit.distributed.Executor`` runs batched rollouts and gradients on a Ray cluster.
"""

from __future__ import annotations

import mujoco as _mujoco

from . import _core

__version__ = _core.version

# the extension links the libmujoco it was built against; another version's structs differ
if _mujoco.__version__ != _core.mujoco_version_built:
    raise ImportError(
        f"contactkit was built against MuJoCo {_core.mujoco_version_built}, but the installed "
        f"mujoco package is {_mujoco.__version__}: install mujoco=={_core.mujoco_version_built} "
        f"or rebuild contactkit against {_mujoco.__version__} (pip install --no-build-isolation .)")

from ._handle import (Fallback, Handle, ParamKind, Stats, Totals, fallback_text,  # noqa: E402
                      setting_keys, settings_from_model, solver_available)
from ._patch import handle_for, is_patched, patch, patched, unpatch  # noqa: E402
from ._rollout import rollout, transition_jacs  # noqa: E402
from . import distributed  # noqa: E402  (imports Ray only when an Executor is made)

__all__ = [
    "Fallback",
    "Handle",
    "ParamKind",
    "Stats",
    "Totals",
    "fallback_text",
    "setting_keys",
    "solver_available",
    "settings_from_model",
    "patch",
    "patched",
    "unpatch",
    "is_patched",
    "handle_for",
    "rollout",
    "transition_jacs",
    "distributed",
]
