// The CUDA, cuBLAS and cuBLASLt members of the check-macro family: each failing call goes to
// lansbert::fatal_error with the device, file:line and the statement that failed.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "lansbert/core/check.h"

namespace lansbert::cuda {

inline std::string device_context(const char* what) {
  int dev = -1;
  cudaGetDevice(&dev);
  return std::string(what) + " (device " + std::to_string(dev) + ")";
}

}  // namespace lansbert::cuda

#define CUDA_CHECK(stmt)                                                                 \
  do {                                                                                   \
    cudaError_t lb_err_ = (stmt);                                                        \
    if (lb_err_ != cudaSuccess)                                                          \
      ::lansbert::fatal_error(__FILE__, __LINE__, #stmt,                                 \
                              ::lansbert::cuda::device_context(cudaGetErrorString(lb_err_))); \
  } while (0)

#define CUBLAS_CHECK(stmt)                                                               \
  do {                                                                                   \
    cublasStatus_t lb_st_ = (stmt);                                                      \
    if (lb_st_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::lansbert::fatal_error(__FILE__, __LINE__, #stmt,                                 \
                              ::lansbert::cuda::device_context(cublasGetStatusString(lb_st_))); \
  } while (0)
