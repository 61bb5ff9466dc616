# The layering rule of ARCHITECTURE.md: every arrow (an #include of a project header) runs down. Each folder of
# C++ sources is on a layer below; a file may include its own folder's headers and those of a lower layer, never
# a higher one nor another folder of its own layer (policies and mutants, verify and validate know nothing of each
# other). Run as `cmake -DSOURCE_DIR=... -P layers_check.cmake`; fails naming every include that breaks the rule,
# and every folder of sources that is on no layer (a new folder takes a line here).
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "layers_check: pass -DSOURCE_DIR=<source tree>")
endif()

# "LAYER FOLDER", lowest first. A folder holds its subfolders unless a longer entry names them; "harness/*" is the
# files directly in harness/ (compare, diagnose, text_format, ...), below everything in harness's subfolders.
set(layers
    "1 common"
    "2 cases"
    "3 reference"
    "4 device"
    "5 harness/*"
    "6 harness/engine"
    "7 harness/policies"
    "7 harness/mutants"
    "8 harness/verify"
    "8 harness/validate"
    "8 bench"
    "9 harness/user_model"
    "10 harness/cli")
# Top-level folders that are no layer: tests include everything; cmake/ holds an empty anchor file.
set(unlayered tests cmake)

# The entry whose folder holds `path` (relative, a file or an include): sets <out>_folder and <out>_layer, both
# empty when none does.
function(layer_of path out)
  get_filename_component(dir "${path}" DIRECTORY)
  set(best_folder "")
  set(best_layer "")
  set(best_len -1)
  foreach(entry IN LISTS layers)
    string(REPLACE " " ";" parts "${entry}")
    list(GET parts 0 layer)
    list(GET parts 1 folder)
    if(folder MATCHES "^(.*)/\\*$")
      set(holds FALSE)
      if(dir STREQUAL CMAKE_MATCH_1)
        set(holds TRUE)
      endif()
    else()
      set(holds FALSE)
      if(dir STREQUAL folder OR dir MATCHES "^${folder}/")
        set(holds TRUE)
      endif()
    endif()
    string(LENGTH "${folder}" len)
    if(holds AND len GREATER best_len)
      set(best_folder "${folder}")
      set(best_layer "${layer}")
      set(best_len ${len})
    endif()
  endforeach()
  set(${out}_folder "${best_folder}" PARENT_SCOPE)
  set(${out}_layer "${best_layer}" PARENT_SCOPE)
endfunction()

# Every C++ source under the top-level folders, build trees (a CMakeCache.txt) and hidden folders left out.
file(GLOB tops RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/*")
set(files "")
foreach(top IN LISTS tops)
  if(NOT IS_DIRECTORY "${SOURCE_DIR}/${top}" OR top MATCHES "^\\." OR EXISTS "${SOURCE_DIR}/${top}/CMakeCache.txt")
    continue()
  endif()
  list(FIND unlayered "${top}" skip)
  if(NOT skip EQUAL -1)
    continue()
  endif()
  file(GLOB_RECURSE found RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/${top}/*.h" "${SOURCE_DIR}/${top}/*.hpp"
       "${SOURCE_DIR}/${top}/*.cpp" "${SOURCE_DIR}/${top}/*.cuh" "${SOURCE_DIR}/${top}/*.cu")
  list(APPEND files ${found})
endforeach()
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "layers_check: no sources under ${SOURCE_DIR}")
endif()

set(bad "")
set(arrows 0)
foreach(f IN LISTS files)
  layer_of("${f}" from)
  if(from_folder STREQUAL "")
    get_filename_component(dir "${f}" DIRECTORY)
    string(APPEND bad "\n  ${f}: its folder ${dir}/ is on no layer (add it to tests/layers_check.cmake)")
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][^\">]+/[^\">]+[\">]")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">].*$" "\\1" target "${line}")
    layer_of("${target}" to)
    if(to_folder STREQUAL "" OR to_folder STREQUAL from_folder)
      continue()  # a library's header (Eigen/Dense, nlohmann/json.hpp), or the file's own folder
    endif()
    math(EXPR arrows "${arrows} + 1")
    if(NOT to_layer LESS from_layer)
      string(APPEND bad "\n  ${f} (layer ${from_layer}, ${from_folder}) includes ${target} (layer ${to_layer}, ${to_folder})")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "an include runs up or sideways (ARCHITECTURE.md, the layering rule):${bad}")
endif()
message(STATUS "layers_check: ${count} files, ${arrows} includes between folders, every one down a layer")
