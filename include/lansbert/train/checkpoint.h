// Checkpoints: one directory per checkpoint under the run's checkpoint root,
//   ROOT/step-000000123/{model.safetensors, optimizer.state, trainer.json}
// written under a temporary name (ROOT/.tmp-step-...-PID), fsynced, renamed into place, the
// root fsynced, and only then the `latest` symlink replaced atomically (symlink to a temp
// name + rename). A crash at any point leaves the previous checkpoint and pointer intact;
// stale temporary directories are never read. trainer.json holds the counters, the data
// position, the resolved config and the size and CRC32C of the other files, so a flipped
// byte in a file a reader loads (or in any file, for `lansbert verify`) is a clear "corrupt"
// error naming the file.
//
// Sharded optimizer state (ZeRO-1, distributed.shard_optimizer): instead of optimizer.state
// each rank r writes its slice [begin, end) of m and v to optimizer.state.rank-RRRRR (the
// save_state format over the slice's elements) and rank 0 writes optimizer.manifest.json
// (rank count, total elements, every slice's range and file). All of them are listed with
// size and CRC32C in trainer.json. The trainer writes such a checkpoint collectively:
// rank 0 creates the temporary directory, every rank writes and fsyncs its slice, then
// (after a collective that acts as the barrier) rank 0 commits: manifest, model,
// trainer.json, rename and the `latest` swap. So `latest` never names a checkpoint that
// misses a rank's part. Moments load from either layout onto any rank count: the slices
// overlapping the range a rank needs are read and cut.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lansbert/core/file_io.h"
#include "lansbert/core/status.h"
#include "lansbert/data/sampler.h"
#include "lansbert/model/param_table.h"
#include "lansbert/optim/updater.h"

namespace lansbert {

// Version 2 records the parameter layout (param_layout below); version 1 checkpoints are
// still read, but their optimizer state is refused (it predates the packed q/k/v layout).
inline constexpr int kCheckpointFormatVersion = 2;
inline constexpr int kOldestCheckpointFormatVersion = 1;

// The files of a checkpoint directory.
namespace checkpoint_file {
inline constexpr const char* kModel = "model.safetensors";
inline constexpr const char* kOptimizer = "optimizer.state";      // replicated state
inline constexpr const char* kManifest = "optimizer.manifest.json";  // sharded state
inline constexpr const char* kMeta = "trainer.json";
}  // namespace checkpoint_file

// A file's size and CRC32C as trainer.json records them.
struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};
// Adds the bytes it is handed to *d (their count and the CRC32C chained over them): a digest
// taken as a writer writes the file, or as a loader reads it, instead of on a read of its own.
BytesSeen digest_into(FileDigest* d);

// Where each tensor sits in the flat buffers, as a short text: CRC32C over every entry's
// name, offset and size. The optimizer's m and v are flat buffers, so a checkpoint's moments
// can be loaded only into a model whose fingerprint is the same (the weights are stored by
// name and load into any layout).
std::string param_layout_fingerprint(const ParamTable& table);

struct CheckpointMeta {
  int format_version = kCheckpointFormatVersion;
  std::string param_layout;  // param_layout_fingerprint at writing; empty in version 1
  int64_t step = 0;         // global batches done in this phase
  uint64_t micro_step = 0;  // micro-steps done over the whole run (dropout keys)
  DataPosition data;        // where the next global batch starts
  uint64_t seed = 0;
  int world = 1;
  std::string config_json;  // the resolved config (train_config.h config_to_json)
  // What data.train held: {"samples", "files", "digest"} (a CRC32C of three samples), so that
  // a resume can tell whether it reads the data the position refers to (a change is noted),
  // and for lansbert shards "vocab_hash", which --init-from compares (another vocabulary is
  // refused). Empty in checkpoints written before it was recorded.
  std::string train_data_json;
  OptimizerState optimizer;
  // Every file trainer.json lists (all but itself), by name.
  std::map<std::string, FileDigest> files;
};

// One rank's part of sharded optimizer state: elements [begin, end) of the flat buffer.
struct OptimizerSlice {
  size_t begin = 0, end = 0;
  std::string file;   // name inside the checkpoint directory
  FileDigest digest;  // of the file as written, taken by the rank that wrote it
};

// ROOT/step-NNNNNNNNN: the directory a checkpoint of `step` is renamed to.
std::string checkpoint_step_dir(const std::string& root, int64_t step);
// The name of rank `rank`'s slice file.
std::string optimizer_slice_file(int rank);
// The temporary directory a checkpoint of `step` is assembled in; `tag` makes it unique to
// the writing job (rank 0's pid, shared with the other ranks).
std::string checkpoint_tmp_dir(const std::string& root, int64_t step, int64_t tag);
// Rank 0: creates root (if needed) and an empty tmp directory.
Status create_checkpoint_tmp(const std::string& root, const std::string& tmp);
// Rank 0, after a failed write: removes tmp and what it holds (a full disk gets its space
// back; a later run would ignore the directory anyway). Best effort, never fails.
void remove_checkpoint_tmp(const std::string& tmp);
// Every rank: writes its slice of m and v (end-begin floats each) with the scalars into
// tmp/optimizer_slice_file(rank), fsynced, taking its digest as it writes (each rank its own,
// in parallel: rank 0 reads no rank's moments back).
Status write_optimizer_slice(const std::string& tmp, int rank, const OptimizerState& state,
                             const float* m, const float* v, size_t begin, size_t end,
                             OptimizerSlice* slice);
// Rank 0, once every slice is on disk: writes the params, the manifest of `slices` (one per
// rank, in rank order, tiling [0, table.total_elements()), with the digests their ranks
// took; each file's size is checked against its digest here) and trainer.json, renames tmp
// into place and points `latest` (and `final`) at it, prunes. REQUIRES: tmp made by
// create_checkpoint_tmp.
Status commit_sharded_checkpoint(const std::string& root, const std::string& tmp,
                                 const CheckpointMeta& meta, const ParamTable& table,
                                 const float* params, const std::vector<OptimizerSlice>& slices,
                                 int keep_last, bool final, std::string* written);

// Writes a checkpoint of `meta` with params and moments (host fp32, table layout) under
// root, points `latest` (and `final` when `final`) at it and removes all but the newest
// `keep_last` step-* directories. *written receives the checkpoint's directory.
Status write_checkpoint(const std::string& root, const CheckpointMeta& meta,
                        const ParamTable& table, const float* params, const float* m,
                        const float* v, int keep_last, bool final, std::string* written);

// Before a run starts: `root` (checkpoint.dir) must be, or be creatable as, a writable
// directory, and must hold no checkpoint the run would overwrite or move `latest` back from:
// none at all for a new run (resumed_step < 0), none later than resumed_step for a resumed one.
// Checkpoints are never replaced, so a new run in a used directory is refused (naming the
// newest step and what to do) rather than discarding its own checkpoints or the old ones.
Status check_checkpoint_root(const std::string& root, int64_t resumed_step);

// `spec` is a checkpoint directory (holding trainer.json), or a root / pointer whose
// `latest` leads to one. Fails (not found) when there is none.
Status resolve_checkpoint(const std::string& spec, std::string* dir);

// Reads trainer.json (checking its own checksum and format version), and no other file. Each
// file is checked as it is loaded (load_checkpoint_params, load_checkpoint_optimizer_range),
// on the one read that loads it, and only the files a reader loads: eval, export and a phase
// that starts fresh moments read no optimizer file, each rank of a sharded resume reads only
// the slices it needs, not every rank's (1,536 of them on the LANS cluster), and under a
// launcher rank 0 alone reads the weights for all (load_params_on_ranks, train/device_run.h).
Status read_checkpoint_meta(const std::string& dir, CheckpointMeta* meta);

// Checks that DIR/name has the size and CRC32C trainer.json (`meta`) records; a file it does
// not list is an error too. Reads the file in pieces: memory stays small for any file size.
Status verify_checkpoint_file(const std::string& dir, const CheckpointMeta& meta, const std::string& name);

// About the bytes a checkpoint of `table` takes on disk: the weights (fp32, by name) and both
// moments of every flat element; headers and trainer.json (a few KB) aside. The same for a
// sharded checkpoint, whose slices add up to the moments.
uint64_t checkpoint_bytes_estimate(const ParamTable& table);

// A warning for the start of a run, or empty when there is room: `free_bytes` on the file
// system of checkpoint.dir `root`, where `existing` of the run's checkpoints are already, against
// what its checkpoints of about `checkpoint_bytes` each need there: keep_last + 1 at the peak
// (the newest is written before the oldest is pruned). A full disk otherwise shows only when
// the first or a later checkpoint fails, hours into a run.
std::string checkpoint_space_warning(const std::string& root, uint64_t free_bytes, uint64_t checkpoint_bytes,
                                     int keep_last, int existing);
// The same for checkpoint.dir `root` as it is now: its file system's free space (in
// *free_bytes) and the step-* checkpoints already in it. False when the free space cannot be
// read (no warning then).
bool checkpoint_room(const std::string& root, uint64_t checkpoint_bytes, int keep_last, uint64_t* free_bytes,
                     std::string* warning);

// What verify_whole_checkpoint found in a checkpoint that is whole.
struct CheckpointInventory {
  int64_t step = 0;
  int world = 1;       // ranks of the run that wrote it
  int files = 0;       // files checked (trainer.json aside)
  uint64_t bytes = 0;  // their bytes
  int slices = 0;      // optimizer state slices; 0 when replicated (optimizer.state)
};

// Checks every file of the checkpoint in `dir` (each listed file's size and CRC32C; the
// optimizer state present, and for sharded state a manifest whose slices tile the buffer and
// are all listed): what `lansbert verify` runs before a checkpoint is copied, archived or its
// predecessors deleted, since the readers check only what they load.
Status verify_whole_checkpoint(const std::string& dir, CheckpointInventory* out);

// The names of root's step-NNNNNNNNN checkpoint directories, oldest first.
std::vector<std::string> checkpoint_step_dirs(const std::string& root);
// The step of one of those names.
int64_t checkpoint_step_of(const std::string& step_dir_name);

// Loads model.safetensors of the checkpoint in `dir` into params, checked against `meta`
// (read_checkpoint_meta of dir) on the one read that loads it: a file whose size or CRC32C
// differs is a corrupt error naming it.
Status load_checkpoint_params(const std::string& dir, const CheckpointMeta& meta, const ParamTable& table,
                              float* params);
// Loads model.safetensors of a Hugging Face directory (no trainer.json to check it against).
Status load_hf_params(const std::string& dir, const ParamTable& table, float* params);
// Ok when the checkpoint in `dir` (its meta already read) recorded the parameter layout of
// `table`, so that its optimizer state fits; otherwise an error naming DIR/trainer.json that
// says how to start from its weights instead.
Status check_param_layout(const std::string& dir, const CheckpointMeta& meta, const ParamTable& table);
// Loads the optimizer state into state, m and v (elements floats each), from either layout;
// each file is checked against `meta` (read_checkpoint_meta of the same dir) as it is read.
Status load_checkpoint_optimizer(const std::string& dir, const CheckpointMeta& meta, size_t elements,
                                 OptimizerState* state, float* m, float* v);
// Loads the moments of flat elements [begin, end) (of `elements` in all) into m and v
// (end-begin floats each) and the scalars into state, from optimizer.state or from the slice
// files of a sharded checkpoint written on any rank count: the manifest and the slices that
// overlap [begin, end) (for an empty range, the first non-empty slice, for the scalars), each
// checked against `meta` as it is read.
Status load_checkpoint_optimizer_range(const std::string& dir, const CheckpointMeta& meta, size_t elements,
                                       size_t begin, size_t end, OptimizerState* state, float* m, float* v);

}  // namespace lansbert
