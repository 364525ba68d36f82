// cuDNN, opened at run time. The library is dlopen'ed on first use (never linked), so a
// binary built with cuDNN headers still starts on a machine without libcudnn: the fused
// attention then reports "unavailable" and the hand-written path runs. Only the backend
// (graph) API and the handle calls are used. Built only with cuDNN headers
// (LANSBERT_HAVE_CUDNN, found at configure time).
#pragma once

#if LANSBERT_HAVE_CUDNN

#include <cudnn_graph.h>

#include <string>

namespace lansbert::cuda {

struct CudnnApi {
  // Empty when the library loaded; otherwise why not (no library, too old, missing symbol).
  std::string error;
  std::string path;      // what was opened
  size_t version = 0;    // cudnnGetVersion(): 91900 for 9.19.0

  size_t (*GetVersion)(void) = nullptr;
  const char* (*GetErrorString)(cudnnStatus_t) = nullptr;
  void (*GetLastErrorString)(char*, size_t) = nullptr;
  cudnnStatus_t (*Create)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*Destroy)(cudnnHandle_t) = nullptr;
  cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t) = nullptr;
  cudnnStatus_t (*BackendCreateDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t*) = nullptr;
  cudnnStatus_t (*BackendDestroyDescriptor)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*BackendFinalize)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*BackendSetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                       cudnnBackendAttributeType_t, int64_t, const void*) = nullptr;
  cudnnStatus_t (*BackendGetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                       cudnnBackendAttributeType_t, int64_t, int64_t*, void*) = nullptr;
  cudnnStatus_t (*BackendExecute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t) = nullptr;

  bool ok() const { return error.empty(); }
  // "CUDNN_STATUS_NOT_SUPPORTED: <cuDNN's last error message>" for a failed call.
  std::string describe(cudnnStatus_t status) const;
};

// Opens the library once (thread-safe) and returns the table: "libcudnn.so.9" from the
// loader's search path (LD_LIBRARY_PATH), then the library found at configure time.
const CudnnApi& cudnn_api();

// "9.19.0" from 91900.
std::string cudnn_version_string(size_t version);

}  // namespace lansbert::cuda

#endif  // LANSBERT_HAVE_CUDNN
