// Copyright 2026 The contactkit developers.
//
// The "stacked primitives" scene for step time against contact count: nx x ny columns of nlayers
// free bodies of five primitive types, jittered and tilted so the columns topple into each other,
// falling onto a box ground fenced by four walls (names in the generated file's header comment).
// mjcf_models/stacked_primitives.xml is StackedPrimitivesXML(5, 4, 3, 0.002, {600, 2400, 4000000}).
// MuJoCo 2.2.2 loads MJCF from files only: write the string to a file and mj_loadXML it.
#ifndef CONTACTKIT_TOOLS_COMMON_GEN_STACK_H_
#define CONTACTKIT_TOOLS_COMMON_GEN_STACK_H_

#include <string>

namespace contactkit::tools {

// preallocation sizes written into <size> of the generated scene
struct StackSizing {
  int nconmax;  // contacts
  int njmax;    // constraint rows
  int nstack;   // mjtNums in mjData's stack
};

// Approximate size in bytes of MuJoCo 2.2.2's mjData main buffer (an int: must stay below 2^31),
// dominated by efc_J/efc_JT (njmax x nv) and efc_AR (njmax x njmax), doubles plus int indices.
double StackedPrimitivesDataBytes(long nv, long njmax);

// Sizes for an nx x ny x nlayers scene, calibrated on MuJoCo 2.2.2:
//  - contacts: 2.6 + 0.1 * nlayers per body (at most 4.5), plus 64;
//  - rows: rows_per_contact per contact (4: condim 3 with the pyramidal cone; 3: elliptic),
//    clamped so that the mjData buffer stays below 2.0e9 bytes;
//  - stack: max(5.5 nv^2, 4.5 nv njmax) + 1e5 mjtNums (Newton ~5 nv^2, PGS ~4 nv nefc), capped
//    at 2^28; untouched stack pages cost address space, not memory.
StackSizing StackedPrimitivesSizing(int nx, int ny, int nlayers, int rows_per_contact = 4);

// MJCF text of the scene: nx x ny columns of nlayers free bodies each, with the given <size>;
// elliptic_cone selects cone="elliptic". Non-positive counts are treated as 1, a non-positive
// timestep as 0.002.
std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep,
                                 const StackSizing& size, bool elliptic_cone = false);

// Same, sized by StackedPrimitivesSizing (4 rows per contact, or 3 with the elliptic cone).
std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep, bool elliptic_cone);

// The benchmark scene: pyramidal cone (MuJoCo's default), sized by StackedPrimitivesSizing.
std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep);

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_GEN_STACK_H_
