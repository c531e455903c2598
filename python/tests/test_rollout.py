"""contactkit.rollout against mujoco.rollout, threads, shapes; transition_jacs."""

import pathlib

import mujoco
import mujoco.rollout
import numpy as np
import pytest

import contactkit

MODELS = pathlib.Path(__file__).resolve().parents[2] / "mjcf_models"
FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS


def hopper_batch(nbatch=6, nstep=120, seed=1):
    m = mujoco.MjModel.from_xml_path(str(MODELS / "hopper.xml"))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    s0 = np.empty((nbatch, mujoco.mj_stateSize(m, FULL)))
    for i in range(nbatch):
        mujoco.mj_resetData(m, d)
        d.qvel[:] = 0.2 * rng.standard_normal(m.nv)
        mujoco.mj_getState(m, d, s0[i], FULL)
    u = rng.uniform(-1, 1, (nbatch, nstep, m.nu))
    return m, s0, u


def test_mujoco_solver_reproduces_mujoco_rollout():
    m, s0, u = hopper_batch()
    ref_state, ref_sens = mujoco.rollout.rollout(m, mujoco.MjData(m), s0, u)
    state, sens = contactkit.rollout(m, mujoco.MjData(m), s0, u, solver="mujoco")
    assert state.shape == ref_state.shape and sens.shape == ref_sens.shape
    assert np.array_equal(state, ref_state)
    assert np.array_equal(sens, ref_sens)


@pytest.mark.parametrize("solver", ["ipm", "comfree", "lcp"])
def test_threads_give_the_same_bits(solver):
    m, s0, u = hopper_batch()
    one, _ = contactkit.rollout(m, mujoco.MjData(m), s0, u, solver=solver)
    two, _ = contactkit.rollout(m, [mujoco.MjData(m), mujoco.MjData(m)], s0, u, solver=solver)
    three, _ = contactkit.rollout(m, mujoco.MjData(m), s0, u, solver=solver, nthread=3)
    assert np.isfinite(one).all()
    assert np.array_equal(one, two) and np.array_equal(one, three)
    # each rollout is what one handle stepping from that state gives
    d = mujoco.MjData(m)
    h = contactkit.Handle(m, solver=solver)
    mujoco.mj_setState(m, d, s0[4], FULL)
    for t in range(u.shape[1]):
        d.ctrl[:] = u[4, t]
        h.step(m, d)
    final = np.empty(s0.shape[1])
    mujoco.mj_getState(m, d, final, FULL)
    assert np.array_equal(final, one[4, -1])


def test_singleton_inputs_are_tiled_and_outputs_written_in_place():
    m, s0, u = hopper_batch(nbatch=3, nstep=20)
    state = np.empty((3, 20, s0.shape[1]))
    sens = np.empty((3, 20, m.nsensordata))
    out, _ = contactkit.rollout(m, mujoco.MjData(m), s0, u[0, 0], nstep=20, state=state,
                                sensordata=sens, solver="ipm")
    assert out is state
    # the same control in every rollout from different states
    ref, _ = contactkit.rollout(m, mujoco.MjData(m), s0[1], np.tile(u[0, 0], (20, 1)),
                                solver="ipm")
    assert np.array_equal(ref[0], state[1])


def test_bad_shapes_are_named():
    m, s0, u = hopper_batch(nbatch=2, nstep=5)
    d = mujoco.MjData(m)
    with pytest.raises(ValueError, match="initial_state"):
        contactkit.rollout(m, d, s0[:, :-1], u)
    with pytest.raises(ValueError, match="control"):
        contactkit.rollout(m, d, s0, u[:, :, :-1])
    with pytest.raises(ValueError, match="batch size"):
        contactkit.rollout(m, d, np.vstack([s0, s0, s0]), u)
    with pytest.raises(ValueError, match="nstep"):
        contactkit.rollout(m, d, s0)
    other = mujoco.MjModel.from_xml_path(str(MODELS / "box_on_plane.xml"))
    with pytest.raises(ValueError, match="another model"):
        contactkit.rollout(m, mujoco.MjData(other), s0, u)
    with pytest.raises(ValueError, match="unknown setting"):
        contactkit.rollout(m, d, s0, u, kapa_tol=1)


def test_transition_jacs_match_one_handle_and_threads():
    m, s0, u = hopper_batch(nbatch=2, nstep=60)
    states, _ = contactkit.rollout(m, mujoco.MjData(m), s0, u, solver="comfree")
    xs, us = states[0, ::6], u[0, ::6]
    A, B, C, D = contactkit.transition_jacs(m, xs, us, solver="comfree")
    A2, B2, _, _ = contactkit.transition_jacs(m, xs, us, solver="comfree", nthread=2)
    nx = 2 * m.nv + m.na
    assert A.shape == (len(xs), nx, nx) and B.shape == (len(xs), nx, m.nu)
    assert np.array_equal(A, A2) and np.array_equal(B, B2)
    d = mujoco.MjData(m)
    h = contactkit.Handle(m, solver="comfree")
    mujoco.mj_setState(m, d, xs[3], FULL)
    d.ctrl[:] = us[3]
    Ai, Bi, _, _ = h.transition_jac(m, d)
    assert np.array_equal(Ai, A[3]) and np.array_equal(Bi, B[3])
