# The library targets, one per layer. Sources are picked up per folder so that adding an
# op or a test is adding a file; each layer links only the layers below it.

function(lansbert_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS" ${ARGN})
  if(L_SOURCES)
    add_library(${name} STATIC ${L_SOURCES})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(${name} PUBLIC ${L_DEPS})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(${name} INTERFACE ${L_DEPS})
  endif()
endfunction()

macro(lansbert_sources var dir)
  file(GLOB ${var} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.cc)
endmacro()

lansbert_sources(CORE_SRC src/core)
lansbert_layer(lansbert_core SOURCES ${CORE_SRC} DEPS spdlog::spdlog fmt::fmt ${CMAKE_DL_LIBS})

lansbert_layer(lansbert_kernels DEPS lansbert_core)

lansbert_sources(CPU_SRC src/cpu)
lansbert_layer(lansbert_cpu SOURCES ${CPU_SRC}
               DEPS lansbert_kernels lansbert_blas OpenMP::OpenMP_CXX)

lansbert_sources(MODEL_SRC src/model)
lansbert_layer(lansbert_model SOURCES ${MODEL_SRC} DEPS lansbert_cpu nlohmann_json::nlohmann_json)

lansbert_sources(OPTIM_SRC src/optim)
lansbert_layer(lansbert_optim SOURCES ${OPTIM_SRC} DEPS lansbert_model)
# sqrtf must not set errno, or GCC cannot vectorise the optimizer's element loops; results
# are unchanged (no fast-math).
target_compile_options(lansbert_optim PRIVATE -fno-math-errno)

lansbert_sources(DATA_SRC src/data)
lansbert_layer(lansbert_data SOURCES ${DATA_SRC} DEPS lansbert_model PkgConfig::UTF8PROC PkgConfig::HDF5 ZLIB::ZLIB PkgConfig::ZSTD
               BZip2::BZip2 EXPAT::EXPAT)

lansbert_sources(DIST_SRC src/dist)
lansbert_layer(lansbert_dist SOURCES ${DIST_SRC}
               DEPS lansbert_optim MPI::MPI_CXX PkgConfig::LIBFABRIC ${CMAKE_DL_LIBS})

lansbert_sources(TRAIN_SRC src/train)
lansbert_layer(lansbert_train SOURCES ${TRAIN_SRC}
               DEPS lansbert_model lansbert_optim lansbert_data lansbert_dist)

lansbert_sources(CONFIG_SRC src/config)
# yaml-cpp 0.7 (Debian 12) exports `yaml-cpp`; 0.8 adds the namespaced `yaml-cpp::yaml-cpp`.
if(TARGET yaml-cpp::yaml-cpp)
  set(LANSBERT_YAML yaml-cpp::yaml-cpp)
else()
  set(LANSBERT_YAML yaml-cpp)
endif()
lansbert_layer(lansbert_config SOURCES ${CONFIG_SRC} DEPS lansbert_train ${LANSBERT_YAML})

if(LANSBERT_HAVE_CUDA)
  file(GLOB CUDA_SRC CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cuda/*.cu ${PROJECT_SOURCE_DIR}/cuda/*.cc)
  add_library(lansbert_cuda STATIC ${CUDA_SRC})
  target_include_directories(lansbert_cuda PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/cuda)
  target_link_libraries(lansbert_cuda PUBLIC lansbert_model lansbert_optim CUDA::cudart CUDA::cublas CUDA::cublasLt)
  # No --use_fast_math: erf/exp/tanh must match the host twin.
  target_compile_options(lansbert_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --extended-lambda>)
  set_target_properties(lansbert_cuda PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  target_compile_definitions(lansbert_cuda PUBLIC LANSBERT_HAVE_CUDA=1)
  # For the start-up check that the device can run this binary (cuda/device_info.cu).
  string(REPLACE ";" " " LANSBERT_CUDA_ARCHS_TEXT "${LANSBERT_CUDA_ARCHITECTURES}")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/cuda/device_info.cu PROPERTIES
                              COMPILE_DEFINITIONS "LANSBERT_CUDA_ARCHS=\"${LANSBERT_CUDA_ARCHS_TEXT}\"")
  # NCCL (in the CUDA 13 toolkit here; from the NCCL packages with CUDA 12.x for V100).
  find_library(LANSBERT_NCCL_LIBRARY nccl
               PATHS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib /usr/local/cuda/lib64
                     /usr/local/cuda-13.0/lib)
  find_path(LANSBERT_NCCL_INCLUDE nccl.h PATHS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  if(LANSBERT_NCCL_LIBRARY AND LANSBERT_NCCL_INCLUDE)
    target_include_directories(lansbert_cuda PRIVATE ${LANSBERT_NCCL_INCLUDE})
    target_link_libraries(lansbert_cuda PUBLIC ${LANSBERT_NCCL_LIBRARY})
    target_compile_definitions(lansbert_cuda PUBLIC LANSBERT_HAVE_NCCL=1)
    message(STATUS "lansbert: NCCL ${LANSBERT_NCCL_LIBRARY}")
  else()
    set_source_files_properties(${PROJECT_SOURCE_DIR}/cuda/nccl_communicator.cc
                                PROPERTIES HEADER_FILE_ONLY ON)
    message(WARNING "lansbert: NCCL not found; multi-GPU runs need it")
  endif()
  # cuDNN (fused attention): headers at configure time; the library is dlopen'ed at run time
  # (cuda/cudnn_api.h) so that binaries start on machines without it and fall back to the
  # hand-written attention. Without the headers the fused path reports "built without cuDNN".
  # LANSBERT_CUDNN=OFF builds without it (as on a machine without the headers).
  set(LANSBERT_CUDNN AUTO CACHE STRING "Fused attention through cuDNN: AUTO (if the headers are found) or OFF")
  set_property(CACHE LANSBERT_CUDNN PROPERTY STRINGS AUTO OFF)
  if(NOT LANSBERT_CUDNN STREQUAL "OFF")
    find_path(LANSBERT_CUDNN_INCLUDE cudnn_graph.h PATHS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
    find_library(LANSBERT_CUDNN_LIBRARY NAMES libcudnn.so.9 cudnn
                 PATHS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13.0/lib)
  endif()
  if(NOT LANSBERT_CUDNN STREQUAL "OFF" AND LANSBERT_CUDNN_INCLUDE)
    target_include_directories(lansbert_cuda PUBLIC ${LANSBERT_CUDNN_INCLUDE})
    target_compile_definitions(lansbert_cuda PUBLIC LANSBERT_HAVE_CUDNN=1)
    if(LANSBERT_CUDNN_LIBRARY)
      # Tried after the loader's own search path (LD_LIBRARY_PATH) when nothing is found there.
      target_compile_definitions(lansbert_cuda PRIVATE LANSBERT_CUDNN_LIBRARY="${LANSBERT_CUDNN_LIBRARY}")
    endif()
    target_link_libraries(lansbert_cuda PUBLIC ${CMAKE_DL_LIBS})
    message(STATUS "lansbert: cuDNN headers ${LANSBERT_CUDNN_INCLUDE} (library opened at run time; "
                   "configure-time copy: ${LANSBERT_CUDNN_LIBRARY})")
  else()
    message(STATUS "lansbert: cuDNN off or its headers not found; the fused attention path is unavailable")
  endif()
endif()

lansbert_sources(CLI_SRC src/cli)
add_executable(lansbert ${CLI_SRC})
target_link_libraries(lansbert PRIVATE lansbert_config lansbert_train lansbert_model lansbert_optim
                      lansbert_data lansbert_dist CLI11::CLI11)
if(LANSBERT_HAVE_CUDA)
  target_link_libraries(lansbert PRIVATE lansbert_cuda)
endif()
target_compile_definitions(lansbert PRIVATE LANSBERT_VERSION="${PROJECT_VERSION}"
                           LANSBERT_BUILD_TYPE="${CMAKE_BUILD_TYPE}")
