// Force-included (-include) into every CUDA source the emulator compiles with the host
// compiler: the CUDA qualifiers as the emulator needs them, then the real runtime headers,
// then the device-side names kernels use (emu_device.h).
#pragma once

// A block's __shared__ variables: one copy per host thread, which runs one block at a time.
// <cuda_runtime.h> keeps a definition made before it is included.
#define __shared__ static thread_local
#define __launch_bounds__(...)

#include <cuda_runtime.h>

#include "emu_device.h"
