// Writes a file of NVIDIA's HDF5 schema (nvidia_hdf5_file.h's 37 samples) for the command-line
// tests: write_nvidia_hdf5 PATH [POSITION] puts sample 0's second masked slot at POSITION, in
// its padding when POSITION is past the sample's 10 tokens (a file training accepts, but whose
// masked slot points at no token).
#include <cstdlib>
#include <string>

#include "nvidia_hdf5_file.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  lansbert::testing::NvidiaData d = lansbert::testing::make_data();
  if (argc > 2) {
    d.pos[1] = std::atoi(argv[2]);
    d.mids[1] = 3000;
  }
  lansbert::testing::write_nvidia_file(argv[1], d);
  return ::testing::Test::HasFailure() ? 1 : 0;
}
