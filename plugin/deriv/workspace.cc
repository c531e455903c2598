// Copyright 2026 The contactkit developers.
#include "plugin/deriv/workspace.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "solvers/mujoco/soft_tangent.h"

namespace contactkit {

// (32, then 8 entries at a time from each end, their bits or-ed without branches)
void NonzeroSpan(const double* const* x, int nx, int n, int* lo, int* hi) {
  constexpr int kWide = 32, kChunk = 8;
  auto any = [&](int i0, int i1) {
    uint64_t b = 0;
    for (int a = 0; a < nx; a++) {
      for (int i = i0; i < i1; i++) {
        uint64_t u;
        std::memcpy(&u, x[a] + i, sizeof u);
        b |= u;
      }
    }
    return (b << 1) != 0;  // (the sign bit left out)
  };
  int l = 0;
  while (l + kWide <= n && !any(l, l + kWide)) l += kWide;
  while (l + kChunk <= n && !any(l, l + kChunk)) l += kChunk;
  while (l < n && !any(l, l + 1)) l++;
  if (l >= n) {
    *lo = *hi = 0;
    return;
  }
  int h = n;
  while (h - kWide > l && !any(h - kWide, h)) h -= kWide;
  while (h - kChunk > l && !any(h - kChunk, h)) h -= kChunk;
  while (!any(h - 1, h)) h--;
  *lo = l;
  *hi = h;
}

void NominalStage::Carve(ArenaCarver& c, const DerivSizes& n) {
  qpos = c.Take<double>(n.nq);
  qvel = c.Take<double>(n.nv);
  act = c.Take<double>(n.na);
  ctrl = c.Take<double>(n.nu);
  mass = c.Take<double>(n.nM);
  qfrc_smooth = c.Take<double>(n.nv);
  act_dot = c.Take<double>(n.na);
  qfrc_constraint = c.Take<double>(n.nv);
  actuator_force = c.Take<double>(n.nu);
  qfrc_actuator = c.Take<double>(n.nv);
  contact_mu = c.Take<double>(n.ncon);
  efc_jar = c.Take<double>(n.nefc);
  efc_state = c.Take<int>(n.nefc);
  row_group = c.Take<int>(n.rows);
}

void DirectionTangent::Carve(ArenaCarver& c, const DerivSizes& n) {
  dq = c.Take<double>(n.nv);
  dv = c.Take<double>(n.nv);
  dact = c.Take<double>(n.na);
  du = c.Take<double>(n.nu);
  dM = c.Take<double>(n.nM);
  dqfrc_smooth = c.Take<double>(n.nv);
  dact_dot = c.Take<double>(n.na);
  dJ = c.Take<double>(n.nnz);
  dJ_qvel_next = c.Take<double>(n.rows);
  dJ_force = c.Take<double>(n.nv);
  dJ_vfree = c.Take<double>(n.rows);
  dJ_w = c.Take<double>(n.rows);
  dJ_x = c.Take<double>(n.rows);
  dJ_y = c.Take<double>(n.nv);
  dpos = c.Take<double>(n.rows);
  dvel = c.Take<double>(n.rows);
  dimp = c.Take<double>(n.rows);
  dR = c.Take<double>(n.rows);
  ddiag = c.Take<double>(n.rows);
  daref = c.Take<double>(n.rows);
  dforce = c.Take<double>(n.rows);
  ddisp = c.Take<double>(n.rows);
  dframe = c.Take<double>(6 * n.ncon);
  anchor_cross = c.Take<double>(12 * n.ncon);
  dv_free = c.Take<double>(n.nv);
  dqfrc_constraint = c.Take<double>(n.nv);
  dqacc_int = c.Take<double>(n.nv);
  dqderiv_qacc = c.Take<double>(n.nv);
  dposition_correction = c.Take<double>(n.nv);
  dM_problem = c.Take<double>(n.nM);
  dM_rows = c.Take<int>(n.nv);
  touched = c.Take<uint8_t>(std::max(n.ntree, 1));
}

void RowWork::Carve(ArenaCarver& c, const DerivSizes& n) {
  imp_slope = c.Take<double>(n.ncon);
  position = c.Take<double>(n.ncon);
  position_slope = c.Take<double>(n.ncon);
  dR_dimp = c.Take<double>(n.rows);
  col_adr = c.Take<int>(n.nv + 1);
  col_row = c.Take<int>(n.nnz);
  col_val = c.Take<double>(n.nnz);
  cfd_distance = c.Take<double>(n.ncon);
  contact_cols = c.Take<int>(n.nv);
  contact_rows = c.Take<double>(6 * static_cast<size_t>(n.nv));
  nonzero_side = c.Take<signed char>(n.nnz);
  contact_dJ_written = c.Take<char>(n.ncon);
  row_contact = c.Take<int>(n.rows);
  dof_marked = c.Take<char>(n.nv);
  moment = c.Take<double>(n.nv);
  weight_rows =
      static_cast<int>(std::min(n.rows, kWeightPool / static_cast<size_t>(std::max(n.nv, 1))));
  weighted = c.Take<char>(n.rows);
  weight_adr = c.Take<int>(n.rows);
  weight_before = c.Take<double>(6 * static_cast<size_t>(n.nv) * weight_rows);
  weight_body = c.Take<double>(12 * n.rows);
  weight_cvel = c.Take<double>(6 * static_cast<size_t>(n.nbody));
  product_before = c.Take<double>(6 * static_cast<size_t>(n.nv));
  product_cvel = c.Take<double>(6 * static_cast<size_t>(n.nbody));
}

void TreeBlocks::Carve(ArenaCarver& c, const DerivSizes& n) {
  dofadr = c.Take<int>(n.ntree);
  dofnum = c.Take<int>(n.ntree);
  blockadr = c.Take<int>(std::max(n.ntree, 1) + 1);
  mass = c.Take<double>(n.ntreeblock);
  qderiv = c.Take<double>(n.ntreeblock);
  qderiv_rne = c.Take<double>(n.ntreeblock);
  qderiv_qacc_poly = c.Take<double>(n.nv);
}

void PairWork::Carve(ArenaCarver& c, const DerivSizes& n) {
  pair = c.Take<ContactPair>(n.ncon);
  contact_pair = c.Take<int>(n.ncon);
  nominal = c.Take<mjContact>(n.ncon);
  forward = c.Take<mjContact>(n.ncon);
  backward = c.Take<mjContact>(n.ncon);
  found = c.Take<char>(n.ncon);
  body_moved = c.Take<char>(n.nbody);
  body_pairadr = c.Take<int>(n.nbody + 1);
  body_pair = c.Take<int>(2 * n.ncon);
  moved_first = moved_last = -1;
  eq_type = c.Take<int>(n.neq);
  eq_torquescale = c.Take<double>(n.neq);
  collide_out = c.Take<mjContact>(mjMAXCONPAIR);
  owner_tan = c.Take<double>(42 * n.ncon);
  relative_tan = c.Take<double>(13 * n.ncon);
}

void RneWork::Carve(ArenaCarver& c, const DerivSizes& n) {
  const size_t nv = n.nv, nbody = n.nbody;
  subtree_last = c.Take<int>(nbody);
  subtree_dof_end = c.Take<int>(nbody);
  dof_actuator_num = c.Take<int>(nv);
  dof_actuator_adr = c.Take<int>(nv);
  dof_actuators = c.Take<int>(n.nu);
  dof_actuator_length = c.Take<char>(nv);
  dof_actuator_velocity = c.Take<char>(nv);
  dof_carry_start = c.Take<int>(nv);
  dof_cdot_start = c.Take<int>(nv);
  cacc = c.Take<double>(12 * nbody);
  cfrc = c.Take<double>(12 * nbody);
  icvel = c.Take<double>(6 * nbody);
  cvel_before_dof = c.Take<double>(6 * nv);
  cvel_next = c.Take<double>(6 * nbody);
  cvel_next_before_dof = c.Take<double>(6 * nv);
  cvel_free = c.Take<double>(6 * nbody);
  cvel_free_before_dof = c.Take<double>(6 * nv);
  cacc_before_dof = c.Take<double>(12 * nv);
  chain_motion = c.Take<double>(6 * nv);
  crb_cdof = c.Take<double>(6 * nv);
  bsub_cdof = c.Take<double>(6 * nv);
  crb_cdof_rows = c.Take<double>(6 * nv);
  bsub_cdof_rows = c.Take<double>(6 * nv);
  subtree_bsub = c.Take<double>(36 * nbody);
  form_body = c.Take<double>(6 * nbody);
  form_before = c.Take<double>(6 * nv);
  form_sub = c.Take<double>(6 * nbody);
  form_carried = c.Take<double>(6 * nv);
  form_lanes = c.Take<double>(4 * (12 * nbody + 13 * nv));
  mass_before = c.Take<double>(6 * kMassVectors * nv);
  mass_carried = c.Take<double>(6 * kMassVectors * nv);
  mass_x = c.Take<double>(nv);
  mass_terms = c.Take<double>(4 * nv);
  mass_lanes = c.Take<double>(48 * nv);
  mass_terms_dof = -1;
  mass_chain = c.Take<int>(nv);
  mass_nchain = 0;
}

void BlockWork::Carve(ArenaCarver& c, const DerivSizes& n) {
  const size_t nb = SoftTangent::kBlock;
  rhs = c.Take<double>(n.nv * nb);
  mass_term = c.Take<double>(n.nv * nb);
  damped = c.Take<double>(n.nv * nb);
  act_dot = c.Take<double>(n.na * nb);
  dforce = c.Take<double>(n.rows * nb);
  kind = c.Take<int>(nb);
  index = c.Take<int>(nb);
  col = c.Take<int>(nb);
}

void OutputWork::Carve(ArenaCarver& c, const DerivSizes& n) {
  state_col = c.Take<double>(n.ndx());
  sensor_col = c.Take<double>(n.ns);
  first_gradient = c.Take<double>(n.ndx() + n.nu);
  contact_modes = c.Take<signed char>(n.ncon);
  fd_col = c.Take<unsigned char>(n.ndx() + n.nu);
}

void Scratch::Carve(ArenaCarver& c, const DerivSizes& n) {
  a = c.Take<double>(n.nv + n.na);
  b = c.Take<double>(n.nv + n.na);
}

size_t TreeBlocks::Size(const int* dof_tree, int nv, int ntree) {
  std::vector<size_t> num(std::max(ntree, 1), 0);
  for (int j = 0; j < nv; j++) num[dof_tree[j]]++;
  size_t size = 0;
  for (int t = 0; t < ntree; t++) size += num[t] * num[t];
  return size;
}

void TreeBlocks::Fill(const int* dof_tree, int nv, int ntree) {
  for (int j = nv - 1; j >= 0; j--) {
    dofadr[dof_tree[j]] = j;
    dofnum[dof_tree[j]]++;
  }
  size_t adr = 0;
  for (int t = 0; t < ntree; t++) {
    blockadr[t] = static_cast<int>(adr);
    adr += static_cast<size_t>(dofnum[t]) * dofnum[t];
  }
  blockadr[ntree] = static_cast<int>(adr);
}

void PairWork::Fill(const mjModel* m, const DerivSizes& n) {
  for (size_t c = 0; c < n.ncon; c++) contact_pair[c] = -1;
  eq_torquescale[0] = 1;
  for (int i = 0; i < m->neq; i++) {
    eq_type[i] = m->eq_type[i];
    eq_torquescale[i] = m->eq_data[mjNEQDATA * i + 10];
  }
}

void RneWork::Fill(const mjModel* m) {
  const int nv = m->nv;

  // subtrees (MuJoCo orders bodies depth first, so a subtree is a range) and the
  // joint-transmission actuators of each dof
  for (int b = m->nbody - 1; b >= 0; b--) {
    subtree_last[b] = std::max(subtree_last[b], b);
    if (b > 0) {
      const int parent = m->body_parentid[b];
      subtree_last[parent] = std::max(subtree_last[parent], subtree_last[b]);
    }
  }
  subtree_contiguous = true;
  for (int b = 1; b < m->nbody; b++) {
    const int parent = m->body_parentid[b];
    subtree_contiguous &= parent < b && b <= subtree_last[parent];
  }
  for (int i = 0; i < m->nu; i++) {
    if (m->actuator_trntype[i] == mjTRN_JOINT) {
      dof_actuator_num[m->jnt_dofadr[m->actuator_trnid[2 * i]]]++;
    }
  }
  for (int j = 0, adr = 0; j < nv; j++) {
    dof_actuator_adr[j] = adr;
    adr += dof_actuator_num[j];
    dof_actuator_num[j] = 0;
  }
  for (int i = 0; i < m->nu; i++) {
    if (m->actuator_trntype[i] != mjTRN_JOINT) continue;
    const int j = m->jnt_dofadr[m->actuator_trnid[2 * i]];
    dof_actuators[dof_actuator_adr[j] + dof_actuator_num[j]++] = i;

    // does the force (or activation rate) depend on the actuator's length / velocity?
    const int gain = m->actuator_gaintype[i], bias = m->actuator_biastype[i];
    const double* gp = m->actuator_gainprm + mjNGAIN * i;
    const double* bp = m->actuator_biasprm + mjNBIAS * i;
    const bool other = gain == mjGAIN_MUSCLE || gain == mjGAIN_USER || bias == mjBIAS_USER ||
                       m->actuator_dyntype[i] == mjDYN_USER;
    dof_actuator_length[j] |= other || bias == mjBIAS_MUSCLE ||
                              (gain == mjGAIN_AFFINE && gp[1] != 0) ||
                              (bias == mjBIAS_AFFINE && bp[1] != 0);
    dof_actuator_velocity[j] |=
        other || (gain == mjGAIN_AFFINE && gp[2] != 0) || (bias == mjBIAS_AFFINE && bp[2] != 0);
  }

  // per dof: where the suffix of its body's dofs starts that a perturbation of its position
  // carries (a free joint's rotations, else its own joint onward), and that sees its velocity in
  // cdof_dot (the joints after it; a free joint's translations: its rotations onward)
  for (int k = 0; k < nv; k++) {
    const int jnt = m->dof_jntid[k], adr = m->jnt_dofadr[jnt], type = m->jnt_type[jnt];
    dof_carry_start[k] = type == mjJNT_FREE ? adr + 3 : adr;
    dof_cdot_start[k] = type == mjJNT_FREE   ? (k < adr + 3 ? adr + 3 : adr + 6)
                        : type == mjJNT_BALL ? adr + 3
                                             : k + 1;
  }
  for (int b = 0; b < m->nbody; b++) {
    subtree_dof_end[b] = m->body_dofnum[b] ? m->body_dofadr[b] + m->body_dofnum[b] : 0;
  }
  for (int b = m->nbody - 1; b > 0; b--) {
    int& end = subtree_dof_end[m->body_parentid[b]];
    end = std::max(end, subtree_dof_end[b]);
  }
}

}  // namespace contactkit
