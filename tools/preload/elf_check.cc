// Copyright 2026 The contactkit developers.
#include "tools/preload/elf_check.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace contactkit::preload {
namespace {

// read n bytes at offset into out; false past the end of the file
bool ReadAt(std::ifstream& f, unsigned long offset, unsigned long n, void* out) {
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
  return static_cast<unsigned long>(f.gcount()) == n;
}

}  // namespace

int HasDynamicRelocation(const std::string& path, const char* symbol, std::string* error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *error = "cannot open " + path;
    return -1;
  }
  Elf64_Ehdr eh;
  if (!ReadAt(f, 0, sizeof(eh), &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr)) {
    *error = path + " is not a 64-bit ELF object";
    return -1;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (sh.empty() || !ReadAt(f, eh.e_shoff, sh.size() * sizeof(Elf64_Shdr), sh.data())) {
    *error = path + ": cannot read the section headers";
    return -1;
  }

  // the dynamic symbol table and its strings
  int dynsym = -1;
  for (size_t i = 0; i < sh.size(); i++) {
    if (sh[i].sh_type == SHT_DYNSYM) dynsym = static_cast<int>(i);
  }
  if (dynsym < 0 || sh[dynsym].sh_link >= sh.size()) {
    *error = path + " has no dynamic symbol table";
    return -1;
  }
  const Elf64_Shdr& strsec = sh[sh[dynsym].sh_link];
  std::vector<char> strtab(strsec.sh_size + 1, 0);
  std::vector<Elf64_Sym> syms(sh[dynsym].sh_size / sizeof(Elf64_Sym));
  if (!ReadAt(f, strsec.sh_offset, strsec.sh_size, strtab.data()) ||
      !ReadAt(f, sh[dynsym].sh_offset, syms.size() * sizeof(Elf64_Sym), syms.data())) {
    *error = path + ": cannot read the dynamic symbol table";
    return -1;
  }

  // relocation sections that refer to the dynamic symbol table
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_RELA || s.sh_link != static_cast<unsigned>(dynsym)) continue;
    std::vector<Elf64_Rela> rel(s.sh_size / sizeof(Elf64_Rela));
    if (!ReadAt(f, s.sh_offset, rel.size() * sizeof(Elf64_Rela), rel.data())) {
      *error = path + ": cannot read a relocation section";
      return -1;
    }
    for (const Elf64_Rela& r : rel) {
      const unsigned long isym = ELF64_R_SYM(r.r_info);
      const unsigned type = ELF64_R_TYPE(r.r_info);
      if (isym == 0 || isym >= syms.size()) continue;
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && type != R_AARCH64_JUMP_SLOT &&
          type != R_AARCH64_GLOB_DAT) {
        continue;
      }
      const unsigned long name = syms[isym].st_name;
      if (name < strsec.sh_size && std::strcmp(strtab.data() + name, symbol) == 0) return 1;
    }
  }
  return 0;
}

}  // namespace contactkit::preload
