// Copyright 2026 The contactkit developers.
//
// The derivative's workspace, one struct per part. Each declares its arrays with their sizes and
// carves them from the derivative's one arena (Carve); nothing is allocated after ck_make.
#ifndef CONTACTKIT_PLUGIN_DERIV_WORKSPACE_H_
#define CONTACTKIT_PLUGIN_DERIV_WORKSPACE_H_

#include <mujoco/mujoco.h>

#include <cstddef>
#include <cstdint>

#include "solvers/common/arena.h"
#include "solvers/common/mass.h"

namespace contactkit {

// the sizes every part carves by
struct DerivSizes {
  int nq = 0, nv = 0, na = 0, nu = 0, nM = 0, ns = 0;  // model
  int nbody = 0, njnt = 0, neq = 0;                    // model
  size_t rows = 0, nnz = 0, ncon = 0;                  // the extractor's capacities
  size_t nefc = 0;                                     // MuJoCo's rows: rows + 4 ncon
  int ntree = 0;                                       // kinematic trees
  size_t ntreeblock = 0;                               // dense per-tree blocks: sum of n^2
  size_t ndx() const { return 2 * nv + na; }
};

// first and last i < n with a nonzero entry in any of x[0..nx) ([lo, hi); lo = hi = 0 if none),
// the sign bit left out (-0 is zero)
void NonzeroSpan(const double* const* x, int nx, int n, int* lo, int* hi);

// kinds of unit directions, in the order they are processed
enum DirectionKind : int { kCtrl = 0, kAct, kVel, kPos, kParam };  // kParam: ck_paramJac's

struct Problem;
struct Solution;
class Solver;

// the nominal stage's solved problem and what a call wants of it
struct StageState {
  const Problem* problem = nullptr;  // the shadow's or the "mujoco" storage's
  Solution* solution = nullptr;      // its solution
  Solver* solver = nullptr;          // its solver (null: "mujoco")
  bool has_rows = false;             // the stage has constraint rows
  bool batch = false;                // directions go through blocks (QueueColumn)
  int slots = 0;           // the solver's force tangents in blocks of slots (QueueTangent)
  bool own_slots = false;  // slots for the integrator's solve only: ForceTangent per direction
  bool sensors = false;    // sensor Jacobians wanted in this stage
};

// the nominal stage: state, smooth data and MuJoCo's rows every part reads
struct NominalStage {
  double *qpos, *qvel, *act, *ctrl;  // state and controls        (nq, nv, na, nu)
  double* mass;                      // M, MuJoCo's layout        (nM)
  double* qfrc_smooth;               //                           (nv)
  double* act_dot;                   //                           (na)
  double* qfrc_constraint;           //                           (nv)
  double* actuator_force;            // restored after the actuation differences (nu)
  double* qfrc_actuator;             // restored after the actuation differences (nv)
  double* contact_mu;                // MuJoCo's regularized cone friction per contact (ncon)
  double* efc_jar;                   // J qacc - aref of MuJoCo's rows (3.x)     (nefc)
  int* efc_state;                    // MuJoCo's row states                      (nefc)
  int* row_group;                    // SharedRowGroups of the stage's problem   (rows)
  void Carve(ArenaCarver& c, const DerivSizes& n);
};

// the tangent of everything along the current unit direction
struct DirectionTangent {
  double *dq, *dv, *dact, *du;  // the direction                  (nv, nv, na, nu)
  double* dM;                   // mass matrix                    (nM)
  double* dqfrc_smooth;         //                                (nv)
  double* dact_dot;             //                                (na)
  double* dJ;                   // constraint Jacobian values     (nnz)
  double* dJ_qvel_next;         // dJ v+ (analytic position tangents)  (rows)
  double* dJ_force;             // dJ' f (analytic position tangents)  (nv)
  double* dJ_vfree;  // dJ v_free (SmoothTangent::set_jacobian_rows; has_dJ_vfree)   (rows)
  double* dJ_w;      // dJ_i w_i of the weighted rows (RowWork::weighted)            (rows)
  double* dJ_x;      // dJ x of the solver's x (RowWork::product_x)                  (rows)
  double* dJ_y;      // dJ' y of the solver's y (RowWork::product_y)                 (nv)
  double *dpos, *dvel, *dimp, *dR, *daref;  // rows: gap, J v, impedance, regularizer, aref (rows)
  double* ddiag;                            // rows' diag_approx (a parameter)       (rows)
  double* dforce;                           // the solver's force             (rows)
  double* ddisp;                            // anchor displacement, contact tangent rows (rows)
  double* dframe;            // each contact's tangent axes (position directions)  (6 ncon)
  double* anchor_cross;      // o_side x F_r of an anchored contact, side-major, r = 1, 2 (12 ncon)
  double* dv_free;           // (dv_free_unit >= -1: h M^-1's right-hand side)  (nv)
  double* dqfrc_constraint;  // J' df + dJ' f                  (nv)
  double* dqacc_int;         // acceleration the integrator uses (nv)
  double* dqderiv_qacc;      // h d(qDeriv) qacc_int, implicit integrator (nv)
  double* dposition_correction;  // lcp's split impulse           (nv)
  double* dM_problem;            // the problem's M_eff where it differs from dM (damping) (nM)
  uint8_t* touched;              // islands the direction perturbs (IslandReach) (ntree)
  int* dM_rows;                  // rows of dM that can be nonzero, ascending (has_dM) (nv)
  int dM_nrows = 0;              // their number
  int dM_begin = 0, dM_end = 0;  // dofs whose rows of dM can be nonzero (whole trees; has_dM)
  bool dM_one_tree = false;      // dM_rows lie in one tree (an analytic position direction)
  bool has_dM_problem = false;   // dM_problem holds the problem's tangent (a damping parameter)
  bool has_dM = false, has_dJ = false, has_dpos = false, has_dvel = false;
  bool has_drows = false;     // dR, ddiag, daref hold a parameter's (no position tangent)
  bool has_dJ_force = false;  // dJ_qvel_next, dJ_force hold dJ v+, dJ' f (dJ not written)
  bool has_dposition_correction = false;
  // dv_free's solve deferred to the solver (Solver::DefersFreeVelocity): dv_free holds its
  // right-hand side x, dv_free = e_unit + h M^-1 x (unit -1: none); -2: dv_free solved
  int dv_free_unit = -2;
  bool has_dJ_vfree = false;  // dJ_vfree holds the direction's, dJ the rows asked for only
  int dM_dof = -1;  // dM is MassTangent's along this dof (SmoothTangent's MassForms), -1 not
  // dM's values are not formed (SmoothTangent::FormMatrix(dM_dof) forms them): its products
  // from SmoothTangent::MassProduct
  bool dM_lazy = false;
  void Carve(ArenaCarver& c, const DerivSizes& n);
  // dM_rows: every row of [dM_begin, dM_end)
  void AllRows() {
    dM_nrows = 0;
    for (int i = dM_begin; i < dM_end; i++) dM_rows[dM_nrows++] = i;
    dM_one_tree = false;
  }
};

// the smooth tangent's view of the constraint rows
struct RowWork {
  double* imp_slope;          // d imp / d dist per contact            (ncon)
  double* position;           // position term of each contact's aref  (ncon)
  double* position_slope;     // its slope: 1, or the softplus'        (ncon)
  double* dR_dimp;            // dR / dimp per row                     (rows)
  int* col_adr;               // J by columns: start of each column    (nv + 1)
  int* col_row;               // row of each entry                     (nnz)
  double* col_val;            // value of each entry                   (nnz)
  double* cfd_distance;       // contacts from distance: beyond the margin (ncon)
  int* contact_cols;          // columns of a contact's rows           (nv)
  double* contact_rows;       // a contact's rows, dense               (6 nv)
  signed char* nonzero_side;  // side of each contact row nonzero: -1 body 1, 1 body 2 (nnz)
  char* contact_dJ_written;   // dJ of the contact holds the direction's values     (ncon)
  int* row_contact;           // contact whose first row it is, -1: none            (rows)
  char* dof_marked;           // scratch                                            (nv)
  double* moment;             // a dense actuator moment row                        (nv)
  // set_jacobian_rows' contact rows with the solver's w_i = M^-1 J_i' (TangentRowWeight): their
  // dJ_i w_i from w_i's velocities as dJ v_free's from v_free's (SmoothTangent::PrepareRowWeights)
  static constexpr size_t kWeightPool = size_t{1} << 15;  // dofs of weight_before's rows
  int weight_rows = 0;    // rows weight_before holds: min(rows, kWeightPool / nv)
  char* weighted;         // the row's dJ w is dJ_w's (ProblemTangent::J_w_rows)     (rows)
  int* weight_adr;        // its w's velocities' start in weight_before (weighted)   (rows)
  double* weight_before;  // w's velocity before each dof, per weighted row    (6 nv weight_rows)
  double* weight_body;    // ... of the contact's two bodies, per row                (12 rows)
  double* weight_cvel;    // ... of each body (scratch)                              (6 nbody)
  // set_jacobian_rows' fixed vectors of the solver (Solver::TangentProducts; null: none): dJ x
  // of every contact row from x's velocities, dJ' y from y's wrenches
  const double* product_x = nullptr;  //                                            (nv)
  const double* product_y = nullptr;  //                                            (rows)
  double* product_before;             // x's velocity before each dof                  (6 nv)
  double* product_cvel;               // ... of each body                              (6 nbody)
  void Carve(ArenaCarver& c, const DerivSizes& n);
};

// dense per-tree blocks (column-major, tree t at blockadr[t], dofnum[t]^2 entries)
struct TreeBlocks {
  int* dofadr;               // first dof of each tree       (ntree)
  int* dofnum;               // dofs of each tree            (ntree)
  int* blockadr;             // start of each tree's block   (ntree + 1)
  double* mass;              // M (blocked "mujoco" path)    (ntreeblock)
  double* qderiv;            // qDeriv                       (ntreeblock)
  double* qderiv_rne;        // implicit: RNE part of qDeriv at velocity qacc_int (ntreeblock)
  double* qderiv_qacc_poly;  // implicit: qDeriv qacc_int of the polynomial terms (nv)
  // entries of the blocks of the trees of dof_tree (nv)
  static size_t Size(const int* dof_tree, int nv, int ntree);
  void Carve(ArenaCarver& c, const DerivSizes& n);
  void Fill(const int* dof_tree, int nv, int ntree);
};

// a geom pair of the nominal contact list and how to re-run its collision
struct ContactPair {
  int g1 = 0, g2 = 0;  // geoms in MuJoCo's order (type of g1 <= type of g2)
  int first = 0;       // first contact in the nominal list
  int count = 0;       // contacts of the pair in the nominal list
  double margin = 0;   // margin passed to the collision function
  int body1 = 0, body2 = 0;
  bool closed = false;  // a plane (g1) and a sphere, capsule or box (g2): ClosedTangent's
  // a plane's cylinder: each contact's point among mjc_PlaneCylinder's four (CylinderPoint)
  signed char cylinder_point[4] = {0, 0, 0, 0};
  // two spheres or capsules of one contact: BodyPairTangent's geometry, their nearest points at
  // the scaled-axis parameters s1, s2 (free: not clipped to the segment)
  bool bodies = false;
  bool free1 = false, free2 = false;
  double s1 = 0, s2 = 0;
  // a re-collided pair whose tangents come from one side's six twists (TwistTangent): that side
  // (0, 1; its twists' tangents in PairWork::owner_tan), -1 none; the twists kept (bit 6: one
  // not found on both nudges); the pass that combined it
  int owner = -1;
  int owner_mask = 0;
  long relative_pass = -1;
  int relative_check = 0;  // OwnerTwists' answer: 1 combined, -1 re-collided, 0 not yet
  // a free root owner's dofs factored (TwistCoefficients; lu_ready once per stage)
  bool lu_ready = false;
  double lu[36];
  int piv[6];
  // every contact's rows in reverse (PrepareContactAdjoint: RecollideRigid skips the pair)
  bool reversed = false;
};

// the nominal contact pairs and their collisions re-run along a direction
struct PairWork {
  int npair = 0;
  // the subtree's bodies [moved_first, moved_last] RecollideRigid marked last (-1: any body)
  int moved_first = -1, moved_last = -1;
  ContactPair* pair;       //                                    (ncon)
  int* contact_pair;       // pair of each mjContact             (ncon)
  mjContact* nominal;      // nominal geometry                   (ncon)
  mjContact* forward;      // geometry nudged forward            (ncon)
  mjContact* backward;     // geometry nudged backward           (ncon)
  char* found;             // nudges that found a contact again: 1 forward, 2 back (ncon)
  char* body_moved;        // bodies the pass moves              (nbody)
  int* body_pairadr;       // first of each body's pairs in body_pair (nbody + 1)
  int* body_pair;          // the pairs of each body, by body     (2 ncon)
  int* eq_type;            // equality type                      (neq)
  double* eq_torquescale;  // weld rotation-to-translation       (neq)
  mjContact* collide_out;  // collision output                   (mjMAXCONPAIR)
  double* owner_tan;       // dp, dn, ddist along the owner's twists (42 ncon)
  double* relative_tan;    // dp, dF, ddist of TwistTangent      (13 ncon)
  long pass = 0;           // RecollideRigid's calls
  void Carve(ArenaCarver& c, const DerivSizes& n);
  void Fill(const mjModel* m, const DerivSizes& n);
};

// analytic position and velocity tangents: model structure and Newton-Euler quantities
struct RneWork {
  bool subtree_contiguous = false;  // every subtree is a body range
  int* subtree_last;                // last body of each subtree            (nbody)
  int* subtree_dof_end;             // one past the last dof of each subtree (nbody)
  int* dof_actuator_num;            // joint actuators of each dof          (nv)
  int* dof_actuator_adr;            // their start in dof_actuators         (nv)
  int* dof_actuators;               //                                      (nu)
  char* dof_actuator_length;        // their forces depend on length        (nv)
  char* dof_actuator_velocity;      // their forces depend on velocity      (nv)
  int* dof_carry_start;             // first dof of its body that moving dof k carries (nv)
  int* dof_cdot_start;              // first dof of its body whose cdof_dot sees qvel k (nv)
  double* cacc;                     // body accelerations of both passes          (12 nbody)
  double* cfrc;                     // subtree forces of both passes              (12 nbody)
  double* icvel;                    // I cvel                                     (6 nbody)
  double* cvel_before_dof;          // cvel before each dof within its body (6 nv)
  double* cvel_next;                // cvel at v+ per body                  (6 nbody)
  double* cvel_next_before_dof;     // cvel at v+ before each dof           (6 nv)
  double* cvel_free;                // cvel at the problem's v_free per body (6 nbody)
  double* cvel_free_before_dof;     // ... before each dof                  (6 nv)
  double* cacc_before_dof;          // cacc of both passes before each dof  (12 nv)
  double* chain_motion;             // S x cdof of the chain above a direction      (6 nv)
  double* crb_cdof;                 // crb cdof of each dof                         (6 nv)
  double* bsub_cdof;                // Bsub' cdof of each dof                       (6 nv)
  double* crb_cdof_rows;            // crb_cdof transposed: six rows of nv          (6 nv)
  double* bsub_cdof_rows;           // bsub_cdof transposed                         (6 nv)
  double* subtree_bsub;             // B of the subtree of each body (PrepareAnalytic) (36 nbody)
  double* form_body;                // MassForms: w's velocity of each body         (6 nbody)
  double* form_before;              // ... before each dof                          (6 nv)
  double* form_sub;                 // ... subtree sums of w crb cdof, by body      (6 nbody)
  double* form_carried;             // ... over each dof's carried dofs             (6 nv)
  double* form_lanes;  // FormsLanes' four tables in lanes: body, before, sub, carried, and w
                       //                                          (4 (12 nbody + 13 nv))
  // the same two of the stage's fixed vectors of dM x (SmoothTangent::MassVector)
  static constexpr int kMassVectors = 3;
  double* mass_before;   //                                           (6 kMassVectors nv)
  double* mass_carried;  //                                           (6 kMassVectors nv)
  double* mass_x;        // (v_free - v) / h                          (nv)
  // MassProductOf's term of each of the three at each row of one dof's dM (MassTerms), in lanes
  double* mass_terms;  //                                           (4 nv)
  double* mass_lanes;  // the tables' U, then F, at each dof in lanes (vector v: lane v) (48 nv)
  int mass_terms_dof;  // their dof (-1: none)
  int* mass_chain;     // the chain above its carry start, upward          (nv)
  int mass_nchain;     // its length
  void Carve(ArenaCarver& c, const DerivSizes& n);
  // the model's structure: subtrees, each dof's actuators and carried dofs
  void Fill(const mjModel* m);
};

// "mujoco" with constraint rows: directions solved in blocks of kBlock columns (a solver's
// blocked force tangents: mass_term, act_dot, dforce and the directions)
struct BlockWork {
  double* rhs;  // right-hand sides, then dv+, row-major        (nv x kBlock)
  // dM (a - qacc_int) + h dqDeriv qacc_int per column (FlushColumns under Euler: then its
  // column's dacc)                                             (kBlock x nv)
  double* mass_term;
  double* damped;   // M_E^-1 (P - D x), row-major                  (nv x kBlock)
  double* act_dot;  // dact_dot per column                          (kBlock x na)
  // a solver's force tangent per column; "mujoco"'s row coefficients (fold) per column
  double* dforce;           //                                                       (kBlock x rows)
  int *kind, *index, *col;  // the direction of each column          (kBlock)
  int lo = 0, hi = 0;       // dofs the queued columns reach (QueueColumn); rhs zero elsewhere
  int fold_lo = -1;         // first slot whose J' fold is left to FlushColumns (-1: none)
  void Carve(ArenaCarver& c, const DerivSizes& n);
};

// output columns and the complementarity-aware VJP
struct OutputWork {
  double* state_col;           // a column of [A B]                   (ndx)
  double* sensor_col;          // a column of [C D]                   (ns)
  double* first_gradient;      // the first VJP                       (ndx + nu)
  signed char* contact_modes;  // classification of the second VJP (ncon)
  unsigned char* fd_col;       // columns left to differences (ndx + nu)
  void Carve(ArenaCarver& c, const DerivSizes& n);
};

// scratch shared by the parts (never live across a part's call)
struct Scratch {
  double *a, *b;  // (nv + na)
  void Carve(ArenaCarver& c, const DerivSizes& n);
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIV_WORKSPACE_H_
