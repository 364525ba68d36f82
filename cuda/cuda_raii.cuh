// RAII owners of the CUDA handles the backend holds: streams, events, cuBLAS and cuBLASLt
// handles (with their workspace) and pinned host buffers. Copy is deleted, move is not
// needed (each lives inside one owner); every failure goes through CUDA_CHECK/CUBLAS_CHECK to
// the one fatal path. Device memory itself is a Buffer<T> over cuda::device_allocator().
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda_check.cuh"

namespace lansbert::cuda {

// A stream created blocking (not cudaStreamNonBlocking) on purpose: the Allocator's
// synchronous cudaMemcpy calls run on the legacy default stream, which then orders itself
// after the work queued here, so the model's host copies need no explicit synchronisation.
class Stream {
 public:
  Stream() { CUDA_CHECK(cudaStreamCreate(&s_)); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void synchronize() const { CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = false) {
    CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(e_, s)); }
  void synchronize() const { CUDA_CHECK(cudaEventSynchronize(e_)); }
  // Milliseconds from `start` to this event; both recorded with timing on.
  float elapsed_since(const Event& start) const {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

// A device allocation of raw bytes (for workspaces the Allocator interface does not need to
// know about).
class DeviceBytes {
 public:
  DeviceBytes() = default;
  explicit DeviceBytes(size_t bytes) : bytes_(bytes) {
    if (bytes) CUDA_CHECK(cudaMalloc(&p_, bytes));
  }
  ~DeviceBytes() {
    if (p_) cudaFree(p_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  // Grows (never shrinks) to at least `bytes`; the contents are lost on growth. Work queued
  // earlier (on any stream) may still use the old allocation, e.g. the optimizer's last pass
  // or a column-sum kernel, and cudaFree only "may" synchronise (driver API docs), so the
  // device is drained first. Growth happens on first use of a size, not per step.
  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    if (p_) {
      CUDA_CHECK(cudaDeviceSynchronize());
      CUDA_CHECK(cudaFree(p_));
    }
    p_ = nullptr;
    CUDA_CHECK(cudaMalloc(&p_, bytes));
    bytes_ = bytes;
  }
  // Frees the allocation (after draining the device, as reserve does).
  void release() {
    if (!p_) return;
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(p_));
    p_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory, for the optimizer's per-block scalars and other small copies
// that must not go through a pageable staging buffer.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t n) { resize(n); }
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // Grows (never shrinks); the contents are lost on growth. An asynchronous copy from or to
  // the old buffer may still be queued (the optimizer uploads its factors without waiting),
  // and cudaFreeHost promises no synchronisation, so the device is drained first.
  void resize(size_t n) {
    if (n <= n_) return;
    if (p_) {
      CUDA_CHECK(cudaDeviceSynchronize());
      CUDA_CHECK(cudaFreeHost(p_));
    }
    p_ = nullptr;
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    n_ = n;
  }
  T* data() { return p_; }
  T& operator[](size_t i) { return p_[i]; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// A cuBLAS handle bound to one stream, with its own workspace (so cuBLAS never allocates
// during a step, and results are reproducible on that stream).
class CublasHandle {
 public:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // Hopper guidance: 32 MiB

  explicit CublasHandle(cudaStream_t s) : workspace_(kWorkspaceBytes) {
    CUBLAS_CHECK(cublasCreate(&h_));
    CUBLAS_CHECK(cublasSetStream(h_, s));
    CUBLAS_CHECK(cublasSetWorkspace(h_, workspace_.get(), workspace_.bytes()));
  }
  ~CublasHandle() { cublasDestroy(h_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  DeviceBytes workspace_;
  cublasHandle_t h_ = nullptr;
};

// A cuBLASLt handle with the workspace its matmuls are given on every call.
class CublasLtHandle {
 public:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  CublasLtHandle() : workspace_(kWorkspaceBytes) { CUBLAS_CHECK(cublasLtCreate(&h_)); }
  ~CublasLtHandle() { cublasLtDestroy(h_); }
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  cublasLtHandle_t get() const { return h_; }
  void* workspace() const { return workspace_.get(); }
  size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  DeviceBytes workspace_;
  cublasLtHandle_t h_ = nullptr;
};

}  // namespace lansbert::cuda
