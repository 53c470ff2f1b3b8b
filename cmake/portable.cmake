# GPUORCH_PORTABLE: the node-side `gpuorch` for GPU hosts that have a driver and nothing else.
# GPU libraries are always loaded at run time (dlopen), so nothing NVIDIA or AMD ships is linked.
# Here the third-party libraries become static where Debian 12 ships an archive (hwloc, yaml-cpp)
# or can be used header-only (fmt); the rest has no archive in Debian (cpp-httplib and what it
# needs, libudev) and is bundled next to the binary by scripts/build-portable, found through
# RPATH $ORIGIN/../lib. glibc is the host's (the host's NCCL needs it). libstdc++ stays shared:
# cpp-httplib's .so needs it anyway, one copy in the process is safer than a static one plus a
# shared one, and the host's NCCL needs the host's when that is newer; Debian's travels as a
# fallback for hosts with an older one. docs/topology.md, "Portable build", has more.
if(GPUORCH_PORTABLE)
  find_library(GPUORCH_HWLOC_ARCHIVE libhwloc.a REQUIRED)
  find_library(GPUORCH_YAML_ARCHIVE libyaml-cpp.a REQUIRED)
  # libudev.so.1 only: Debian ships no archive (and the .so link only with libudev-dev).
  find_library(GPUORCH_UDEV NAMES udev libudev.so.1 REQUIRED)
  set(GPUORCH_HWLOC ${GPUORCH_HWLOC_ARCHIVE} ${GPUORCH_UDEV} m)
  set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION_NONE ${GPUORCH_YAML_ARCHIVE}
                                            IMPORTED_LOCATION ${GPUORCH_YAML_ARCHIVE})
  # fmt compiled into every user; --as-needed then drops libfmt.so, which nothing references.
  add_compile_definitions(FMT_HEADER_ONLY=1)
  # RPATH (not RUNPATH, hence --disable-new-dtags) also serves the bundled libraries' own needs.
  set(CMAKE_BUILD_RPATH "\$ORIGIN/../lib")
  add_link_options(-Wl,--as-needed -Wl,--disable-new-dtags)
else()
  set(GPUORCH_HWLOC PkgConfig::HWLOC)
endif()
