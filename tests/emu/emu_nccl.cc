// The emulator's NCCL: the collectives lansbert calls, over MPI on host memory, so that
// `mpirun -np N` runs of the CUDA backend's multi-rank path (NcclCommunicator, its stream
// and events, 16-bit gradient wires) work on emulated devices. Each collective gathers every
// rank's send buffer (MPI_Allgather of bytes) and reduces in rank order, in fp32 for 16-bit
// types (double for fp64), rounding once: deterministic, though not NCCL's ring order.
// Streams: a collective first runs the work queued on its stream (so the events that stream
// waits on pull in the producers of the send buffer, and nothing else), exchanges at once
// (the MPI calls stay in program order on every rank), and queues the write of its result on
// the stream, where only work ordered after it will see it (emu_streams.h); when that write
// runs, the send buffer must still hold what was sent (else unordered work overwrote it).
// A communicator must span MPI_COMM_WORLD with NCCL rank = MPI rank (as lansbert builds it);
// a one-rank communicator needs no MPI at all.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mpi.h>
#include <nccl.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "emu_state.h"
#include "emu_streams.h"

struct ncclComm {
  int nranks = 1, rank = 0;
  MPI_Comm mpi = MPI_COMM_NULL;
};

namespace {

size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

double load(const char* p, ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return *reinterpret_cast<const int8_t*>(p);
    case ncclUint8: return *reinterpret_cast<const uint8_t*>(p);
    case ncclFloat16: return __half2float(*reinterpret_cast<const __half*>(p));
    case ncclBfloat16: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
    case ncclInt32: return *reinterpret_cast<const int32_t*>(p);
    case ncclUint32: return *reinterpret_cast<const uint32_t*>(p);
    case ncclFloat32: return *reinterpret_cast<const float*>(p);
    case ncclInt64: return double(*reinterpret_cast<const int64_t*>(p));
    case ncclUint64: return double(*reinterpret_cast<const uint64_t*>(p));
    default: return *reinterpret_cast<const double*>(p);
  }
}

void store(char* p, ncclDataType_t t, double v) {
  switch (t) {
    case ncclInt8: *reinterpret_cast<int8_t*>(p) = int8_t(v); break;
    case ncclUint8: *reinterpret_cast<uint8_t*>(p) = uint8_t(v); break;
    case ncclFloat16: *reinterpret_cast<__half*>(p) = __float2half_rn(float(v)); break;
    case ncclBfloat16: *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(float(v)); break;
    case ncclInt32: *reinterpret_cast<int32_t*>(p) = int32_t(v); break;
    case ncclUint32: *reinterpret_cast<uint32_t*>(p) = uint32_t(v); break;
    case ncclFloat32: *reinterpret_cast<float*>(p) = float(v); break;
    case ncclInt64: *reinterpret_cast<int64_t*>(p) = int64_t(v); break;
    case ncclUint64: *reinterpret_cast<uint64_t*>(p) = uint64_t(v); break;
    default: *reinterpret_cast<double*>(p) = v; break;
  }
}

// Every rank's `bytes` from `send`, rank after rank.
std::vector<char> gather(const ncclComm* c, const void* send, size_t bytes) {
  std::vector<char> all(bytes * c->nranks);
  if (c->nranks == 1) {
    if (bytes) std::memcpy(all.data(), send, bytes);
  } else if (MPI_Allgather(send, int(bytes), MPI_BYTE, all.data(), int(bytes), MPI_BYTE, c->mpi) != MPI_SUCCESS) {
    emu::fatal("emulated NCCL: MPI_Allgather failed");
  }
  return all;
}

// out[i] = op over ranks r (in order) of element (first + i) of rank r's buffer.
void reduce_into(const ncclComm* c, const std::vector<char>& all, size_t count, size_t first, size_t n,
                 ncclDataType_t t, ncclRedOp_t op, void* out) {
  const size_t eb = type_bytes(t);
  // 16-bit and fp32 values are added in fp32, as a float accumulator would.
  const bool f32 = t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32;
  for (size_t i = 0; i < n; ++i) {
    double acc = 0;
    float facc = 0;
    for (int r = 0; r < c->nranks; ++r) {
      const double v = load(all.data() + (r * count + first + i) * eb, t);
      if (r == 0) acc = v, facc = float(v);
      else if (op == ncclMax) acc = v > acc ? v : acc, facc = float(acc);
      else if (op == ncclMin) acc = v < acc ? v : acc, facc = float(acc);
      else if (op == ncclProd) acc *= v, facc *= float(v);
      else acc += v, facc += float(v);
    }
    double result = f32 && (op == ncclSum || op == ncclAvg || op == ncclProd) ? facc : acc;
    if (op == ncclAvg) result = f32 ? double(float(result) / float(c->nranks)) : result / c->nranks;
    store(static_cast<char*>(out) + i * eb, t, result);
  }
}

// The result, computed now into `staged`, lands in `recv` when the stream's work runs. The
// send buffer was read at the call, as early as the collective could have run; it must still
// hold those bytes when the collective's turn comes, or work not ordered before it (nor after
// it) wrote the buffer in between: on a GPU the collective could have read either value.
void deliver(const char* what, cudaStream_t s, void* recv, std::shared_ptr<std::vector<char>> staged,
             const void* send, size_t send_bytes) {
  auto sent = std::make_shared<std::vector<char>>(static_cast<const char*>(send), static_cast<const char*>(send) + send_bytes);
  emu::enqueue(s, [what, recv, staged, send, sent] {
    if (!sent->empty() && std::memcmp(send, sent->data(), sent->size()) != 0)
      emu::fatal(std::string(what) + ": its send buffer was written after the call by work not ordered with the collective");
    if (!staged->empty()) std::memcpy(recv, staged->data(), staged->size());
  });
}

void check_pointers(const char* what, const void* send, const void* recv) {
  emu::check_device_pointer(std::string(what) + " send buffer", send);
  emu::check_device_pointer(std::string(what) + " receive buffer", recv);
}

ncclResult_t check(const ncclComm* c, ncclDataType_t t, ncclRedOp_t op = ncclSum) {
  if (!c) return ncclInvalidArgument;
  if (!type_bytes(t)) return ncclInvalidArgument;
  if (op != ncclSum && op != ncclProd && op != ncclMax && op != ncclMin && op != ncclAvg) return ncclInvalidArgument;
  return ncclSuccess;
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (emulated NCCL)";
    case ncclInvalidUsage: return "invalid usage (emulated NCCL)";
    case ncclSystemError: return "system error (emulated NCCL)";
    default: return "NCCL error (emulated NCCL)";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::random_device rd;
  for (char& b : id->internal) b = char(rd());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  auto* c = new ncclComm{nranks, rank, MPI_COMM_NULL};
  if (nranks > 1) {
    int init = 0, size = 0, me = -1;
    MPI_Initialized(&init);
    if (init) {
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      MPI_Comm_rank(MPI_COMM_WORLD, &me);
    }
    if (size != nranks || me != rank) {
      delete c;
      return ncclInvalidUsage;  // the emulator needs NCCL ranks = MPI world ranks
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
    // Every rank must pass rank 0's id (one ncclGetUniqueId, broadcast): ranks with ids of
    // their own would each wait for a clique that never forms, where real NCCL hangs.
    std::vector<char> ids(size_t(nranks) * sizeof id.internal);
    MPI_Allgather(id.internal, int(sizeof id.internal), MPI_CHAR, ids.data(), int(sizeof id.internal), MPI_CHAR,
                  c->mpi);
    for (int r = 1; r < nranks; ++r)
      if (std::memcmp(ids.data(), ids.data() + size_t(r) * sizeof id.internal, sizeof id.internal) != 0) {
        MPI_Comm_free(&c->mpi);
        delete c;
        emu::fatal("ncclCommInitRank: rank " + std::to_string(r) +
                   " passed another unique id than rank 0 (real NCCL would hang)");
      }
  } else if (nranks != 1 || rank != 0) {
    delete c;
    return ncclInvalidArgument;
  }
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (c && c->mpi != MPI_COMM_NULL) MPI_Comm_free(&c->mpi);
  delete c;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) { return ncclCommDestroy(c); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* async) {
  *async = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t s) {
  if (ncclResult_t r = check(c, t, op); r != ncclSuccess) return r;
  check_pointers("ncclAllReduce", send, recv);
  emu::run_stream(s);
  const std::vector<char> all = gather(c, send, count * type_bytes(t));
  auto out = std::make_shared<std::vector<char>>(count * type_bytes(t));
  reduce_into(c, all, count, 0, count, t, op, out->data());
  deliver("ncclAllReduce", s, recv, out, send, count * type_bytes(t));
  return ncclSuccess;
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t c, cudaStream_t s) {
  if (ncclResult_t r = check(c, t, op); r != ncclSuccess) return r;
  check_pointers("ncclReduce", send, recv);
  emu::run_stream(s);
  const std::vector<char> all = gather(c, send, count * type_bytes(t));
  auto out = std::make_shared<std::vector<char>>(c->rank == root ? count * type_bytes(t) : 0);
  if (c->rank == root) reduce_into(c, all, count, 0, count, t, op, out->data());
  deliver("ncclReduce", s, recv, out, send, count * type_bytes(t));
  return ncclSuccess;
}

// recvcount elements per rank: rank r gets elements [r * recvcount, (r + 1) * recvcount).
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s) {
  if (ncclResult_t r = check(c, t, op); r != ncclSuccess) return r;
  check_pointers("ncclReduceScatter", send, recv);
  emu::run_stream(s);
  const size_t count = recvcount * c->nranks;
  const std::vector<char> all = gather(c, send, count * type_bytes(t));
  auto out = std::make_shared<std::vector<char>>(recvcount * type_bytes(t));
  reduce_into(c, all, count, recvcount * c->rank, recvcount, t, op, out->data());
  deliver("ncclReduceScatter", s, recv, out, send, count * type_bytes(t));
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t s) {
  if (ncclResult_t r = check(c, t); r != ncclSuccess) return r;
  check_pointers("ncclAllGather", send, recv);
  emu::run_stream(s);
  deliver("ncclAllGather", s, recv, std::make_shared<std::vector<char>>(gather(c, send, sendcount * type_bytes(t))), send,
          sendcount * type_bytes(t));
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s) {
  if (ncclResult_t r = check(c, t); r != ncclSuccess) return r;
  check_pointers("ncclBroadcast", c->rank == root ? send : nullptr, recv);
  emu::run_stream(s);
  const size_t bytes = count * type_bytes(t);
  auto out = std::make_shared<std::vector<char>>(bytes);
  if (c->rank == root && bytes) std::memcpy(out->data(), send, bytes);
  if (c->nranks > 1 && MPI_Bcast(out->data(), int(bytes), MPI_BYTE, root, c->mpi) != MPI_SUCCESS) return ncclSystemError;
  deliver("ncclBroadcast", s, recv, out, send, c->rank == root ? bytes : 0);
  return ncclSuccess;
}

}  // extern "C"
