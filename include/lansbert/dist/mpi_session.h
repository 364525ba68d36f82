// MpiSession: the process's MPI lifetime (MPI_Init_thread ... MPI_Finalize) as an RAII object,
// and make_communicator(), which picks MPI when the process was started by a launcher and the
// single-process communicator otherwise, so `lansbert train` runs without mpirun.
//
// Launchers: Open MPI's `mpirun`/`mpiexec` and Slurm's `srun --mpi=pmix` (or pmi2) both set up
// PMI for the ranks; nothing here depends on which one started the job. The session asks for
// MPI_THREAD_FUNNELED (only the main thread calls MPI; OpenMP threads never do) and fails if
// the library offers less. While a session is alive, fatal_error aborts the whole job with
// MPI_Abort(MPI_COMM_WORLD, code), after printing rank, host, file:line and the statement.
#pragma once

#include <memory>

#include "lansbert/dist/communicator.h"

namespace lansbert {

class MpiSession {
 public:
  // Initialises MPI (or adopts an MPI some host program initialised, which then also
  // finalises it), installs the abort hook and the rank shown in fatal messages.
  MpiSession();
  // Finalises MPI unless the process is already aborting.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // The process-wide session, created on first use and finalised when the last holder
  // (usually the communicator) lets go. MPI cannot be initialised twice in one process.
  static std::shared_ptr<MpiSession> acquire();

 private:
  bool owned_ = false;  // this object called MPI_Init_thread
};

// True iff the environment shows a process launcher: OMPI_COMM_WORLD_SIZE (Open MPI),
// PMI_SIZE / PMI_RANK (MPICH, Intel MPI, Slurm PMI2), PMIX_RANK (PMIx, srun --mpi=pmix),
// or SLURM_STEP_ID with SLURM_NTASKS (inside an srun job step).
bool launched_by_mpi_launcher();

// The MPI communicator over MPI_COMM_WORLD (a duplicate). Holds the session.
std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& options = {});

// How many processes the launcher started, as its environment says (OMPI_COMM_WORLD_SIZE of
// Open MPI, PMI_SIZE of MPICH, Intel MPI and Slurm's PMI2, SLURM_STEP_NUM_TASKS inside an srun
// step), with *from set to "NAME=VALUE"; 0 when none says (no launcher, or a batch script's
// own process). For the commands that are one process, to refuse being started as several.
int launcher_world_size(std::string* from = nullptr);

// What LANSBERT_COMM asks make_communicator for: kAuto when it is unset or empty (the
// launcher decides), kSingle for "single", kMpi for "mpi".
enum class CommChoice { kAuto, kSingle, kMpi };
// Reads LANSBERT_COMM. Any other value is an error naming the variable and the accepted
// values: a misspelt override must not fall back to the guess it was meant to override.
Status comm_choice_from_env(CommChoice* out);

// MPI when launched_by_mpi_launcher() or MPI is already initialised; otherwise the
// single-process communicator (no MPI_Init, no launcher needed). LANSBERT_COMM=single|mpi
// overrides the guess. REQUIRES: comm_choice_from_env() ok (the lansbert program checks it
// before any command runs); a bad value here is a fatal error.
std::unique_ptr<Communicator> make_communicator(const CommOptions& options = {});

}  // namespace lansbert
