# The system libraries the build needs, each found by CMake's own package search; a missing one stops the configure
# with one line naming the Debian package that provides it (ci/setup installs them all). `pip install .` needs
# them too: none of them has a PyPI package that CMake's find_package would find (docs/python.md).
#   ckpt_require(PACKAGE DEBIAN_PACKAGE [find_package arguments...])
macro(ckpt_require package debian)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "ckptcheck needs ${package}: install the Debian package ${debian} (apt-get install ${debian})")
  endif()
endmacro()
