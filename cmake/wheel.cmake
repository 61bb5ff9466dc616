# The wheel (`pip install .`, `pip wheel .`; pyproject.toml's [tool.scikit-build] configures it, scikit-build-core
# sets SKBUILD). It holds the CLI and the Python files the CLI runs, in the `ckptcheck` package's data folder:
#   ckptcheck/data/bin/ckptcheck       the CLI; the console script `ckptcheck` (python/ckptcheck/_cli.py) runs it
#   ckptcheck/data/harness/adapters/   the built-in case adapters (*.py)
#   ckptcheck/data/harness/user_model/ the user-model drivers (*.py)
#   ckptcheck/data/reports/            the report generator (`ckptcheck report`)
#   ckptcheck/data/cases/catalog/      the catalogue (`ckptcheck verify`)
# The CLI finds them through $CKPT_SOURCE_DIR, which the console script sets to that folder (the same variable a
# source checkout uses); a CLI run directly from data/bin finds the folder above it, as a build tree's does.

# Rebuilds are incremental through scikit-build-core's persistent build-dir; ccache, when installed, also serves a
# fresh build-dir.
find_program(CKPT_CCACHE ccache)
if(CKPT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CKPT_CCACHE})
endif()

function(ckpt_wheel_install)
  # The RUNPATH keeps OpenBLAS's pthread build (cmake/gemm.cmake links it by full path) in the installed binary.
  set_target_properties(ckptcheck PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS ckptcheck RUNTIME DESTINATION ckptcheck/data/bin)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/adapters/ DESTINATION ckptcheck/data/harness/adapters
          FILES_MATCHING PATTERN "*.py" PATTERN "test_*.py" EXCLUDE PATTERN "__pycache__" EXCLUDE)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/user_model/ DESTINATION ckptcheck/data/harness/user_model
          FILES_MATCHING PATTERN "*.py" PATTERN "test_*.py" EXCLUDE PATTERN "__pycache__" EXCLUDE)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/reports/ DESTINATION ckptcheck/data/reports
          FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE PATTERN "out" EXCLUDE)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/cases/catalog DESTINATION ckptcheck/data/cases)
endfunction()
# After every target exists (the CLI is made in harness/).
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL ckpt_wheel_install)
