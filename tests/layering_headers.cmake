# LLVM and CUDA headers stay inside the .cpp files of codegen/ and runtime/
# that need them (DESIGN.md): no header of Kiln's own includes one. Run as
# `cmake -DROOT=<source dir> -P layering_headers.cmake`; fails naming each
# header and the line that includes a vendor header.
file(GLOB_RECURSE headers RELATIVE ${ROOT}
     ${ROOT}/ir/*.h ${ROOT}/runtime/*.h ${ROOT}/passes/*.h ${ROOT}/codegen/*.h
     ${ROOT}/frontend/*.h ${ROOT}/tools/*.h)
set(found "")
foreach(h IN LISTS headers)
  file(STRINGS ${ROOT}/${h} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](llvm|llvm-c|clang|cuda|cuda_runtime|nvrtc|cublas|cublasLt|nccl)[/._]")
  foreach(line IN LISTS lines)
    string(STRIP "${line}" line)
    list(APPEND found "${h}: ${line}")
  endforeach()
endforeach()
list(LENGTH headers count)
if(count LESS 50)
  message(FATAL_ERROR "layering_headers: found only ${count} headers under ${ROOT}; is ROOT the source dir?")
endif()
if(found)
  string(REPLACE ";" "\n  " found "${found}")
  message(FATAL_ERROR "headers that include LLVM or CUDA headers (keep those in .cpp files):\n  ${found}")
endif()
message(STATUS "layering_headers: ${count} headers, none includes LLVM or CUDA")
