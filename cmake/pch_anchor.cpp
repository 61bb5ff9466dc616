// The one source file of the precompiled-header targets (cmake/pch.cmake): CMake builds a target's precompiled
// header alongside its sources, and a library needs at least one.
