# The layers of src/gpuorch and what each may use, as docs/architecture.md draws them. One static
# library per layer (gpuorch_<layer>), linked only to the layers listed after DEPS, so a use of a
# layer that is not listed fails to link; scripts/check-layering reads this same table and fails CI
# on an #include against it (an include alone would otherwise compile, since all headers share src/).
# Keep one gpuorch_layer(...) call per line: the check parses these lines.
#
# gpuorch_layer(NAME [DEPS layer...] [LIBS target...])
# nlohmann-json alone is 5-9 s of parsing per object in C++20 on g++ 12, most of a typical object's
# compile time, and CI builds every object on two cores. So each target parses it (and fmt) once.
function(gpuorch_precompile_common_headers target)
  target_precompile_headers(${target} PRIVATE
    <nlohmann/json.hpp> <fmt/format.h> <map> <memory> <optional> <string> <vector>)
endfunction()

function(gpuorch_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 L "" "" "DEPS;LIBS")
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/gpuorch/${name}/*.cpp)
  set(target gpuorch_${name})
  if(sources)
    add_library(${target} STATIC ${sources})
    target_compile_options(${target} PRIVATE ${GPUORCH_WARNINGS})
    gpuorch_precompile_common_headers(${target})
    set(scope PUBLIC)
  else()
    # A layer with headers only (or none yet) is still a node of the graph.
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  target_include_directories(${target} ${scope} ${PROJECT_SOURCE_DIR}/src)
  foreach(dep IN LISTS L_DEPS)
    target_link_libraries(${target} ${scope} gpuorch_${dep})
  endforeach()
  target_link_libraries(${target} ${scope} ${L_LIBS})
  set_property(GLOBAL APPEND PROPERTY GPUORCH_LAYERS ${target})
endfunction()

gpuorch_layer(base LIBS fmt::fmt nlohmann_json::nlohmann_json yaml-cpp Threads::Threads ${CMAKE_DL_LIBS})
gpuorch_layer(cluster DEPS base)
gpuorch_layer(workload DEPS base)
gpuorch_layer(mig DEPS base)
gpuorch_layer(topology DEPS base cluster)
gpuorch_layer(sched DEPS base cluster workload mig topology LIBS PkgConfig::NLOPT)
gpuorch_layer(sim DEPS base cluster workload mig topology sched LIBS qhull_r)
gpuorch_layer(io DEPS base cluster workload mig topology LIBS yaml-cpp)
gpuorch_layer(report DEPS base cluster workload sched sim)
gpuorch_layer(discover DEPS base cluster topology LIBS ${GPUORCH_HWLOC})
gpuorch_layer(telemetry DEPS base cluster topology discover LIBS PkgConfig::HTTPLIB OpenSSL::SSL)
gpuorch_layer(comm DEPS base cluster topology discover LIBS gloo)
gpuorch_layer(launch DEPS base cluster workload mig topology sched discover comm LIBS PkgConfig::HTTPLIB)
gpuorch_layer(k8s DEPS base cluster workload mig topology sched io discover telemetry LIBS yaml-cpp CURL::libcurl gpuorch_deviceplugin_proto)
gpuorch_layer(doctor DEPS base cluster workload mig topology sched discover telemetry comm launch k8s)
