# Installation: headers under include/kiln, libkiln, and a CMake package so
# outside projects can find_package(Kiln CONFIG) and link kiln::kiln.
