# The layering rules of ARCHITECTURE.md, as include arrows that must not exist: the CPU reference depends on
# neither the harness nor the device backend, and the device backend not on the harness (it depends on the
# reference and cases/ only). Run as `cmake -DSOURCE_DIR=... -P include_layering_check.cmake`; fails naming every
# file that includes a header across a forbidden arrow. A new rule is a line in `rules`: FOLDER|PREFIX.
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "include_layering_check: pass -DSOURCE_DIR=<source tree>")
endif()
set(rules
    "reference|harness/"
    "reference|device/"
    "device|harness/")
set(bad "")
set(total 0)
foreach(rule IN LISTS rules)
  string(REPLACE "|" ";" parts "${rule}")
  list(GET parts 0 folder)
  list(GET parts 1 prefix)
  file(GLOB_RECURSE files "${SOURCE_DIR}/${folder}/*.h" "${SOURCE_DIR}/${folder}/*.cuh" "${SOURCE_DIR}/${folder}/*.cpp"
       "${SOURCE_DIR}/${folder}/*.cu")
  list(LENGTH files count)
  if(count EQUAL 0)
    message(FATAL_ERROR "include_layering_check: no sources under ${SOURCE_DIR}/${folder}")
  endif()
  math(EXPR total "${total} + ${count}")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" hits REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]${prefix}")
    if(hits)
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
      string(APPEND bad "\n  ${folder}/ must not include ${prefix}: ${rel}: ${hits}")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "include layering broken:${bad}")
endif()
list(LENGTH rules nrules)
message(STATUS "include_layering_check: ${nrules} rules over ${total} files, none broken")
