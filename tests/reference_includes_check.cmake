# The layering rule of ARCHITECTURE.md: reference/ (the CPU reference and the device backend under
# reference/cuda/) depends on nothing in harness/. Run as `cmake -DSOURCE_DIR=... -P reference_includes_check.cmake`;
# fails naming every file under reference/ that includes a harness/ header.
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "reference_includes_check: pass -DSOURCE_DIR=<source tree>")
endif()
file(GLOB_RECURSE files "${SOURCE_DIR}/reference/*.h" "${SOURCE_DIR}/reference/*.cuh" "${SOURCE_DIR}/reference/*.cpp"
     "${SOURCE_DIR}/reference/*.cu")
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "reference_includes_check: no sources under ${SOURCE_DIR}/reference")
endif()
set(bad "")
foreach(f IN LISTS files)
  file(STRINGS "${f}" hits REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]harness/")
  if(hits)
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
    string(APPEND bad "\n  ${rel}: ${hits}")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "reference/ must not include harness/ headers:${bad}")
endif()
message(STATUS "reference_includes_check: ${count} files under reference/, none includes harness/")
