# The kubelet's gRPC APIs gpuorch speaks: the device plugin API (proto/deviceplugin/v1beta1), the
# pod-resources API (proto/podresources/v1, read by `gpuorch exporter --kubernetes`), and for
# `gpuorch dra-driver` the plugin registration API (proto/pluginregistration/v1) and the DRA
# plugin API (proto/dra/v1). protoc and grpc_cpp_plugin generate the messages and service stubs
# into the build directory, compiled into gpuorch_deviceplugin_proto. gpuorch (src/gpuorch/k8s)
# and the test kubelets (tests/k8s) both use this one library, so they agree on the wire by
# construction.
pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++ protobuf)
find_program(GPUORCH_PROTOC protoc REQUIRED)
find_program(GPUORCH_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

set(GPUORCH_PROTO_DIR ${CMAKE_CURRENT_SOURCE_DIR}/proto)
set(GPUORCH_PROTO_OUT ${CMAKE_CURRENT_BINARY_DIR}/proto)
set(GPUORCH_KUBELET_PROTO_GEN)

# gpuorch_kubelet_proto(API/VERSION "what it is"): proto/API/VERSION/api.proto into the library.
function(gpuorch_kubelet_proto api what)
  set(proto ${GPUORCH_PROTO_DIR}/${api}/api.proto)
  set(out ${GPUORCH_PROTO_OUT}/${api}/api)
  set(gen ${out}.pb.cc ${out}.pb.h ${out}.grpc.pb.cc ${out}.grpc.pb.h)
  add_custom_command(
    OUTPUT ${gen}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${GPUORCH_PROTO_OUT}
    COMMAND ${GPUORCH_PROTOC} -I ${GPUORCH_PROTO_DIR} --cpp_out=${GPUORCH_PROTO_OUT}
            --grpc_out=${GPUORCH_PROTO_OUT}
            --plugin=protoc-gen-grpc=${GPUORCH_GRPC_CPP_PLUGIN} ${proto}
    DEPENDS ${proto}
    COMMENT "protoc: ${what}"
    VERBATIM)
  set(GPUORCH_KUBELET_PROTO_GEN ${GPUORCH_KUBELET_PROTO_GEN} ${gen} PARENT_SCOPE)
endfunction()

gpuorch_kubelet_proto(deviceplugin/v1beta1 "kubelet device plugin API v1beta1")
gpuorch_kubelet_proto(podresources/v1 "kubelet pod-resources API v1")
gpuorch_kubelet_proto(pluginregistration/v1 "kubelet plugin registration API v1")
gpuorch_kubelet_proto(dra/v1 "kubelet DRA plugin API v1")
add_library(gpuorch_deviceplugin_proto STATIC ${GPUORCH_KUBELET_PROTO_GEN})
# SYSTEM: generated code is not held to the project's warning flags.
target_include_directories(gpuorch_deviceplugin_proto SYSTEM PUBLIC ${GPUORCH_PROTO_OUT})
target_link_libraries(gpuorch_deviceplugin_proto PUBLIC PkgConfig::GRPCPP)
