// A file of NVIDIA DeepLearningExamples' HDF5 schema written with the HDF5 C API (gzip-chunked
// datasets, the dtypes NVIDIA's create_pretraining_data writes): what the HDF5 reader and
// `lansbert convert` tests read.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace lansbert::testing {

constexpr int kN = 37, kS = 128, kP = 20;

struct NvidiaData {
  std::vector<int32_t> ids, pos, mids;
  std::vector<int8_t> mask, seg, nsp;
};

inline NvidiaData make_data() {
  NvidiaData d;
  d.ids.assign(kN * kS, 0);
  d.mask.assign(kN * kS, 0);
  d.seg.assign(kN * kS, 0);
  d.pos.assign(kN * kP, 0);
  d.mids.assign(kN * kP, 0);
  d.nsp.assign(kN, 0);
  for (int n = 0; n < kN; ++n) {
    const int len = 10 + (n * 7) % (kS - 10), a_end = len / 3, m = 1 + n % kP;
    for (int i = 0; i < len; ++i) {
      d.ids[n * kS + i] = i == 0 ? 101 : (i == a_end || i == len - 1) ? 102 : 1000 + n * 31 + i;
      d.mask[n * kS + i] = 1;
      d.seg[n * kS + i] = i > a_end;
    }
    for (int k = 0; k < m && k + 1 < len; ++k) {
      d.pos[n * kP + k] = k + 1;
      d.mids[n * kP + k] = 5000 + n + k;
    }
    d.nsp[n] = n % 2;
  }
  return d;
}

inline void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type, int rank,
                   const hsize_t* dims, const void* data) {
  const hid_t space = H5Screate_simple(rank, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hsize_t chunk[2] = {8, rank == 2 ? dims[1] : 1};
  if (chunk[1] > 0) {  // an empty dimension cannot be chunked: stored contiguous
    H5Pset_chunk(dcpl, rank, chunk);
    H5Pset_deflate(dcpl, 4);
  }
  const hid_t ds = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  ASSERT_GE(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

// `max_pred` other than kP: masked_lm_positions and masked_lm_ids of that width (d's are kP wide;
// only 0 is used, which writes none of them).
inline std::string write_nvidia_file(const std::string& path, const NvidiaData& d, hsize_t max_pred = kP) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t ns[2] = {kN, kS}, np[2] = {kN, max_pred}, nn[1] = {kN};
  write_dataset(f, "input_ids", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, ns, d.ids.data());
  write_dataset(f, "input_mask", H5T_STD_I8LE, H5T_NATIVE_INT8, 2, ns, d.mask.data());
  write_dataset(f, "segment_ids", H5T_STD_I8LE, H5T_NATIVE_INT8, 2, ns, d.seg.data());
  write_dataset(f, "masked_lm_positions", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, np, d.pos.data());
  write_dataset(f, "masked_lm_ids", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, np, d.mids.data());
  write_dataset(f, "next_sentence_labels", H5T_STD_I8LE, H5T_NATIVE_INT8, 1, nn, d.nsp.data());
  H5Fclose(f);
  return path;
}

}  // namespace lansbert::testing
