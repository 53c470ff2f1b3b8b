# doctor's NCCL/RCCL/PyTorch message catalogue is data (src/gpuorch/doctor/catalogue/*.yaml,
# docs/doctor.md); this turns it into a source of the doctor layer, so the program needs no file at
# run time. The tests load the same embedded bytes.
file(GLOB GPUORCH_NCCL_CATALOGUE CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/gpuorch/doctor/catalogue/*.yaml)
set(GPUORCH_NCCL_CATALOGUE_CPP ${PROJECT_BINARY_DIR}/generated/nccl_catalogue_files.cpp)
add_custom_command(
  OUTPUT ${GPUORCH_NCCL_CATALOGUE_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${GPUORCH_NCCL_CATALOGUE_CPP}
          -DDIR=${PROJECT_SOURCE_DIR}/src/gpuorch/doctor/catalogue
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_catalogue.cmake
  DEPENDS ${GPUORCH_NCCL_CATALOGUE} ${PROJECT_SOURCE_DIR}/cmake/embed_catalogue.cmake
  COMMENT "Embedding doctor's NCCL catalogue"
  VERBATIM)
add_custom_target(gpuorch_nccl_catalogue DEPENDS ${GPUORCH_NCCL_CATALOGUE_CPP})
target_sources(gpuorch_doctor PRIVATE ${GPUORCH_NCCL_CATALOGUE_CPP})
