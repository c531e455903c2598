"""Helpers shared by the tests."""

import mujoco


def move_param(m: mujoco.MjModel, array, index, value: float, derived: bool) -> None:
    """array[index] to value; for a mass, inertia or armature also what mj_setConst derives
    from it (Handle.param_jac's meaning: as a recompiled model holds it)"""
    array[index] = value
    if derived:
        mujoco.mj_setConst(m, mujoco.MjData(m))
