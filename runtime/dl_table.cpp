// Opening a library and looking up its symbols for the entry-point tables
// (see dl_table.h).
#include "runtime/dl_table.h"

#include <dlfcn.h>

namespace kiln::dl {

Library open(const std::string& name, const std::vector<std::string>& dirs, bool global) {
  const int flags = RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL);
  Library lib;
  lib.handle = ::dlopen(name.c_str(), flags);
  if (lib.handle) {
    lib.path = name;
    return lib;
  }
  const char* e = ::dlerror();
  std::string why = e ? e : "unknown error";
  if (name.find('/') == std::string::npos) {
    for (const std::string& dir : dirs) {
      if (dir.empty()) continue;
      const std::string path = dir + "/" + name;
      if ((lib.handle = ::dlopen(path.c_str(), flags))) {
        lib.path = path;
        return lib;
      }
    }
  }
  lib.error = name + " could not be loaded (dlopen: " + why + ")";
  return lib;
}

void* symbol(void* handle, const char* symbol) {
  return handle ? ::dlsym(handle, symbol) : nullptr;
}

std::string missing(const std::string& library, const char* key) {
  return library + " has no " + key + " (needed by Kiln)";
}

}  // namespace kiln::dl
