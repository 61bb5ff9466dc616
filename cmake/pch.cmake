# Precompiled headers. Every C++ file of ours parses the same heavy third-party headers (Eigen, nlohmann_json,
# RapidCheck through ckpt_cases, and in the tests GoogleTest), and for most files that parsing is half their
# compile time (measured with g++ -O3, user time: harness/policies/uniform.cpp 7.3 s without, 3.2 s with;
# tests/executor_test.cpp 11.9 s / 6.7 s). So they are compiled once, into two headers that every target reuses
# (REUSE_FROM): ckpt_pch for the libraries, the CLI and the benchmarks, ckpt_test_pch for tests/. A precompiled
# header only replaces parsing: the compiler checks that it was built with the same options, and our targets' own
# -D and warning flags do not appear in these headers. -DCKPT_PCH=OFF builds without them.
# Off by default under GCC 12: libstdc++ silences its own -O3 false positives (-Wstringop-overflow, -Warray-bounds
# in std::string) with #pragma GCC diagnostic, which GCC 12 does not keep in a precompiled header, and our -Werror
# would then fail the build. So here only the clang sanitizer build uses them.
set(CKPT_PCH_DEFAULT ON)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  set(CKPT_PCH_DEFAULT OFF)
endif()
option(CKPT_PCH "Precompile the heavy third-party headers once and reuse them in every C++ target" ${CKPT_PCH_DEFAULT})

set(CKPT_PCH_STD_HEADERS <algorithm> <array> <cmath> <cstdint> <cstdio> <cstring> <functional> <map> <memory>
    <optional> <set> <sstream> <stdexcept> <string> <unordered_map> <utility> <vector>)

if(CKPT_PCH)
  add_library(ckpt_pch STATIC ${CMAKE_CURRENT_LIST_DIR}/pch_anchor.cpp)
  target_link_libraries(ckpt_pch PRIVATE ckpt_eigen nlohmann_json::nlohmann_json rapidcheck)
  target_precompile_headers(ckpt_pch PRIVATE ${CKPT_PCH_STD_HEADERS} <Eigen/Dense> <nlohmann/json.hpp> <rapidcheck.h>)
endif()

# The tests' header: GoogleTest added. Called from tests/CMakeLists.txt, where GTest's imported targets live.
function(ckpt_add_test_pch)
  if(CKPT_PCH)
    add_library(ckpt_test_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
    target_link_libraries(ckpt_test_pch PRIVATE ckpt_eigen nlohmann_json::nlohmann_json rapidcheck GTest::gtest)
    target_precompile_headers(ckpt_test_pch PRIVATE ${CKPT_PCH_STD_HEADERS} <Eigen/Dense> <nlohmann/json.hpp>
                              <rapidcheck.h> <gtest/gtest.h>)
  endif()
endfunction()

# After every target exists (the end of the top-level CMakeLists.txt): the targets of tests/ reuse ckpt_test_pch,
# every other C++ executable or library ckpt_pch. Targets with CUDA sources keep nvcc's own handling, the
# libFuzzer targets (tests/fuzz/) are compiled with -fsanitize=fuzzer, which a shared header was not, and a target
# with the property CKPT_NO_PCH (one built for another instruction set) has options of its own too.
function(ckpt_apply_pch dir)
  if(NOT CKPT_PCH)
    return()
  endif()
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    get_target_property(sources ${t} SOURCES)
    get_target_property(noPch ${t} CKPT_NO_PCH)
    if(t MATCHES "^ckpt(_test)?_pch$" OR NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY)$"
       OR "${sources}" MATCHES "\\.cu(;|$)" OR noPch)
      continue()
    endif()
    if(dir MATCHES "/tests$")
      target_precompile_headers(${t} REUSE_FROM ckpt_test_pch)
    else()
      target_precompile_headers(${t} REUSE_FROM ckpt_pch)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(d ${subdirs})
    if(NOT d MATCHES "/tests/fuzz$")
      ckpt_apply_pch(${d})
    endif()
  endforeach()
endfunction()
