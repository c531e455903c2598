// Copyright 2026 The contactkit developers.
//
// Whether a shared library reaches one of its own exported functions through the dynamic linker
// (a PLT or GOT relocation naming the symbol), so that an LD_PRELOAD'ed definition interposes. A
// library built with -Bsymbolic(-functions), with hidden aliases or with LTO that inlined the call
// binds it internally: it has no such relocation and an interposed definition is never called.
#ifndef CONTACTKIT_TOOLS_PRELOAD_ELF_CHECK_H_
#define CONTACTKIT_TOOLS_PRELOAD_ELF_CHECK_H_

#include <string>

namespace contactkit::preload {

// 1 if the ELF shared object at path has a dynamic relocation (R_*_JUMP_SLOT or R_*_GLOB_DAT)
// against symbol, 0 if it has none, -1 if the file cannot be read as a 64-bit ELF object (message
// in error). Reads the file; does not load it.
int HasDynamicRelocation(const std::string& path, const char* symbol, std::string* error);

}  // namespace contactkit::preload

#endif  // CONTACTKIT_TOOLS_PRELOAD_ELF_CHECK_H_
