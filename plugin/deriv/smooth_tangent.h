// Copyright 2026 The contactkit developers.
//
// The smooth-dynamics tangent: along a unit direction of (q, v, act, ctrl), the tangents of the
// mass matrix, the smooth forces, the activation rates and the constraint rows (Jacobian, gaps,
// velocities, impedance, regularizer, reference acceleration). Controls and activations by
// differences of mj_fwdActuation; velocities and positions analytically where the model allows
// it (smooth_analytic.cc: Newton-Euler tangents along cdof, contact rows from cdof with collision
// re-run on rigidly moved geom poses), otherwise velocities from MuJoCo's qDeriv and J and
// positions by one forward-difference pass per direction through MuJoCo's position and velocity
// stages (smooth_tangent.cc), never the constraint solve; contacts from distance in
// smooth_cfd.cc. Writes the DirectionTangent it is given.
#ifndef CONTACTKIT_PLUGIN_DERIV_SMOOTH_TANGENT_H_
#define CONTACTKIT_PLUGIN_DERIV_SMOOTH_TANGENT_H_

#include <mujoco/mujoco.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/deriv/integrator_tangent.h"
#include "plugin/deriv/smooth_adjoint.h"
#include "plugin/deriv/workspace.h"
#include "plugin/step/extract.h"
#include "solvers/common/problem.h"

namespace contactkit {

// the rates of MakeFrame's tangent and third axis (dF[3..8]) as the normal of frame moves by
// dF[0..2] (smooth_analytic.cc; linear in it)
void NormalFrameRate(const double* frame, double dF[9]);

class SoftTangent;

// the parameter Jacobian's model copy: the caller's values into it without its assets (meshes,
// skins, height fields, textures, bounding volumes: large and read by no parameter), and what
// mj_setConst made of it with one derived parameter moved, kept per (field, value) while the base
// model's values stay those of the last fill: mj_setConst costs about ten steps of a small arm,
// and a parameter Jacobian per step of a rollout asks for the same values again
class ConstCache {
 public:
  static constexpr size_t kMaxBytes = size_t{64} << 20;  // snapshots kept at most

  // the layout of m's values (allocates; forgets every snapshot)
  void Setup(const mjModel* m);
  // src's values (but its assets) into dst, a copy of the same model
  void Sync(mjModel* dst, const mjModel* src) const;
  // true if base's values (but its assets) are those of the last fill; else forgets every
  // snapshot and fills from base
  bool Check(const mjModel* base);
  // mp as it was stored for (field, value): false if there is none
  bool Load(mjModel* mp, const mjtNum* field, mjtNum value) const;
  // mp's values (but its assets) for (field, value), while they fit in kMaxBytes
  void Store(const mjModel* mp, const mjtNum* field, mjtNum value);

 private:
  struct Entry {
    const mjtNum* field;  // the moved parameter in the copy
    mjtNum value;         // its value
  };
  // m's options, statistics and values into out (bytes_)
  void Save(const mjModel* m, unsigned char* out) const;

  std::vector<std::pair<size_t, size_t>> ranges_;  // (offset, bytes) of the values in the buffer
  std::vector<unsigned char> base_;                // base's values at the fill (bytes_)
  std::vector<Entry> entries_;                     // the snapshots stored
  std::vector<unsigned char> store_;               // their values (bytes_ each)
  size_t bytes_ = 0;                               // options, statistics and values
};

// one model parameter of a model copy; a body's mass or inertia and a dof's armature also move
// what mj_setConst derives from them (subtree masses, dof_M0, the constraints' invweight0, ...),
// as a recompiled model would hold them
struct ParamSlot {
  mjtNum* field = nullptr;             // the parameter's value in the copy
  const mjModel* base = nullptr;       // the unperturbed model (the copy's source)
  const mjtNum* base_field = nullptr;  // the parameter's value in base
  bool derived = false;                // mj_setConst follows the field
  bool impedance = false;              // the contacts' solref / solimp follow (collision mixes)
  ConstCache* cache = nullptr;         // the copy's layout and mj_setConst's results
};

// a slot's field to value, then mj_setConst on the copy if the slot is derived (scratch: data of
// the copy, overwritten; the slot's cache answers for values it holds); at base's value the copy
// is base's again, bit for bit
void SetParam(mjModel* mp, const ParamSlot& slot, mjtNum value, mjData* scratch);

class SmoothTangent : public MassForms {
 public:
  // the parts it reads (the extractor's trees, the nominal stage, the integrator, the stage's
  // problem) and writes (the direction's tangent, scratch)
  SmoothTangent(Extractor& extractor, NominalStage& nominal, DirectionTangent& tan,
                TreeBlocks& trees, IntegratorTangent& integ, Scratch& scratch, StageState& stage)
      : extractor_(extractor),
        nominal_(nominal),
        tan_(tan),
        trees_(trees),
        integrator_(integ),
        scratch_(scratch),
        stage_(stage) {}
  SmoothTangent(const SmoothTangent&) = delete;
  SmoothTangent& operator=(const SmoothTangent&) = delete;
  ~SmoothTangent();

  void Carve(ArenaCarver& c, const DerivSizes& n);
  // the model's structure; the scratch data (stage_data: nominal stage, pass_data: perturbation
  // passes) and the shadow handle that steps
  void Setup(const mjModel* m, const DerivSizes& n, mjData* stage_data, mjData* pass_data,
             ckHandle* shadow);

  // ---- a stage (smooth_tangent.cc) ----
  // start a stage: contacts from distance on or off, no mode changes
  void BeginStage();
  // the contacts-from-distance problem is solved (cfd_width > 0)
  bool cfd() const { return cfd_; }
  // the model whose contacts the stage has: the contacts-from-distance copy or m
  const mjModel* contact_model(const mjModel* m) const { return cfd_ ? cfd_model_ : m; }
  // the rows' Jacobian kinds and slopes of the stage's problem
  void PrepareRows(const mjModel* m);
  // contact pairs of the nominal contact list
  void PreparePairs(const mjModel* m);
  // out (+)= sign qDeriv of src in the dense per-tree blocks (ntreeblock), zeroed first if clear
  void DenseQDeriv(const mjModel* m, const mjData* src, double* out, double sign, bool clear) const;
  // position tangents are analytic in this stage (DecideAnalytic)
  bool analytic() const { return analytic_; }
  // a solver's reverse mode reads a unit direction's rows on the touched islands only: with the
  // analytic tangents (every vector of a direction stays on its tree) that is its tree's island
  // (Derivative::MarkUnitTouched marks it without a scan while this is on)
  void set_island_rows(bool on) { adjoint_rows_ = on; }
  bool island_rows() const { return adjoint_rows_; }
  // the blocked columns' velocity directions take their row terms from one product per island
  // (Derivative::QueueColumn, SoftTangent::VelocityRowRhs): their row tangents (dvel, dimp, dR,
  // daref) are not formed, the island's rows keep the last direction's (the next direction on
  // another island zeroes them, a position direction on the island writes them all)
  void set_velocity_rows_unread(bool on) { velocity_rows_unread_ = on; }
  // a unit direction's dv_free is left unsolved, its right-hand side in dv_free
  // (tan_.dv_free_unit; the solver solves a block's at once: Solver::DefersFreeVelocity)
  void set_defer_free_velocity(bool on) { defer_free_velocity_ = on; }
  // the analytic contact rows of a position direction give dJ v_free (tan_.dJ_vfree) and write
  // dJ on the rows marked (Solver::TangentJacobianRows) only, their velocity products from body
  // velocities as the blocked "mujoco" path forms them (null: every row's dJ, column by column);
  // of the marked contact rows whose w_i = M^-1 J_i' the solver gives (TangentRowWeight), dJ_i
  // w_i the same way (tan_.dJ_w, row_weights()) instead of dJ
  void set_jacobian_rows(const mjModel* m, const char* rows);
  // the rows whose dJ_i w_i tan_.dJ_w holds (ProblemTangent::J_w_rows); null: none
  const char* row_weights() const { return row_weights_ ? rows_.weighted : nullptr; }
  // tan_.dJ_x and tan_.dJ_y hold dJ x and dJ' y of the solver's fixed vectors
  // (Solver::TangentProducts; ProblemTangent::J_x, J_y)
  bool product_x() const { return row_products_ && rows_.product_x; }
  bool product_y() const { return row_products_ && rows_.product_y; }
  // tan_.dJ_vfree holds dJ v_free (Solver::ReadsJacobianFreeVelocity; else it is not formed)
  bool free_velocity_rows() const { return jac_vfree_; }
  // a position direction forms dimp, dR and daref (Solver::ReadsRowImpedance; else unformed)
  bool row_impedance() const { return row_impedance_; }
  // a position direction forms its rows' dvel, dJ v+ and daref (false: comfree, which reads no
  // row velocity, aref or dJ v+, without sensors; they are not formed)
  bool row_reference() const { return row_reference_; }
  // test hook: the blocked tangents of a solver that reads no row velocity, aref or dJ v+ get a
  // position direction's without them (true) or formed
  static inline bool reference_unread_on_ = true;
  // test hook: set_jacobian_rows taken (true) or ignored
  static inline bool jacobian_rows_on_ = true;
  // test hook: the solver's row weights taken (true) or the marked rows' dJ formed
  static inline bool row_weights_on_ = true;
  // test hook: the deferral taken where it applies (true) or dv_free solved per direction
  static inline bool defer_free_velocity_on_ = true;
  // MassForms of MassTangent's dM_k in closed form (after PrepareAnalytic): with U = sum w_j
  // cdof_j over the chain above k's carry start s and F = sum w_i crb_i cdof_i over the dofs it
  // carries, w' dM_k w = -2 (S x U) . (F + crb_b0 U), S = cdof_k, b0 = k's body
  void Forms(const double* w, int begin, int end, double* q) const override;
  // the same for up to kFormLanes vectors, one in each lane of a SIMD vector (each lane's
  // operations Forms', in order)
  void FormsLanes(const double* const* w, int n, int begin, int end, double* q,
                  size_t ldq) const override;
  // test hook: the analytic position directions' dM handed to the solver with these forms (true)
  static inline bool mass_forms_ = true;
  // y -= dM_k x (MassProduct)
  void SubProduct(int k, const double* x, double* y) const override { MassProduct(k, x, -1, y); }
  // MassTangent's dM_k in tan_.dM (at once if it is there)
  void FormMatrix(int k) override;
  // y += scale dM_k x on dM_k's rows without dM_k: with U = sum x_j cdof_j over the chain above
  // k's carry start s and F = sum x_i crb_i cdof_i over the dofs it carries, a carried row i
  // takes -crb_i cdof_i . (S x U), a chain row j cdof_j . (S x* (F + crb_b0 U) - crb_b0 (S x U))
  void MassProduct(int k, const double* x, double scale, double* y) const;
  // the same for the stage's fixed vector v (0: qacc, 1: (v_free - v) / h, 2: the integrator's
  // qacc) from its tables of U and F at each dof (PrepareMassVectors, at set_lazy_mass)
  void MassVector(int k, int v, double scale, double* y) const;
  // MassVector(k, 0, scale, y) with the terms of all three formed at once in SIMD lanes (each
  // lane's operations MassProductOf's) and kept for MassVector's calls on dof k (mass_terms_on_)
  void MassVectors(int k, double scale, double* y);
  // test hook: MassVectors' terms formed and read (true) or each MassVector on its own
  static inline bool mass_terms_on_ = true;
  // the solvers' analytic position directions leave dM unformed (tan_.dM_lazy), their products
  // in closed form (the forward directions; the reverse pass reads dM itself)
  void set_lazy_mass(bool on) {
    lazy_mass_ = on && mass_products_on_ && analytic_ && stage_.has_rows;
    if (lazy_mass_) PrepareMassVectors();
  }
  // test hook: set_lazy_mass taken (true) or ignored
  static inline bool mass_products_on_ = true;
  // test hook: the carried dofs' sums of RneTangent, RneVelTangent and MassProduct read the
  // transposed tables crb_cdof_rows and bsub_cdof_rows (true: the loops vectorize) or the 6-vectors
  static inline bool dof_rows_on_ = true;
  // test hook: the unread row tangents skipped (true) or formed
  static inline bool skip_unread_rows_ = true;
  // test hook: a position or velocity direction's row tangents on its tree's island's rows, the
  // others kept zero (true), or on every row (false; the blocked path: its island either way)
  static inline bool island_rows_ = true;
  // test hook: a static plane's contacts with spheres, capsules and boxes in closed form (true) or
  // from the centred re-collisions as any other pair (false)
  static inline bool closed_form_ = true;
  // test hook: two spheres' or capsules' contacts (sphere-sphere, sphere-capsule, capsule-capsule)
  // in closed form (true) or from the centred re-collisions (false)
  static inline bool closed_bodies_ = true;
  // test hook: a pair of two free bodies re-collided along one side's dofs only, the other
  // side's tangents from them and the common rigid motion (true), or along both sides' (false)
  static inline bool relative_pairs_ = true;
  // test probe: the collision calls of the re-collisions (RecollidePair)
  static inline long recollisions_ = 0;
  // test hook: the blocked path's dJ' f of consecutive contacts on the same bodies from their
  // summed wrenches (true) or contact by contact (false)
  static inline bool group_wrenches_ = true;
  // test hook: the blocked path's y wrenches and dJ x rows cleared only for a solver that gives
  // y or x (true) or always (false)
  static inline bool lean_products_on_ = true;
  // test hook: each body's B of the Newton-Euler tangents in closed form (true) or column by
  // column from the unit vectors (false)
  static inline bool closed_form_b_ = true;

  // ---- a direction (smooth_tangent.cc) ----
  // tangents of the smooth data and rows along a unit direction
  void UnitTangent(const mjModel* m, int kind, int index);
  // the direction's tangent to zero, no perturbed matrix or row data
  void ClearTangent();
  // the same after a unit direction: its one entry (and dqderiv_qacc if written) zeroed
  void ClearUnit();
  // dv_free of the direction from dqfrc_smooth and dM (or dM_problem), for a problem with rows
  void FreeVelocityTangent(const mjModel* m);
  // ---- a parameter direction (smooth_param.cc) ----
  // tangents along the parameter slot of mp (a copy of m, restored bit for bit): central
  // differences of the position and velocity stages on pass_data_; damping_dof >= 0: the field
  // is that dof's damping, which also enters the integrator (and M_eff if fold_damping)
  // (with rows, a derived slot: also dR, ddiag (WeightPass); an impedance slot: dR, daref
  // (ImpedancePass)); false if its rows could not be matched
  bool ParamTangent(const mjModel* m, mjModel* mp, const ParamSlot& slot, int damping_dof,
                    bool fold_damping);
  // one pass of ParamTangent at the current value of mp's field: sign 1 stores, -1 differences
  bool ParamPass(mjModel* mp, int sign, double eps, const ParamSlot& slot);
  // the rows' diag_approx and R on mp, whose invweight0 a derived parameter moved (pass_data_ at
  // the nominal position stage): plain rows from MuJoCo's rows, contacts from their bodies as the
  // extractor forms them; sign 1 stores, -1 differences; false if MuJoCo's plain rows differ
  bool WeightPass(mjModel* mp, mjData* d, int sign, double scale);
  // the contacts' R and aref on mp, whose geom solref / solimp moved: MuJoCo's collision mixes
  // them into its contacts (matched with the problem's by index and geoms), the extractor's
  // impedance and reference from them; sign 1 stores, -1 differences; false if unmatched
  bool ImpedancePass(mjModel* mp, mjData* d, int sign, double scale);
  // sensor tangent of the current parameter direction (after SolveTangent)
  void ParamSensorTangent(mjModel* mp, const ParamSlot& slot, double* ds);
  // controls and activations: differences of mj_fwdActuation on stage_data_
  void ActuationTangent(const mjModel* m, int kind, int index);
  void RestoreActuation();
  // trees_.qderiv's affine actuator terms made d actuator force / d qvel: zero where clamped
  void CorrectActuatorVel(const mjModel* m, const mjData* d);
  // actuator i's force is linear in its control across the nudge e (tangent: gain moment)
  bool LinearInCtrl(const mjModel* m, int i, double e) const;
  // velocities: qDeriv and J
  void VelocityTangent(const mjModel* m, int index);
  // positions: a pass on pass_data_ at q0 (+) eps dq (and v0 + eps dv, nullable)
  void PositionPass(const mjModel* m, const double* dq, const double* dv, double eps);
  // qDeriv aint of the polynomial velocity terms at the position stage in d (out: nv)
  void SmoothVelocityProduct(const mjModel* m, mjData* d, double* out);
  // re-run the collision of the pairs the pass (step eps) moved into pairs_.forward; false if a
  // pair's contact count changed or its patch switched points (those contacts are held,
  // PatchTangent)
  bool Recollide(const mjModel* m, mjData* d, double eps);
  // the collision of pair k on the geometry in d, moved by step along a unit direction, into
  // out (pairs_.forward or pairs_.backward), marking bit in pairs_.found of each contact found
  // again; false if its contact count changed or a contact jumped (those keep the nominal geometry
  // in out)
  bool RecollidePair(const mjModel* m, mjData* d, int k, double step, int bit, mjContact* out);
  // match the n contacts in pairs_.collide_out with pair k's nominal ones into out (as
  // RecollidePair); jump: largest distance a contact point may move from its nominal one
  bool MatchPair(const mjModel* m, int k, int n, double jump, int bit, mjContact* out);
  // contact rows at the geometry of the pass
  void ContactTangent(const mjModel* m, mjData* d, const double* dq, double eps);
  // rows before the contacts (constant Jacobian, or MuJoCo's rows at the perturbed state)
  void PlainRowTangent(const mjModel* m, const double* dq, double eps);
  bool PlainRowVaries(const mjModel* m, int i) const;
  // impedance, regularizer and reference acceleration tangents from tan_.dpos, tan_.dvel; the rows'
  // regularizer slopes, J by columns, the contacts' impedance slopes and position terms (a
  // position direction's daref only with reference)
  void RowTangents(bool reference = true);
  // the rows [i, i + n) whose impedance shares one argument, returning n: a connect's 3 or a
  // weld's 6 rows, the norm of their residual (d arg = g' dpos / norm, norm 0: no change), else
  // row i's distance alone (g 1, norm 1)
  int ImpedanceArgument(const Problem& p, int i, double g[6], double* norm) const;
  // tan_.dvel = tan_.dJ v (with_dJ) + J dv (nullable dv), then RowTangents
  void RowVelocityTangents(bool with_dJ, const double* dv);
  void PrepareRowSlopes();
  // sensor tangents of the current direction (after SolveTangent)
  void SensorTangent(const mjModel* m, int kind, double* ds);
  // SensorTangent's acceleration stage at the nudge e (pass data's sensors of that stage)
  void SensorAccTangent(const mjModel* m, double e);

  // ---- analytic position tangents (smooth_analytic.cc) ----
  // the model is in their scope; nominal Newton-Euler quantities of the stage (sets analytic_)
  bool AnalyticScope(const mjModel* m) const;
  void DecideAnalytic(const mjModel* m);
  void PrepareAnalytic(const mjModel* m);
  // contact rows: v+ of each body and before each dof, dJ cleared, the side of each column
  void PrepareAnalyticRows(const mjModel* m);
  // d(M a + bias)/dq_k into dtau and, if dtau2 is not null, d(M (a - aint))/dq_k into dtau2
  void RneTangent(const mjModel* m, int k, double* dtau, double* dtau2);
  // d M / dq_k (nM)
  void MassTangent(const mjModel* m, int k, double* dM);
  // tan_.dM_rows: the rows of dM_k that can be nonzero
  void MassRows(const mjModel* m, int k);
  // MassProduct's terms from U and F
  void MassProductOf(int k, const double* u, const double* f, double scale, double* y) const;
  // w's velocity before each dof and the sums of w_i crb_i cdof_i over each dof's carried dofs
  // (6 nv each) on the bodies [root, last] (whole trees), w of the dofs [begin, end)
  void FormTables(const double* w, int begin, int end, int root, int last, double* before,
                  double* carried) const;
  void PrepareMassVectors();
  // tan_.dM's values where the lazy dM_k's may be read (tan_.dM_lazy: FormMatrix)
  void FormMass() {
    if (tan_.dM_lazy) FormMatrix(tan_.dM_dof);
  }
  // d bias / dv_k into dtau (nv)
  void RneVelTangent(const mjModel* m, int k, double* dtau);
  // the tangents of the smooth data (and rows) along position / velocity dof k
  void AnalyticPosition(const mjModel* m, int k);
  // point, frame and distance tangents of contact i from the collisions nudged by step
  // (pairs_.forward, pairs_.backward, as pairs_.found marks); false if neither
  // found it again
  bool GeometryTangent(int i, double step, double dp[3], double dF[9], double* ddist) const;
  // the pair's contacts' geometry in closed form along the direction: a plane the direction
  // does not move against a sphere, capsule or box (ClosedTangent), or two spheres or capsules
  // (BodyPairTangent)
  bool ClosedPair(const ContactPair& pr) const {
    return closed_form_ &&
           ((pr.closed && !pairs_.body_moved[pr.body1]) || (closed_bodies_ && pr.bodies));
  }
  // pair pr is two spheres or capsules whose nominal contact BodyPairTangent reproduces (its
  // parameters set); false where the closed form is degenerate (parallel capsules, coincident
  // centres) or the contact is not the expected one
  bool PrepareBodyPair(const mjModel* m, ContactPair& pr) const;
  // pair pr is a plane's cylinder whose contacts are mjc_PlaneCylinder's points recomputed from
  // the poses (1e-9 of its size), each a different one (their kinds in pr.cylinder_point), its
  // axis at least kClosedMinSine off the normal (a standing cylinder's rim point turns at r / |p|)
  bool PreparePlaneCylinder(const mjModel* m, ContactPair& pr) const;
  // the side of pair pr whose six twists' re-collided tangents give every direction's
  // (TwistTangent): convex primitives whose frames come from the normal, on bodies of different
  // trees (or one static), where the two sides' dofs outnumber the twists and checks; -1 if none
  int RelativeOwner(const mjModel* m, const ContactPair& pr) const;
  // body b is its tree's root with one free joint (its six dofs span the twists)
  static bool FreeRoot(const mjModel* m, int b) {
    return m->body_parentid[b] == 0 && m->body_weldid[b] != 0 && m->body_jntnum[b] == 1 &&
           m->jnt_type[m->body_jntadr[b]] == mjJNT_FREE && m->body_dofnum[b] == 6;
  }
  // the dofs that move body b (its own and its ancestors')
  static int ChainDofs(const mjModel* m, int b) {
    int n = 0;
    for (; b > 0; b = m->body_parentid[b]) n += m->body_dofnum[b];
    return n;
  }
  // each body's pairs (pairs_.body_pairadr, body_pair) from pairs_.pair
  void IndexBodyPairs(int nbody);
  void AnalyticVelocity(const mjModel* m, int k);
  // the joint actuators of dof k: add to the direction's tangent the differences of
  // mj_fwdActuation along their lengths or velocities (field: the stage data's actuator_length or
  // actuator_velocity)
  void JointActuatorDifference(const mjModel* m, int k, mjtNum* field);
  // the contact pairs dof k's subtree touches, re-collided on geom poses moved rigidly along it
  // forward and backward (into pairs_.forward, pairs_.backward)
  void RecollideRigid(const mjModel* m, int k);
  // RecollideRigid's pair q: the geoms of sides (bit 0: g1, bit 1: g2) turned by Q[0], Q[1] (made
  // from S at the first pair: turned) about com and shifted by the step along S, re-collided,
  // restored
  void RecollideRigidPair(const mjModel* m, int q, const double* S, const double* com, int sides,
                          double Q[2][9], bool* turned);
  // pair q moved by one side's dof k (twist S about com): each contact's tangent from the
  // owner's six twists' (OwnerTwists, once per stage), into relative_tan; false (re-collide) if
  // the pair has no owner, failed its check, or both sides move
  bool TwistTangent(const mjModel* m, int q, int k, const double* S, const double* com);
  // pair q's tangents along its owner's twist j (its last re-collision) kept in owner_tan
  void KeepOwnerTangent(const mjModel* m, int q, int j);
  // pair q re-collided along its owner's six twists not yet kept (a free root's dofs, else unit
  // twists about its tree's centre), and checked (RelativeCheck) along each moving side
  bool OwnerTwists(const mjModel* m, int q);
  // the tangents of pair q's contacts along twist S about com of the owner (other: of the other
  // side: the common rigid motion's less the owner's), into out (13 ncon); false if a free
  // owner's dofs do not span the twists
  bool CombineRelative(const mjModel* m, int q, const double* S, const double* com, bool other,
                       double* out) const;
  // twist S about com as a combination a of pair q's owner twists (false: a free root's dofs do
  // not span them)
  bool TwistCoefficients(const mjModel* m, int q, const double* S, const double* com,
                         double a[6]) const;
  // contact c's dp, dF, ddist (t) along that twist: sum a_j G_j, or for the other side's the
  // common rigid motion's less it
  void CombineContact(int c, const double a[6], const double* S, const double* com, bool other,
                      double t[13]) const;
  // the combination along the sum of body's dofs (its geom: side) against the pair re-collided
  // along that twist, within kRelativeTol
  bool RelativeCheck(const mjModel* m, int q, int body, int side);
  // contact rows along position dof k: dJ (or, blocked, dJ v, dJ v+ and dJ' f), gaps, frames
  void AnalyticContactRows(const mjModel* m, int k);
  // set_jacobian_rows' weighted rows: w_i's velocities before each dof and at the contact's
  // bodies into rows_ (weight_adr, weight_before, weight_body); false if there are none
  bool PrepareRowWeights(const mjModel* m);
  // set_jacobian_rows' terms of contact con at row along a position direction: its rows' dJ
  // v_free and dJ_i w_i (vfree), and dJ of the other rows asked for (tan: its axes' tangents,
  // ContactAxisTangents)
  void SolverRowTerms(const mjModel* m, const Contact& con, int row, int carry, int carry_end,
                      const double (*tan)[2][6][6], bool vfree);
  // set_jacobian_rows' fixed vectors of the solver (Solver::TangentProducts): x's velocities
  // before each dof and of each body into rows_ (product_before, product_cvel); false if none
  bool PrepareRowProducts(const mjModel* m);
  // their terms of contact con at row: dJ x of its rows (as SolverRowTerms' dJ v_free), and y's
  // wrenches of its two sides added into wrench (as the blocked path's f's, for WrenchColumns)
  void ProductTerms(const mjModel* m, const Contact& con, int row, int carry,
                    const double (*tan)[2][6][6], double (*wrench)[2][6]) const;
  // body b moves with the current position direction (RecollideRigid's or PositionPass' mark)
  bool body_moved(int b) const { return pairs_.body_moved[b]; }
  // body b (> 0) lies in body root's subtree: a range of bodies where every subtree is one, else
  // up b's parents
  bool InSubtree(const mjModel* m, int b, int root) const {
    if (rne_.subtree_contiguous && subtree_range_on_)
      return b >= root && b <= rne_.subtree_last[root];
    while (b > 0 && b != root) b = m->body_parentid[b];
    return b > 0;
  }
  // test hook: InSubtree by the range where it applies (true) or up the parents
  static inline bool subtree_range_on_ = true;
  // point, frame and distance tangents of contact i (MuJoCo's index) along a direction of twist
  // S about com moving the bodies of pairs_.body_moved (after RecollideRigid)
  void ContactGeometry(const mjModel* m, int i, const double* S, const double* com, double dp[3],
                       double dF[9], double* ddist) const;
  // the blocked path's dJ' f on a contact row's columns: dJf_j += sign_j wrench[side_j][carried_j]
  // . cdof_j (the summed wrenches of the contacts on the same bodies, which share the columns)
  void WrenchColumns(int row, int carry, int carry_end, const double (*wrench)[2][6],
                     double* dJf) const;
  // the blocked path's sums of contact con at row for a solver that reads none of its rows' dJ:
  // the rows' dJ v, dJ v+ (row_reference), dJ v_free (free_velocity_rows) and dJ x added, the
  // wrenches of f (wrench[0]) and y (wrench[1], with y) of its two sides written, from the point
  // and frame tangents dp, dF without the rows' 6-vector tangents (ContactAxisTangents')
  void PointRows(const mjModel* m, const Contact& con, int row, const mjContact& g0,
                 const double dp[3], const double dF[9], const double* S, int carry,
                 double (*wrench)[2][2][6]);
  // test hook: PointRows taken where it applies (true) or the rows' 6-vector tangents formed
  static inline bool point_rows_on_ = true;
  // PointRows for a contact whose rows' dJ the solver reads as dJ_i w_i only (comfree's weighted
  // rows, with dJ v_free: SolverRowTerms' sums from the point and frame tangents) (true), or
  // their 6-vector tangents (false)
  static inline bool weighted_points_on_ = true;
  // PointRows applies to the contact's rows [row, row + dim): the blocked path and no row's dJ
  // read (point_rows_on_), or every read row's as dJ_i w_i (weighted_points_on_)
  bool PointRowsApply(int row, int dim) const;
  // per side of contact con and row: d rho of the uncarried dofs and d rho - S x* rho of the
  // carried ones, from the nominal contact g0 and its point and frame tangents dp, dF
  void ContactAxisTangents(const mjModel* m, const Contact& con, const mjContact& g0,
                           const double dp[3], const double dF[9], const double* S,
                           double tan[2][2][6][6]) const;

  // ---- the reverse pass of the Newton-Euler tangents (smooth_adjoint.cc) ----
  // test hook: the "mujoco" reverse mode's position and velocity directions take their
  // Newton-Euler terms from the reverse pass (true) or from the tangents' vectors (false)
  static inline bool reverse_rne_ = true;
  // test probe: the calls PrepareRneAdjoint prepared
  static inline int reverse_rne_calls_ = 0;
  // test probe: the stages whose position tangents were analytic (PrepareAnalytic)
  static inline int analytic_stages_ = 0;
  // the sums of adjoint x (weights of d(M a + bias)) and xz (null: undamped; of d(M (a - aint)))
  // for the directions of this stage; false (nothing prepared) unless the position tangents are
  // analytic on the blocked path (stage_.batch) and reverse_rne_ is on
  bool PrepareRneAdjoint(const mjModel* m, const double* x, const double* xz);
  // a solver's reverse mode (SolverAdjointDirections, not blocked): the sums of x alone; false
  // (nothing prepared) unless the position tangents are analytic and reverse_solver_rne_ is on
  bool PrepareSolverRneAdjoint(const mjModel* m, const double* x);
  // test hook: a solver's reverse mode takes its Newton-Euler terms and dv_free's from the reverse
  // pass (true) or from each direction's dqfrc_smooth and dv_free (false)
  static inline bool reverse_solver_rne_ = true;
  static inline int reverse_solver_calls_ = 0;  // test probe: PrepareSolverRneAdjoint's
  // UnitTangent, but after PrepareSolverRneAdjoint a position or velocity direction without its
  // Newton-Euler terms and dv_free (true), dM formed
  bool SolverAdjointUnitTangent(const mjModel* m, int kind, int index);
  // x' d(M a + bias)/dq_k and, prepared with xz, xz' d(M (a - aint))/dq_k into dot2 (nullable)
  double RnePositionAdjoint(const mjModel* m, int k, double* dot2) const;
  // x' d bias/dv_k
  double RneVelocityAdjoint(const mjModel* m, int k) const;
  // the parts of a position (velocity) direction besides the Newton-Euler terms, shared by the
  // forward tangents and the reverse pass: the dof's spring (damping) and joint actuators added
  // to dqfrc_smooth, and the rows' tangents (without RowTangents' impedance and reference terms
  // when not tangents: the reverse pass's row weights hold them)
  void PositionLocalForces(const mjModel* m, int k);
  void PositionRows(const mjModel* m, int k, bool tangents = true);
  void VelocityLocalForces(const mjModel* m, int k);
  void VelocityRows(int index);
  // UnitTangent, but after PrepareRneAdjoint a position or velocity direction without its
  // Newton-Euler terms (true: they are RnePositionAdjoint's or RneVelocityAdjoint's)
  bool AdjointUnitTangent(const mjModel* m, int kind, int index);
  // test hook: after PrepareRneAdjoint the rows' term of mu' r from weights of the row tangents
  // made once per adjoint (PrepareRowAdjoint) instead of RowTangents and SoftTangent::RowRhs
  static inline bool reverse_rows_ = true;
  // test probe: the calls PrepareRowAdjoint prepared
  static inline int reverse_rows_calls_ = 0;
  // after PrepareRneAdjoint: the weights of each row's dvel, dJ v+ and dpos in x' r (r: the
  // rows' term of the solution's right-hand side, soft's RowRhs); false (not prepared) without
  // rows or the reverse pass
  bool PrepareRowAdjoint(SoftTangent& soft, const double* x);
  bool row_adjoint() const { return radj_.ready && radj_.rows; }
  // a position or velocity direction's rows' term of mu' r (AdjointUnitTangent's, row_island_ >= 0)
  double RowAdjointDot() const;
  // test hook: after PrepareRowAdjoint the rows of a static plane's contacts with spheres and
  // capsules (ClosedPair) in reverse: their gradients on the bodies' twists once per adjoint
  // (PrepareContactAdjoint), a position direction's term from its subtree's sums (ContactAdjoint)
  // and AnalyticContactRows leaves their rows zero
  static inline bool reverse_contacts_ = true;
  static inline int reverse_contacts_calls_ = 0;  // test probe: PrepareContactAdjoint's
  static inline int reversed_contacts_ = 0;       // test probe: the contacts it took
  bool PrepareContactAdjoint(const mjModel* m, const double* x);
  // contact c's gradient and force sums added to its body's (false: not a closed contact)
  bool ClosedContactGradient(const mjModel* m, int c);
  // test hook: the contacts of pairs whose tangents come from one side's twists (TwistTangent)
  // in reverse as well
  static inline bool reverse_twists_ = true;
  // the same for a contact of a checked twist pair (OwnerTwists), on each moving side's body
  bool TwistContactGradient(const mjModel* m, int c);
  // a closed contact c's gradient on the twist of its body (side 1) and its force sums
  void ContactSideGradient(const mjModel* m, int c);
  // contact con's side: its rows' rho_r, weighted body velocities X_r and its point's offset
  // from its tree's centre, the force sums added to its body's where moved; false if static
  bool ContactSideWeights(const mjModel* m, const Contact& con, int side, bool moved, double off[3],
                          double rho[6][6], double X[6][6]);
  // position direction k's term of the closed contacts' rows in x' r
  double ContactAdjoint(const mjModel* m, int k) const;
  // a velocity direction's (e_k's) rows' term of mu' r, whose row tangents AdjointUnitTangent
  // then leaves unformed
  double VelocityRowAdjoint(int k) const { return radj_.row_jw[k]; }
  // the reverse modes' unit directions: false after UnitTangent's whole tangent (not a position
  // or velocity direction, or no reverse pass), else the unit cleared for the direction
  bool BeginAdjointUnit(const mjModel* m, int kind, int index);
  // dqfrc_smooth zeroed where the last such direction wrote it, [adj_lo_, adj_hi_) set to the
  // direction's tree, dact_dot zeroed
  void AdjointTreeSpan(int index);
  // the reverse pass is over (the directions' vectors are whole again)
  void EndRneAdjoint() { radj_.ready = radj_.rows = radj_.contacts = radj_.solver_rows = false; }
  // test hook: after PrepareSolverRneAdjoint the rows' terms of a solver's position and velocity
  // directions from the solver's row weights made once (PrepareSolverRowAdjoint) instead of
  // their row tangents and AdjointDot's row products
  static inline bool reverse_solver_rows_ = true;
  static inline int reverse_solver_rows_calls_ = 0;  // test probe: PrepareSolverRowAdjoint's
  // after PrepareSolverRneAdjoint: the solver's weights of the rows' arrays (AdjointRowWeights)
  // with w' dJ' f (w: the integrator's weight, nv) added and RowTangents transposed; false (not
  // prepared: the row tangents are formed) if the solver has none
  bool PrepareSolverRowAdjoint(const mjModel* m, const Solver& solver, const Solution& sol,
                               const double* w);
  // contact c's weights of its point and frame tangents (RneAdjointWork::contact_pq)
  void ContactWeightPQ(const mjModel* m, int c);
  bool solver_rows() const { return radj_.solver_rows; }
  // RowTangents transposed: the weights of each row's d R (wR) and d aref (waref) moved onto its
  // d vel and d pos weights (added into wvel, wpos; nrow each)
  void TransposeRowTangents(const double* wR, const double* waref, double* wvel,
                            double* wpos) const;
  // a position or velocity direction's rows' term with the solver's weights (a position
  // direction's RecollideRigid run, its bodies marked)
  double SolverRowAdjointDot(const mjModel* m, int kind, int index);
  // after PrepareRneAdjoint, for a direction whose rows are its island's: x (nv, zero but on the
  // dofs of the island the last such direction wrote) zeroed there, and true; else false
  bool ZeroAdjointForce(double* x);

  // ---- contacts from distance (smooth_cfd.cc) ----
  // the model copy with margins enlarged by cfd_width (null: off)
  bool MakeCfdModel(const mjModel* m, const ckSettings& s, std::string* error);
  // impedance continued to distance r >= 0 beyond the margin, and its slope d imp / dr
  double CfdImpedance(const double solimp[5], double r, double* slope) const;
  // softplus position term s(r) = -tau log(1 + exp(-r / tau)) and its slope
  double CfdSoftplus(double r, double* slope) const;
  // the stage's forward pass on the contacts-from-distance problem (stage_data_)
  void CfdForward(const mjModel* m);
  // MuJoCo's rows of the contacts: margin, impedance, R; then the softplus references
  void CfdAdjustRows(mjData* d);
  void CfdAdjustAref(mjData* d);
  // the same on an extracted problem; records each contact's distance beyond its margin
  void CfdAdjustProblem(const mjModel* m, Problem* p);
  // new cfd_solimp (cfd_width unchanged)
  void SetCfdSolimp(const ckSettings& s);

 private:
  // rigid motion of a body per unit of a direction: angular w, linear v at point o
  struct Twist {
    double w[3], v[3], o[3];
    // motion of the body's point x: w x (x - o) + v
    void PointMotion(const double* x, double* u) const {
      const double r[3] = {x[0] - o[0], x[1] - o[1], x[2] - o[2]};
      u[0] = w[1] * r[2] - w[2] * r[1] + v[0];
      u[1] = w[2] * r[0] - w[0] * r[2] + v[1];
      u[2] = w[0] * r[1] - w[1] * r[0] + v[2];
    }
  };
  // the same for a contact of a patch that switched points on every nudge, with its point held
  // and its bodies' rigid motions along the direction
  void PatchTangent(int i, double step, const Twist& t1, const Twist& t2, double dp[3],
                    double dF[9], double* ddist) const;
  // point, frame and distance tangents of contact i of a ClosedPair, its g2 moved by twist t2
  void ClosedTangent(const mjModel* m, int i, const Twist& t2, double dp[3], double dF[9],
                     double* ddist) const;
  // u += the rolling of ellipsoid g's support point along -n as it turns by w (ClosedTangent)
  void EllipsoidRoll(const mjModel* m, int g, const double* n, const double* w, double* u) const;
  // mjc_PlaneCylinder's vectors of cylinder g on a plane of normal n: its axis a turned towards
  // the plane, A = a times the half-length, the rim vector v = r p / |p| with p = (n.a) a - n,
  // the side vector v1 = r sqrt(3) / 2 e / |e| with e = v x A
  struct CylinderRim {
    double a[3], A[3], p[3], plen, v[3], e[3], elen, v1[3];
  };
  static void PlaneCylinderRim(const mjModel* m, const mjData* d, int g, const double* n,
                               CylinderRim* rim);
  // point kind of mjc_PlaneCylinder (0: x + v + A, 1: x + v - A, 2 and 3: x +- v1 + A - v / 2)
  // as the raw point x + alpha v + beta A + gamma v1 (before the half-depth shift)
  static void CylinderPoint(const CylinderRim& rim, const double* x, int kind, double out[3]);
  // u += the rolling of cylinder g's contact point of that kind as it turns by w: the rim's and
  // side vectors' rates beyond their rigid turn (ClosedTangent)
  void CylinderRoll(const mjModel* m, int g, const double* n, const double* w, int kind,
                    double* u) const;
  // the same for contact i of a pair of spheres or capsules (ContactPair::bodies), g1 moved by
  // twist t1 and g2 by t2
  void BodyPairTangent(const mjModel* m, int i, const Twist& t1, const Twist& t2, double dp[3],
                       double dF[9], double* ddist) const;

  // the other parts
  Extractor& extractor_;
  NominalStage& nominal_;
  DirectionTangent& tan_;
  TreeBlocks& trees_;
  IntegratorTangent& integrator_;
  Scratch& scratch_;
  StageState& stage_;
  mjData* stage_data_ = nullptr;  // nominal stage
  mjData* pass_data_ = nullptr;   // perturbation passes
  ckHandle* shadow_ = nullptr;    // steps the contacts-from-distance problem
  int nq_ = 0, nv_ = 0, na_ = 0, nu_ = 0, nM_ = 0, ns_ = 0;

  // its workspace
  RowWork rows_;
  PairWork pairs_;
  RneWork rne_;
  bool analytic_ = false;       // position tangents from smooth_analytic.cc
  bool plain_varying_ = false;  // some row before the contacts has a q-dependent Jacobian
  int mode_changes_ = 0;        // pairs whose contacts changed (count, or a jump) within a nudge
  bool acc_sensors_ = false;    // the model has sensors of the acceleration stage
  bool acc_rows_ = false;       // and some of them read contacts or constraint forces
  // a position or velocity direction moves the rows of its tree's island only: the row tangents
  // are formed there (-2: every row; -3: none, a tree without rows; -1: the blocked path's tree
  // without rows, the rows without dofs). The other rows hold zeros (ZeroRowsBut)
  int row_island_ = -2;
  // the island whose rows' tangents may be nonzero (-2: any row, -3: none)
  int rows_dirty_ = -2;
  // the last unit direction (ClearUnit; -1: another direction, every entry may be nonzero)
  int unit_kind_ = -1, unit_index_ = 0;
  bool unit_dqderiv_ = true;  // it may have written dqderiv_qacc
  bool dM_listed_ = false;    // tan_.dM is zero but on the rows of dM_formed_'s (MassTangent)
  int dM_formed_ = -1;        // the dof whose dM_k tan_.dM holds (with dM_listed_)
  bool lazy_mass_ = false;    // (set_lazy_mass)
  const mjModel* forms_model_ = nullptr;  // the model of the last PrepareAnalytic (Forms)
  bool adjoint_rows_ = false;             // (set_island_rows: a solver's reverse mode)

  // the reverse pass's sums (PrepareRneAdjoint)
  RneAdjointWork radj_;
  // a new reverse pass (ready: it applies; damped: with pass 1), the directions' spans reset;
  // returns ready
  bool StartRneAdjoint(bool ready, bool damped);
  void RneAdjointSums(const mjModel* m, const double* x, const double* xz);
  // dqfrc_smooth may be nonzero on [adj_lo_, adj_hi_) (AdjointUnitTangent)
  int adj_lo_ = 0, adj_hi_ = 0;
  // the island whose dofs dJ_force may be nonzero on (ZeroAdjointForce; -2: any)
  int adj_force_island_ = -2;

  bool velocity_rows_unread_ = false;  // (set_velocity_rows_unread)
  bool defer_free_velocity_ = false;   // (set_defer_free_velocity)
  const char* jac_rows_ = nullptr;     // (set_jacobian_rows)
  bool row_weights_ = false;           // (set_jacobian_rows: rows_.weighted holds some rows)
  bool row_products_ = false;          // (set_jacobian_rows: rows_.product_x or _y given)
  bool jac_vfree_ = false;             // (set_jacobian_rows: dJ v_free formed)
  bool row_impedance_ = true;          // (set_jacobian_rows: dimp, dR, daref formed)
  bool row_reference_ = true;          // (set_jacobian_rows: dvel, dJ v+, daref formed)
  bool SkipRow(int i) const {
    return row_island_ != -2 && stage_.problem->islands.row_island[i] != row_island_;
  }
  // the rows of [begin, end) the direction's row tangents are formed on, ascending (row_island_)
  template <typename Fn>
  void ForRows(int begin, int end, Fn&& fn) const;
  // every row's tangents but island's zero (rows_dirty_'s rows zeroed), then rows_dirty_ = island
  void ZeroRowsBut(int island);
  // the plain rows' gaps along position dof k, their velocity terms zero
  void PlainRowGaps(int k);

  // contacts from distance
  mjModel* cfd_model_ = nullptr;  // margins + w_c (null: off)
  double cfd_width_ = 0;          // w_c
  double cfd_solimp_[5] = {};     // (d_c, d_0, width, midpoint, power)
  bool cfd_ = false;              // the current stage solves the contacts-from-distance problem
};

template <typename Fn>
void SmoothTangent::ForRows(int begin, int end, Fn&& fn) const {
  // fn(i) forms row i's tangents and returns the rows it formed (a connect or weld's, a contact's:
  // consecutive rows of one island)
  if (row_island_ >= 0) {
    const Islands& is = stage_.problem->islands;
    const int* rows = is.rows + is.rowadr[row_island_];
    const int n = is.nrows[row_island_];
    for (int a = static_cast<int>(std::lower_bound(rows, rows + n, begin) - rows);
         a < n && rows[a] < end;) {
      const int next = rows[a] + fn(rows[a]);
      while (a < n && rows[a] < next) a++;
    }
    return;
  }
  for (int i = begin; i < end && row_island_ != -3;) i += SkipRow(i) ? 1 : fn(i);
}

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIV_SMOOTH_TANGENT_H_
