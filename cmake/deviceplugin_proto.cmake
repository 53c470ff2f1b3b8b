# The kubelet's gRPC APIs gpuorch speaks: the device plugin API (proto/deviceplugin/v1beta1) and
# the pod-resources API (proto/podresources/v1, read by `gpuorch exporter --kubernetes`). protoc
# and grpc_cpp_plugin generate the messages and service stubs into the build directory, compiled
# into gpuorch_deviceplugin_proto. gpuorch (src/gpuorch/k8s) and the test kubelets (tests/k8s)
# both use this one library, so they agree on the wire by construction.
pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++ protobuf)
find_program(GPUORCH_PROTOC protoc REQUIRED)
find_program(GPUORCH_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

set(GPUORCH_PROTO_DIR ${CMAKE_CURRENT_SOURCE_DIR}/proto)
set(GPUORCH_PROTO_OUT ${CMAKE_CURRENT_BINARY_DIR}/proto)
set(GPUORCH_DP_PROTO ${GPUORCH_PROTO_DIR}/deviceplugin/v1beta1/api.proto)
set(GPUORCH_DP_GEN
    ${GPUORCH_PROTO_OUT}/deviceplugin/v1beta1/api.pb.cc
    ${GPUORCH_PROTO_OUT}/deviceplugin/v1beta1/api.pb.h
    ${GPUORCH_PROTO_OUT}/deviceplugin/v1beta1/api.grpc.pb.cc
    ${GPUORCH_PROTO_OUT}/deviceplugin/v1beta1/api.grpc.pb.h)
add_custom_command(
  OUTPUT ${GPUORCH_DP_GEN}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GPUORCH_PROTO_OUT}
  COMMAND ${GPUORCH_PROTOC} -I ${GPUORCH_PROTO_DIR} --cpp_out=${GPUORCH_PROTO_OUT}
          --grpc_out=${GPUORCH_PROTO_OUT}
          --plugin=protoc-gen-grpc=${GPUORCH_GRPC_CPP_PLUGIN} ${GPUORCH_DP_PROTO}
  DEPENDS ${GPUORCH_DP_PROTO}
  COMMENT "protoc: kubelet device plugin API v1beta1"
  VERBATIM)
set(GPUORCH_PR_PROTO ${GPUORCH_PROTO_DIR}/podresources/v1/api.proto)
set(GPUORCH_PR_GEN
    ${GPUORCH_PROTO_OUT}/podresources/v1/api.pb.cc
    ${GPUORCH_PROTO_OUT}/podresources/v1/api.pb.h
    ${GPUORCH_PROTO_OUT}/podresources/v1/api.grpc.pb.cc
    ${GPUORCH_PROTO_OUT}/podresources/v1/api.grpc.pb.h)
add_custom_command(
  OUTPUT ${GPUORCH_PR_GEN}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GPUORCH_PROTO_OUT}
  COMMAND ${GPUORCH_PROTOC} -I ${GPUORCH_PROTO_DIR} --cpp_out=${GPUORCH_PROTO_OUT}
          --grpc_out=${GPUORCH_PROTO_OUT}
          --plugin=protoc-gen-grpc=${GPUORCH_GRPC_CPP_PLUGIN} ${GPUORCH_PR_PROTO}
  DEPENDS ${GPUORCH_PR_PROTO}
  COMMENT "protoc: kubelet pod-resources API v1"
  VERBATIM)
add_library(gpuorch_deviceplugin_proto STATIC ${GPUORCH_DP_GEN} ${GPUORCH_PR_GEN})
# SYSTEM: generated code is not held to the project's warning flags.
target_include_directories(gpuorch_deviceplugin_proto SYSTEM PUBLIC ${GPUORCH_PROTO_OUT})
target_link_libraries(gpuorch_deviceplugin_proto PUBLIC PkgConfig::GRPCPP)
