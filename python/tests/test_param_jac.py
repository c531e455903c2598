"""Handle.param_jac: parameter Jacobians of a step against central differences of the step."""

import mujoco
import numpy as np
import pytest

import contactkit
from support import move_param

XML = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.05" friction="0.3 0.005 0.0001"/>
    <body name="box" pos="0 0 0.06">
      <freejoint/>
      <geom name="box" type="box" size="0.1 0.08 0.06" mass="1" friction="0.5 0.01 0.001"/>
    </body>
    <body name="arm" pos="1 1 0.5">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.3" armature="0.02" stiffness="2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5" contype="0"
            conaffinity="0"/>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="hinge" kp="5"/>
  </actuator>
  <sensor>
    <framepos objtype="body" objname="box"/>
    <jointvel joint="hinge"/>
  </sensor>
</mujoco>
"""

PARAMS = ["body:box:mass", "geom:box:friction:0", "joint:hinge:damping",
          "actuator:servo:gainprm:0", "gravity:2"]
FIELDS = [("body_mass", 1, 0), ("geom_friction", 1, 0), ("dof_damping", 6, 0),
          ("actuator_gainprm", 0, 0), ("gravity", 0, 2)]


def field(m, name):
    return m.opt.gravity if name == "gravity" else getattr(m, name)


def central_differences(h, m, d, fields, eps=1e-6):
    nx = 2 * m.nv + m.na
    out = np.zeros((nx, len(fields)))
    for k, (name, row, col) in enumerate(fields):
        arr = field(m, name)
        idx = (row, col) if arr.ndim == 2 else (row if name != "gravity" else col)
        value = arr[idx]
        step = eps * (1 + abs(value))
        nexts = []
        for s in (1, -1):
            move_param(m, arr, idx, value + s * step, name == "body_mass")
            e = mujoco.MjData(m)
            mujoco.mj_copyData(e, m, d)
            h.reset()
            h.step(m, e)
            nexts.append((e.qpos.copy(), e.qvel.copy()))
        move_param(m, arr, idx, value, name == "body_mass")
        dq = np.zeros(m.nv)
        mujoco.mj_differentiatePos(m, dq, 2 * step, nexts[1][0], nexts[0][0])
        out[:m.nv, k] = dq
        out[m.nv:2 * m.nv, k] = (nexts[0][1] - nexts[1][1]) / (2 * step)
    return out


@pytest.mark.parametrize("solver", ["mujoco", "ipm", "comfree", "lcp"])
def test_param_jac_matches_central_differences_on_a_sliding_box(solver):
    m = mujoco.MjModel.from_xml_string(XML)
    m.opt.tolerance = 1e-14
    m.opt.iterations = 200
    # ipm: the derivative of the step it takes; comfree: no anchors (the reference's reset drops
    # them)
    settings = {"ipm": {"kappa_grad": 1e-10}, "comfree": {"anchor": 0}}.get(solver, {})
    h = contactkit.Handle(m, solver=solver, derivatives=True, **settings)
    d = mujoco.MjData(m)
    d.ctrl[0] = 0.4
    h.step(m, d, nstep=100)
    d.qvel[0], d.qvel[1] = 1.2, 1.6
    # MuJoCo's pyramids with soft contact hop the box at first: the first state in contact after 5
    for t in range(100):
        h.step(m, d)
        h.forward(m, d)
        if t >= 5 and d.ncon >= 2:
            break
    assert d.ncon >= 2
    qpos = d.qpos.copy()
    DxDp, DsDp, how = h.param_jac(m, d, PARAMS)
    assert np.array_equal(d.qpos, qpos)
    nx = 2 * m.nv + m.na
    assert DxDp.shape == (nx, len(PARAMS)) and DsDp.shape == (m.nsensordata, len(PARAMS))
    # friction: central differences of the step; the mass (with the rows' regularizer it moves
    # through invweight0) analytic
    assert list(how) == [0, 1, 0, 0, 0]
    ref = central_differences(h, m, d, FIELDS)
    for k in range(len(PARAMS)):
        if PARAMS[k] == "body:box:mass" and solver in ("ipm", "lcp"):
            # closed form: with hard contact a box sliding under gravity and Coulomb friction
            # moves the same whatever its mass (to ipm's smoothing; the soft solvers' impedance,
            # scaled by the compiled invweight0, is not mass-invariant): both columns ~0
            assert np.linalg.norm(DxDp[:, k]) < 1e-4 * np.linalg.norm(DxDp[:, -1]), solver
            assert np.linalg.norm(ref[:, k]) < 1e-4 * np.linalg.norm(ref[:, -1]), solver
            continue
        err = np.linalg.norm(DxDp[:, k] - ref[:, k]) / max(np.linalg.norm(ref[:, k]), 1e-6)
        assert err < 1e-5, (PARAMS[k], err)


def test_param_jac_takes_tuples_and_refuses_bad_names():
    m = mujoco.MjModel.from_xml_string(XML)
    h = contactkit.Handle(m, solver="mujoco", derivatives=True)
    d = mujoco.MjData(m)
    by_name, _, _ = h.param_jac(m, d, ["body:box:mass", "gravity:2"])
    by_tuple, _, _ = h.param_jac(m, d, [(contactkit.ParamKind.BODY_MASS, 1, 0), (14, 0, 2)])
    assert np.array_equal(by_name, by_tuple)
    with pytest.raises(ValueError, match="supported: body:NAME:mass"):
        h.param_jac(m, d, ["geom:box:colour:0"])
    with pytest.raises(ValueError, match="no geom named 'lid'"):
        h.param_jac(m, d, ["geom:lid:friction:0"])
    with pytest.raises(ValueError, match="index 3 out of range 0..2"):
        h.param_jac(m, d, ["geom:box:friction:3"])
    with pytest.raises(ValueError, match="id 7 out of range"):
        h.param_jac(m, d, [(contactkit.ParamKind.GEOM_SIZE, 7, 0)])
    with pytest.raises(ValueError, match="at least one parameter"):
        h.param_jac(m, d, [])
