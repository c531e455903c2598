// Copyright 2026 The contactkit developers.
//
// Parameter Jacobians of a step: d(next state) / d(p) and d(sensors) / d(p) for named model
// parameters p (body masses, inertias, contact and joint properties, actuator gains, gravity).
// Included by contactkit.h; the conventions (outputs last, nullable optionals, return codes) are
// those of ck_transitionJac.
#ifndef CONTACTKIT_PARAMS_H_
#define CONTACTKIT_PARAMS_H_

#include <mujoco/mujoco.h>

#include "contactkit/contactkit.h"

#ifdef __cplusplus
extern "C" {
#endif

// the kinds of parameters: the mjModel field each names, what id and index address
typedef enum ckParamKind_ {
  ckPARAM_BODY_MASS = 0,     // body_mass[id]                  index 0
  ckPARAM_BODY_IPOS,         // body_ipos[id][index]           center of mass in the body frame
  ckPARAM_BODY_INERTIA,      // body_inertia[id][index]        diagonal inertia
  ckPARAM_GEOM_FRICTION,     // geom_friction[id][index]       0 sliding, 1 torsional, 2 rolling
  ckPARAM_GEOM_SIZE,         // geom_size[id][index]
  ckPARAM_GEOM_POS,          // geom_pos[id][index]            position in its body
  ckPARAM_GEOM_SOLREF,       // geom_solref[id][index]         0..1
  ckPARAM_GEOM_SOLIMP,       // geom_solimp[id][index]         0..4
  ckPARAM_DOF_DAMPING,       // dof_damping[id]                index 0
  ckPARAM_DOF_ARMATURE,      // dof_armature[id]               index 0
  ckPARAM_JNT_STIFFNESS,     // jnt_stiffness[id]              index 0
  ckPARAM_DOF_FRICTIONLOSS,  // dof_frictionloss[id]           index 0
  ckPARAM_ACTUATOR_GAINPRM,  // actuator_gainprm[id][index]    0..mjNGAIN-1
  ckPARAM_ACTUATOR_BIASPRM,  // actuator_biasprm[id][index]    0..mjNBIAS-1
  ckPARAM_GRAVITY,           // opt.gravity[index]             id ignored
  ckNPARAMKIND
} ckParamKind;

// one parameter: kind (ckParamKind), the object's id (body, geom, dof, joint or actuator; ignored
// for gravity) and the component (index)
typedef struct ckParam_ {
  int kind;
  int id;
  int index;
} ckParam;

// how a column of ck_paramJac was computed
typedef enum ckParamHow_ {
  ckPARAM_ANALYTIC = 0,  // implicit function theorem through the solver's force tangent
  ckPARAM_FINITE_DIFF    // central differences of ck_step in the parameter
} ckParamHow;

// Name of a parameter kind as ck_parseParam spells it ("body:mass", "geom:friction", ..., NULL out
// of range).
CKAPI const char* ck_paramKindName(int kind);

// Parse "object:name:field[:index]" into param, the object given by name or by id:
//   body:NAME:mass   body:NAME:ipos:I   body:NAME:inertia:I
//   geom:NAME:friction:I   geom:NAME:size:I   geom:NAME:pos:I   geom:NAME:solref:I
//   geom:NAME:solimp:I
//   dof:ID:damping   dof:ID:armature   dof:ID:frictionloss   (ID a dof id, or a joint name with
//   I its dof within the joint)
//   joint:NAME:stiffness   joint:NAME:damping[:I]   joint:NAME:armature[:I]
//   joint:NAME:frictionloss[:I]   (the joint's dof I)
//   actuator:NAME:gainprm:I   actuator:NAME:biasprm:I
//   gravity:I
// I defaults to 0. Returns 0, or -1 with a message listing what is supported (unknown object or
// field) or the valid range (unknown name, id or index out of range).
CKAPI int ck_parseParam(const mjModel* m, const char* text, ckParam* param, char* error,
                        int error_sz);

// Check a parameter against m. Returns 0, or -1 with a message naming the valid range.
CKAPI int ck_checkParam(const mjModel* m, const ckParam* param, char* error, int error_sz);

// Jacobians of the step ck_step would take from d with respect to np parameters:
//   DxDp: (2nv+na) x np   d(next state) / d(p) in mjd_transitionFD's state layout (tangent dqpos,
//                         qvel, act), row-major like A of ck_transitionJac
//   DsDp: nsensordata x np  d(sensordata) / d(p) (sensors of this step's forward pass)
//   how:  np              ckParamHow of each column
// all nullable. A parameter is one more input direction of ck_transitionJac's implicit function
// theorem: it is changed on a copy of m (allocated by ck_make) and the smooth dynamics' tangent
// comes from central differences of MuJoCo's position and velocity stages (mass matrix, bias,
// passive and actuator forces, activation rates), never of the constraint solve; the solver's
// force tangent (its own factorization) and the integrator's tangent follow (the adaptive pairs:
// through each stage of the step's internal steps as taken, their sizes held). Analytic: body mass,
// ipos and inertia, dof damping and armature, joint stiffness, actuator gainprm and biasprm,
// gravity, and a geom's solref and solimp (its contacts' R and reference acceleration, as MuJoCo's
// collision mixes them). Central differences of ck_step on the copy (how = ckPARAM_FINITE_DIFF):
// geom friction, size and pos and dof frictionloss, which change the constraint problem's
// friction cones, bounds and contact geometry; and every parameter wherever
// ck_transitionJac would use finite differences, under RK4, with contacts from distance
// (cfd_width > 0) or the elastic correction. A parameter means the model recompiled with that
// value: after a body's mass or inertia or a dof's armature the copy runs mj_setConst (subtree
// masses, dof_M0, the constraints' invweight0); their columns carry the change of the rows'
// regularizer R and diag_approx through invweight0 (differences instead under the "mujoco"
// solver with MuJoCo's pyramidal cones on a contact of condim 4 or 6). A body's ipos moves only the
// field (mj_setConst refuses a moved center of mass on a simple body). Returns 0 if every column is
// analytic, 1 if some used finite differences, -1 on bad arguments (np <= 0, a parameter
// ck_checkParam refuses, and as ck_transitionJac), -2 as ck_transitionJac; ck_lastError says why. m
// and d are left exactly as they were; nothing is allocated.
CKAPI int ck_paramJac(ckHandle* ck, const mjModel* m, const mjData* d, const ckParam* params,
                      int np, mjtNum* DxDp, mjtNum* DsDp, int* how);

// ck_rolloutGrad with np parameters as well: from d's state, nstep ck_steps with controls ctrl
// and the loss L = sum over t of loss(t), as ck_rolloutGrad (value, gx0, gu the same), and
//   gp (np): dL/dp = sum over t of DxDp_t' a_t + DsDp_t' ds_t
// where a_t is the adjoint of the state after step t (its loss gradient plus what the later steps
// send back) and DxDp_t, DsDp_t are ck_paramJac's Jacobians at step t's kept start. The sweep
// forms each step's parameter Jacobian (no reverse-mode product for parameters): it costs one
// ck_paramJac per step on top of ck_rolloutGrad (the analytic columns share one tangent pass per
// step; a column by differences costs two ck_steps per step). how (np): ckPARAM_FINITE_DIFF
// where any step used differences for that parameter. gp, how, value, gx0, gu nullable; the
// buffers for np parameters are grown by the first call with that np and then reused (nothing
// allocated by a second call of the same nstep and np). m is unchanged. Returns as
// ck_rolloutGrad, with 1 also when some parameter column used differences; -1 for params NULL,
// np <= 0 or a parameter ck_checkParam refuses.
CKAPI int ck_rolloutGradParam(ckHandle* ck, const mjModel* m, mjData* d, int nstep,
                              const mjtNum* ctrl, ckStepLoss loss, void* user,
                              const ckParam* params, int np, mjtNum* value, mjtNum* gx0, mjtNum* gu,
                              mjtNum* gp, int* how);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // CONTACTKIT_PARAMS_H_
