// Copyright 2026 The contactkit developers.
#include "plugin/step/extract.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "plugin/step/compat.h"
#include "solvers/common/impedance.h"

namespace contactkit {
namespace {

constexpr int kMaxPairContacts = 64;  // contacts of one geom pair matched by the gap re-check

// number of rows MuJoCo can make from equality, friction and limit constraints
int NonContactRows(const mjModel* m) {
  int n = 0;
  for (int i = 0; i < m->neq; i++) {
    n += m->eq_type[i] == mjEQ_CONNECT ? 3 : m->eq_type[i] == mjEQ_WELD ? 6 : 1;
  }
  for (int i = 0; i < m->nv; i++) n += m->dof_frictionloss[i] > 0;
  for (int i = 0; i < m->ntendon; i++)
    n += (m->tendon_frictionloss[i] > 0) + 2 * m->tendon_limited[i];
  for (int i = 0; i < m->njnt; i++) {
    if (m->jnt_limited[i]) n += m->jnt_type[i] == mjJNT_BALL ? 1 : 2;
  }
  return n;
}

// descending dof chain of a body (dofs of the body and its ancestors); returns its length
int BodyChain(const mjModel* m, int body, int* chain) {
  while (body > 0 && m->body_dofnum[body] == 0) body = m->body_parentid[body];
  if (body <= 0) return 0;
  int n = 0;
  for (int da = m->body_dofadr[body] + m->body_dofnum[body] - 1; da >= 0;
       da = m->dof_parentid[da]) {
    chain[n++] = da;
  }
  return n;
}

// body of equality object k (0 or 1) of equality i (connect / weld: a body, or a site on 3.x)
int EqualityBody(const mjModel* m, int i, int k) {
  const int id = k == 0 ? m->eq_obj1id[i] : m->eq_obj2id[i];
#if CK_MJ3
  if (m->eq_objtype[i] == mjOBJ_SITE) return id >= 0 ? m->site_bodyid[id] : 0;
#endif
  return id;
}

}  // namespace

int Extractor::StructuralColumns(const mjModel* m, int type, int id, int* cols) {
  // connect / weld: every dof that moves either body (the Jacobian's pattern as q changes)
  if (type == mjCNSTR_EQUALITY && (m->eq_type[id] == mjEQ_CONNECT || m->eq_type[id] == mjEQ_WELD)) {
    const int n1 = BodyChain(m, EqualityBody(m, id, 0), chain1_.data());
    const int n2 = BodyChain(m, EqualityBody(m, id, 1), chain2_.data());
    int i1 = n1 - 1, i2 = n2 - 1, n = 0;
    while (i1 >= 0 || i2 >= 0) {
      const int a = i1 >= 0 ? chain1_[i1] : m->nv, b = i2 >= 0 ? chain2_[i2] : m->nv;
      cols[n++] = a < b ? a : b;
      if (a <= b) i1--;
      if (b <= a) i2--;
    }
    return n;
  }

  // ball joint limit: the joint's three dofs
  if (type == mjCNSTR_LIMIT_JOINT && m->jnt_type[id] == mjJNT_BALL) {
    for (int k = 0; k < 3; k++) cols[k] = m->jnt_dofadr[id] + k;
    return 3;
  }
  return -1;
}

bool Extractor::Setup(const mjModel* m, int max_contacts, std::string* error) {
  const int nv = m->nv;

  // trees: world children that carry dofs, numbered in dof order
  dof_tree_.assign(nv, -1);
  std::vector<int> root_tree(m->nbody, -1);
  ntree_ = 0;
  for (int j = 0; j < nv; j++) {
    const int root = m->body_rootid[m->dof_bodyid[j]];
    if (root_tree[root] < 0) root_tree[root] = ntree_++;
    dof_tree_[j] = root_tree[root];
  }
  for (int j = 1; j < nv; j++) {
    if (dof_tree_[j] < dof_tree_[j - 1]) {
      *error = "model has kinematic trees whose dofs are not contiguous";
      return false;
    }
  }

  // longest dof chain of any body
  chain1_.assign(std::max(nv, 1), 0);
  chain2_.assign(std::max(nv, 1), 0);
  int maxchain = 0;
  for (int b = 1; b < m->nbody; b++) maxchain = std::max(maxchain, BodyChain(m, b, chain1_.data()));
  jac_.assign(6 * static_cast<size_t>(std::max(nv, 1)), 0);
  chain_cols_.assign(std::max(nv, 1), 0);

  // capacities
  int ncon = max_contacts;
  if (ncon <= 0)
    ncon = m->nconmax > 0 ? m->nconmax : std::max(1000, 20 * static_cast<int>(m->ngeom));
  // sizes in 64 bits: the products overflow int for large nconmax or long chains
  const int noncontact = NonContactRows(m);
  int64_t rows = noncontact + 6 * static_cast<int64_t>(ncon);
  if (m->njmax > 0) rows = std::min<int64_t>(rows, m->njmax);
  maxpair_ = std::min(nv, 2 * maxchain);
  const int64_t nnz = static_cast<int64_t>(noncontact) * nv + rows * maxpair_;
  if (nnz > INT_MAX || rows > INT_MAX / 6) {
    *error = "model too large: its constraint rows (" + std::to_string(rows) + ") or Jacobian (" +
             std::to_string(nnz) + " non-zeros) exceed the 32-bit sizes; lower nconmax or njmax";
    return false;
  }
  dims_.nv = nv;
  dims_.nM = m->nM;
  dims_.ntree = ntree_;
  dims_.max_contacts = ncon;
  dims_.max_rows = static_cast<int>(rows);
  dims_.max_nnz = static_cast<int>(nnz);
  return true;
}

int Extractor::ContactRows(const mjModel* m, const mjData* d, int body1, int body2,
                           const double pos[3], const double frame[9], int dim, int* cols,
                           double* rows, int ld) {
  const int n1 = BodyChain(m, body1, chain1_.data());
  const int n2 = BodyChain(m, body2, chain2_.data());
  const double* cdof = d->cdof;

  // merge the descending chains into ascending columns; dofs on both chains cancel exactly
  int i1 = n1 - 1, i2 = n2 - 1, nnz = 0;
  while (i1 >= 0 || i2 >= 0) {
    int dof, sign;
    if (i2 < 0 || (i1 >= 0 && chain1_[i1] < chain2_[i2])) {
      dof = chain1_[i1--];
      sign = -1;
    } else if (i1 < 0 || chain2_[i2] < chain1_[i1]) {
      dof = chain2_[i2--];
      sign = 1;
    } else {
      i1--;
      i2--;
      continue;
    }
    const int body = sign > 0 ? body2 : body1;
    const double* com = d->subtree_com + 3 * m->body_rootid[body];
    const double offset[3] = {pos[0] - com[0], pos[1] - com[1], pos[2] - com[2]};
    const double* c = cdof + 6 * dof;

    // translation: lin + rot x offset; rotation: rot
    double jp[3], jr[3] = {c[0], c[1], c[2]};
    jp[0] = c[3] + (c[1] * offset[2] - c[2] * offset[1]);
    jp[1] = c[4] + (c[2] * offset[0] - c[0] * offset[2]);
    jp[2] = c[5] + (c[0] * offset[1] - c[1] * offset[0]);
    cols[nnz] = dof;
    for (int r = 0; r < dim; r++) {
      const double* axis = frame + 3 * (r < 3 ? r : r - 3);
      const double* v = r < 3 ? jp : jr;
      rows[r * ld + nnz] = sign * (axis[0] * v[0] + axis[1] * v[1] + axis[2] * v[2]);
    }
    nnz++;
  }
  return nnz;
}

void Extractor::Dynamics(const mjModel* m, const mjData* d, Problem* p) {
  const int nv = m->nv;
  const double h = m->opt.timestep;
  p->nv = nv;
  p->h = h;
  p->elliptic = m->opt.cone == mjCONE_ELLIPTIC;
  p->qvel = d->qvel;
  p->qfrc_smooth = d->qfrc_smooth;
  CopyLegacyM(m, d, p->mass.M);
  if ((m->opt.integrator == mjINT_EULER && EulerDampingImplicit(m)) || IsImplicit(m)) {
    for (int i = 0; i < nv; i++) p->mass.M[m->dof_Madr[i]] += h * m->dof_damping[i];
  }
  p->mass.Factor();
  for (int i = 0; i < nv; i++) p->v_free[i] = d->qfrc_smooth[i];
  p->mass.Solve(p->v_free);
  for (int i = 0; i < nv; i++) p->v_free[i] = d->qvel[i] + h * p->v_free[i];
}

void Extractor::AddRow(const mjModel* m, const mjData* d, int i, Problem* p, int* nnz) {
  const int nv = m->nv, type = d->efc_type[i], nrow = p->nrow;
  SparseRows& J = p->J;
  if (type == mjCNSTR_LIMIT_JOINT || type == mjCNSTR_LIMIT_TENDON) p->nl++;
  J.rowadr[nrow] = *nnz;
  if (mj_isSparse(m)) {
    const int adr = d->efc_J_rowadr[i], n = d->efc_J_rownnz[i];
    for (int k = 0; k < n; k++) {
      J.colind[*nnz] = d->efc_J_colind[adr + k];
      J.val[(*nnz)++] = d->efc_J[adr + k];
    }
  } else {
    // nonzeros, or the structural pattern of rows whose Jacobian changes with q (so that its
    // derivative has a place even where the value happens to be zero)
    const double* row = d->efc_J + static_cast<size_t>(i) * nv;
    int* cols = J.colind + *nnz;
    const int n = structural_ ? StructuralColumns(m, type, d->efc_id[i], cols) : -1;
    if (n >= 0 && *nnz + n <= dims_.max_nnz) {
      for (int k = 0; k < n; k++) J.val[*nnz + k] = row[cols[k]];
      *nnz += n;
    } else {
      for (int k = 0; k < nv; k++) {
        if (row[k] != 0) {
          J.colind[*nnz] = k;
          J.val[(*nnz)++] = row[k];
        }
      }
    }
  }
  J.rownnz[nrow] = *nnz - J.rowadr[nrow];
  p->kind[nrow] = type == mjCNSTR_EQUALITY                                            ? kRowEquality
                  : (type == mjCNSTR_FRICTION_DOF || type == mjCNSTR_FRICTION_TENDON) ? kRowFriction
                                                                                      : kRowLimit;
  p->mj_type[nrow] = type;
  p->mj_id[nrow] = d->efc_id[i];
  p->pos[nrow] = d->efc_pos[i];
  p->margin[nrow] = d->efc_margin[i];
  p->floss[nrow] = d->efc_frictionloss[i];
  p->diag_approx[nrow] = EfcDiagApprox(d, i);
  p->R[nrow] = d->efc_R[i];
  p->KB[2 * nrow] = d->efc_KBIP[4 * i];
  p->KB[2 * nrow + 1] = d->efc_KBIP[4 * i + 1];
  p->imp[nrow] = d->efc_KBIP[4 * i + 2];
  p->aref[nrow] = d->efc_aref[i];
  p->nrow++;
}

void Extractor::AddContact(const mjModel* m, const mjData* d, const mjContact* mc, int i,
                           Problem* p, int* nnz) {
  const int nv = m->nv, dim = mc->dim, nrow = p->nrow, id = d->efc_id[i];
  const int b1 = m->geom_bodyid[ContactGeom(mc, 0)], b2 = m->geom_bodyid[ContactGeom(mc, 1)];
  SparseRows& J = p->J;
  Contact& c = p->con[p->ncon];
  c.row = nrow;
  c.dim = dim;
  c.dist = mc->dist;
  c.margin = mc->includemargin;
  for (int k = 0; k < 5; k++) c.mu[k] = mc->friction[k];
  for (int k = 0; k < 9; k++) c.frame[k] = mc->frame[k];
  for (int k = 0; k < 3; k++) c.pos[k] = mc->pos[k];
  for (int k = 0; k < 2; k++) c.solref[k] = mc->solref[k];
  for (int k = 0; k < 5; k++) c.solimp[k] = mc->solimp[k];
  double imp, K, B;
  ContactSoftness(m->opt.timestep, !(m->opt.disableflags & mjDSBL_REFSAFE), c.dist, c.margin,
                  c.solref, c.solimp, &imp, &K, &B);
  c.efc_address = i;
  c.mj_index = id;
  c.cfd_pos = c.cfd_slope = 0;
  c.geom[0] = ContactGeom(mc, 0);
  c.geom[1] = ContactGeom(mc, 1);
  c.body[0] = b1;
  c.body[1] = b2;
  c.relocates =
      m->geom_type[c.geom[0]] == mjGEOM_CYLINDER || m->geom_type[c.geom[1]] == mjGEOM_CYLINDER;

  // Jacobian rows: compute into the first row's storage, then spread to dim rows
  int* cols = J.colind + *nnz;
  double* vals = J.val + *nnz;
  const int n = ContactRows(m, d, b1, b2, mc->pos, mc->frame, dim, cols, jac_.data(), nv);
  for (int r = 0; r < dim; r++) {
    J.rowadr[nrow + r] = *nnz + r * n;
    J.rownnz[nrow + r] = n;
    for (int k = 0; k < n; k++) {
      J.colind[*nnz + r * n + k] = cols[k];
      vals[r * n + k] = jac_[r * nv + k];
    }
  }
  *nnz += dim * n;
  c.tree[0] = c.tree[1] = -1;
  if (n > 0) {
    // trees of the two bodies (a row spans at most two trees)
    const int t0 = dof_tree_[cols[0]], t1 = dof_tree_[cols[n - 1]];
    c.tree[0] = t0;
    c.tree[1] = t1 != t0 ? t1 : -1;
  }

  // soft quantities, MuJoCo's elliptic convention: R0 from the impedance, R1 = R0/impratio,
  // R[j] mu[j]^2 = R1 mu[0]^2 for the remaining friction rows
  const double tran = m->body_invweight0[2 * b1] + m->body_invweight0[2 * b2];
  const double rot = m->body_invweight0[2 * b1 + 1] + m->body_invweight0[2 * b2 + 1];
  for (int r = 0; r < dim; r++) {
    const int row = nrow + r;
    p->kind[row] = r == 0 ? kRowContactNormal : kRowContactFriction;
    p->mj_type[row] = d->efc_type[i];
    p->mj_id[row] = id;
    p->pos[row] = r == 0 ? c.dist : 0;
    p->margin[row] = r == 0 ? c.margin : 0;
    p->floss[row] = 0;
    p->diag_approx[row] = r < 3 ? tran : rot;
    p->imp[row] = imp;
    p->KB[2 * row] = r == 0 ? K : 0;
    p->KB[2 * row + 1] = B;
  }
  ContactRegularizers(imp, p->diag_approx[nrow], m->opt.impratio, c.mu, dim, p->R + nrow);
  p->ncon++;
  p->nrow += dim;
}

int Extractor::Extract(const mjModel* m, const mjData* d, Problem* p) {
  // dynamics: M_eff folds in the joint damping that the integrator treats implicitly
  Dynamics(m, d, p);

  // rows in MuJoCo's order; contacts become frame rows (from their first efc row)
  int nnz = 0, dropped = 0;
  p->nrow = p->ncon = p->nl = 0;
  p->ne = d->ne;
  p->nf = d->nf;
  for (int i = 0; i < d->nefc; i++) {
    const int type = d->efc_type[i];
    const bool is_contact = type == mjCNSTR_CONTACT_FRICTIONLESS ||
                            type == mjCNSTR_CONTACT_PYRAMIDAL || type == mjCNSTR_CONTACT_ELLIPTIC;
    const mjContact* mc = is_contact ? d->contact + d->efc_id[i] : nullptr;
    if (mc && mc->efc_address != i) continue;
    const bool fits = is_contact
                          ? p->ncon < dims_.max_contacts && p->nrow + mc->dim <= dims_.max_rows &&
                                nnz + mc->dim * maxpair_ <= dims_.max_nnz
                          : p->nrow < dims_.max_rows;
    if (!fits) {
      dropped++;
    } else if (is_contact) {
      AddContact(m, d, mc, i, p, &nnz);
    } else {
      AddRow(m, d, i, p, &nnz);
    }
  }
  p->J.nrow = p->nrow;
  p->J.nnz = nnz;

  // velocities and reference accelerations of the frame rows
  p->J.Mul(d->qvel, p->vel);
  for (int c = 0; c < p->ncon; c++) {
    const Contact& con = p->con[c];
    for (int r = 0; r < con.dim; r++) {
      const int row = con.row + r;
      p->aref[row] = -p->KB[2 * row + 1] * p->vel[row] -
                     p->KB[2 * row] * p->imp[row] * (p->pos[row] - p->margin[row]);
    }
  }

  p->islands.Build(p->J, p->dof_tree);
  return dropped;
}

namespace {

// sign of the first nonzero of MuJoCo's efc_J row i (limits: +1 lower, -1 upper)
int EfcSign(const mjModel* m, const mjData* d, int i) {
  if (mj_isSparse(m)) {
    return d->efc_J_rownnz[i] > 0 && d->efc_J[d->efc_J_rowadr[i]] < 0 ? -1 : 1;
  }
  const mjtNum* row = d->efc_J + static_cast<size_t>(i) * m->nv;
  for (int k = 0; k < m->nv; k++) {
    if (row[k] != 0) return row[k] < 0 ? -1 : 1;
  }
  return 1;
}

}  // namespace

bool Extractor::Regap(const mjModel* m, const mjData* d, mjData* scratch, const Problem& p,
                      const double* v_next, double* pos_next, double* jac_next) {
  // q+ and MuJoCo's position stage up to the constraint rows
  mju_copy(scratch->qpos, d->qpos, m->nq);
  mju_copy(scratch->mocap_pos, d->mocap_pos, 3 * m->nmocap);
  mju_copy(scratch->mocap_quat, d->mocap_quat, 4 * m->nmocap);
  mj_integratePos(m, scratch->qpos, v_next, m->opt.timestep);
  mj_kinematics(m, scratch);
  mj_comPos(m, scratch);
  mj_tendon(m, scratch);
  mj_collision(m, scratch);
  mj_makeConstraint(m, scratch);
  if (scratch->ne != p.ne) return false;

  // MuJoCo's row b at our row i's columns (entries outside our pattern are dropped)
  const bool sparse = mj_isSparse(m);
  auto take_row = [&](int i, int b) {
    for (int k = 0; k < p.J.rownnz[i]; k++) {
      const int col = p.J.colind[p.J.rowadr[i] + k];
      double v = 0;
      if (sparse) {
        for (int e = 0; e < scratch->efc_J_rownnz[b]; e++) {
          const int adr = scratch->efc_J_rowadr[b] + e;
          if (scratch->efc_J_colind[adr] == col) v = scratch->efc_J[adr];
        }
      } else {
        v = scratch->efc_J[static_cast<size_t>(b) * m->nv + col];
      }
      jac_next[p.J.rowadr[i] + k] = v;
    }
  };

  // equality rows in order; friction loss has no position
  for (int k = 0; k < p.J.nnz; k++) jac_next[k] = p.J.val[k];
  for (int i = 0; i < p.nrow; i++) pos_next[i] = p.margin[i];
  for (int i = 0; i < p.ne; i++) {
    pos_next[i] = scratch->efc_pos[i];
    take_row(i, i);
  }

  // limits: both lists are in MuJoCo's order of (type, id); direction from the Jacobian's sign
  int a = 0;
  for (int i = p.ne + p.nf; i < p.ne + p.nf + p.nl; i++) {
    const int sign = p.J.rownnz[i] > 0 && p.J.val[p.J.rowadr[i]] < 0 ? -1 : 1;
    for (; a < scratch->nefc; a++) {
      const int t = scratch->efc_type[a];
      if (t != mjCNSTR_LIMIT_JOINT && t != mjCNSTR_LIMIT_TENDON) continue;
      if (t > p.mj_type[i] || (t == p.mj_type[i] && scratch->efc_id[a] >= p.mj_id[i])) break;
    }
    for (int b = a; b < scratch->nefc && scratch->efc_type[b] == p.mj_type[i] &&
                    scratch->efc_id[b] == p.mj_id[i];
         b++) {
      if (EfcSign(m, scratch, b) == sign) {
        pos_next[i] = scratch->efc_pos[b];
        take_row(i, b);
      }
    }
  }

  // contacts: the same geom pair; within a pair, new and old contacts are paired one to one by
  // the distance between the new point and the old point moved by its relative velocity
  for (int c0 = 0; c0 < p.ncon;) {
    const int g0 = p.con[c0].geom[0], g1 = p.con[c0].geom[1];
    int c1 = c0 + 1;
    while (c1 < p.ncon && p.con[c1].geom[0] == g0 && p.con[c1].geom[1] == g1) c1++;
    int k0 = 0;
    while (k0 < scratch->ncon && !(ContactGeom(scratch->contact + k0, 0) == g0 &&
                                   ContactGeom(scratch->contact + k0, 1) == g1)) {
      k0++;
    }
    int k1 = k0;
    while (k1 < scratch->ncon && ContactGeom(scratch->contact + k1, 0) == g0 &&
           ContactGeom(scratch->contact + k1, 1) == g1) {
      k1++;
    }
    const int nold = std::min(c1 - c0, kMaxPairContacts),
              nnew = std::min(k1 - k0, kMaxPairContacts);
    double pred[kMaxPairContacts][3];
    for (int a = 0; a < nold; a++) {
      // old point moved by h times its relative velocity (frame rows: J v)
      const Contact& con = p.con[c0 + a];
      for (int r = 0; r < 3; r++) pred[a][r] = con.pos[r];
      for (int r = 0; r < std::min(con.dim, 3); r++) {
        const double ur = p.J.Dot(con.row + r, v_next) * m->opt.timestep;
        for (int x = 0; x < 3; x++) pred[a][x] += ur * con.frame[3 * r + x];
      }
    }
    bool used_old[kMaxPairContacts] = {}, used_new[kMaxPairContacts] = {};
    for (int pairs = std::min(nold, nnew); pairs > 0; pairs--) {
      int ba = -1, bk = -1;
      double best = HUGE_VAL;
      for (int a = 0; a < nold; a++) {
        if (used_old[a]) continue;
        for (int k = 0; k < nnew; k++) {
          if (used_new[k]) continue;
          const mjtNum* q = scratch->contact[k0 + k].pos;
          double d2 = 0;
          for (int r = 0; r < 3; r++) d2 += (q[r] - pred[a][r]) * (q[r] - pred[a][r]);
          if (d2 < best) {
            best = d2;
            ba = a;
            bk = k;
          }
        }
      }
      used_old[ba] = used_new[bk] = true;
      const Contact& con = p.con[c0 + ba];
      const mjContact* match = scratch->contact + k0 + bk;
      pos_next[con.row] = match->dist;
      const int n = ContactRows(m, scratch, con.body[0], con.body[1], match->pos, match->frame, 1,
                                chain_cols_.data(), jac_.data(), m->nv);
      if (n == p.J.rownnz[con.row]) {
        for (int x = 0; x < n; x++) jac_next[p.J.rowadr[con.row] + x] = jac_[x];
      }
    }
    c0 = c1;
  }
  return true;
}

void Extractor::WriteBack(const mjModel* m, mjData* d, const Problem& p, const Solution& sol) {
  const int nv = m->nv;
  const bool pyramidal = m->opt.cone == mjCONE_PYRAMIDAL;
  const double* f = sol.force;

  // rows before the contacts map one to one
  const int nplain = p.ne + p.nf + p.nl;
  for (int i = 0; i < d->nefc; i++) {
    d->efc_force[i] = 0;
    d->efc_state[i] = mjCNSTRSTATE_SATISFIED;
  }
  for (int i = 0; i < nplain; i++) {
    d->efc_force[i] = f[i];
    int state = mjCNSTRSTATE_QUADRATIC;
    if (p.kind[i] == kRowFriction) {
      if (f[i] <= -p.floss[i]) state = mjCNSTRSTATE_LINEARPOS;
      if (f[i] >= p.floss[i]) state = mjCNSTRSTATE_LINEARNEG;
    } else if (p.kind[i] == kRowLimit && f[i] == 0) {
      state = mjCNSTRSTATE_SATISFIED;
    }
    d->efc_state[i] = state;
  }

  // contacts: frame forces, or pyramid edge forces (the solver's, else a split of the frame
  // force) that reproduce them exactly
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const double* fc = f + con.row;
    double* out = d->efc_force + con.efc_address;
    int* state = d->efc_state + con.efc_address;
    const int active = fc[0] > 0 ? mjCNSTRSTATE_QUADRATIC : mjCNSTRSTATE_SATISFIED;
    if (con.dim == 1 || !pyramidal) {
      for (int r = 0; r < con.dim; r++) {
        out[r] = fc[r];
        state[r] = active;
      }
    } else if (sol.edge_force) {
      // the solver's own edge forces
      const double* edge = sol.edge_force + 2 * con.row;
      for (int e = 0; e < 2 * (con.dim - 1); e++) {
        out[e] = edge[e];
        state[e] = edge[e] > 0 ? mjCNSTRSTATE_QUADRATIC : mjCNSTRSTATE_SATISFIED;
      }
    } else {
      FrameToPyramid(fc, con.mu, con.dim, out);
      for (int e = 0; e < 2 * (con.dim - 1); e++) state[e] = active;
    }
  }

  // generalized forces and acceleration consistent with v+
  p.J.MulT(f, d->qfrc_constraint);
  const double h = p.h;
  for (int i = 0; i < nv; i++) {
    d->qacc[i] = (sol.v_next[i] - d->qvel[i]) / h;
    if (kStageWritesWarmstart) d->qacc_warmstart[i] = d->qacc[i];
  }
}

}  // namespace contactkit
