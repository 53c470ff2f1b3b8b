# GPUORCH_PORTABLE: the node-side `gpuorch` for GPU hosts that have a driver and nothing else.
# GPU libraries are always loaded at run time (dlopen), so nothing NVIDIA or AMD ships is linked.
# Here the third-party libraries become static where Debian 12 ships an archive (hwloc, yaml-cpp,
# libstdc++, libgcc) or can be used header-only (fmt); the rest (cpp-httplib and what it needs,
# libudev) has no archive in Debian and is bundled next to the binary by scripts/build-portable,
# found through RPATH $ORIGIN/../lib. docs/topology.md has the details.
if(GPUORCH_PORTABLE)
  find_library(GPUORCH_HWLOC_ARCHIVE libhwloc.a REQUIRED)
  find_library(GPUORCH_YAML_ARCHIVE libyaml-cpp.a REQUIRED)
  find_library(GPUORCH_UDEV udev REQUIRED)
  set(GPUORCH_HWLOC ${GPUORCH_HWLOC_ARCHIVE} ${GPUORCH_UDEV} m)
  set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION_NONE ${GPUORCH_YAML_ARCHIVE}
                                            IMPORTED_LOCATION ${GPUORCH_YAML_ARCHIVE})
  # fmt compiled into every user; --as-needed then drops libfmt.so, which nothing references.
  add_compile_definitions(FMT_HEADER_ONLY=1)
  add_link_options(-static-libstdc++ -static-libgcc -Wl,--as-needed
                   "-Wl,-rpath,\$ORIGIN/../lib" -Wl,--disable-new-dtags)
else()
  set(GPUORCH_HWLOC PkgConfig::HWLOC)
endif()
