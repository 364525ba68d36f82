// The CPU backend: OpenMP loops over the shared math bodies, OpenBLAS for the GEMMs.
// Instantiated for float (training) and double (finite-difference gradient tests).
// Every reduction runs in a fixed order, so results do not depend on the thread count.
#pragma once

#include <memory>

#include "lansbert/backend/ops.h"

namespace lansbert::cpu {

template <typename T>
std::unique_ptr<Ops<T>> make_ops();

}  // namespace lansbert::cpu
