// MpiSession and the choice between the MPI and single-process communicators.
#include "lansbert/dist/mpi_session.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "lansbert/core/check.h"
#include "mpi_check.h"

namespace lansbert {

namespace {
void abort_job(int code) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

std::mutex g_session_mutex;
std::weak_ptr<MpiSession> g_session;
}  // namespace

MpiSession::MpiSession() {
  int init = 0;
  MPI_CHECK(MPI_Initialized(&init));
  int provided = 0;
  if (init) {
    MPI_CHECK(MPI_Query_thread(&provided));  // a host program initialised MPI; it finalises
  } else {
    MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    owned_ = true;
  }
  // From here on an error anywhere ends the whole job instead of leaving ranks in a collective.
  set_abort_hook(&abort_job);
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  set_fatal_rank(rank);
  LB_CHECK_MSG(provided >= MPI_THREAD_FUNNELED,
               "the MPI library offers thread level " + std::to_string(provided) +
                   ", lansbert needs MPI_THREAD_FUNNELED");
}

MpiSession::~MpiSession() {
  int fin = 0;
  MPI_Finalized(&fin);
  set_abort_hook(nullptr);
  if (fin || !owned_) return;
  MPI_Finalize();
}

std::shared_ptr<MpiSession> MpiSession::acquire() {
  std::lock_guard<std::mutex> lock(g_session_mutex);
  std::shared_ptr<MpiSession> s = g_session.lock();
  if (!s) {
    s = std::make_shared<MpiSession>();
    g_session = s;
  }
  return s;
}

bool launched_by_mpi_launcher() {
  if (env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMI_SIZE") || env_set("PMI_RANK") ||
      env_set("PMIX_RANK")) {
    return true;
  }
  return env_set("SLURM_STEP_ID") && env_set("SLURM_NTASKS");
}

int launcher_world_size(std::string* from) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || v[0] == '\0') continue;
    if (from) *from = std::string(name) + "=" + v;
    return std::atoi(v);
  }
  return 0;
}

Status comm_choice_from_env(CommChoice* out) {
  const char* v = std::getenv("LANSBERT_COMM");
  if (v == nullptr || v[0] == '\0') {
    *out = CommChoice::kAuto;
  } else if (std::strcmp(v, "single") == 0) {
    *out = CommChoice::kSingle;
  } else if (std::strcmp(v, "mpi") == 0) {
    *out = CommChoice::kMpi;
  } else {
    return Status::invalid_argument(std::string("LANSBERT_COMM: expected single or mpi (or unset: MPI under a "
                                                "launcher, one process otherwise), got '") + v + "'");
  }
  return Status::ok();
}

std::unique_ptr<Communicator> make_communicator(const CommOptions& options) {
  CommChoice choice = CommChoice::kAuto;
  const Status st = comm_choice_from_env(&choice);
  LB_CHECK_MSG(st.is_ok(), st.to_string());
  if (choice == CommChoice::kSingle) return make_single_process_communicator();
  if (choice == CommChoice::kMpi) return make_mpi_communicator(options);
  int init = 0;
  MPI_Initialized(&init);
  if (init || launched_by_mpi_launcher()) return make_mpi_communicator(options);
  return make_single_process_communicator();
}

Status parse_reduction_order(const std::string& s, ReductionOrder* out) {
  if (s == "fast" || s == "native") {
    *out = ReductionOrder::kNative;
  } else if (s == "fixed" || s == "fixed_order") {
    *out = ReductionOrder::kFixedOrder;
  } else {
    return Status::invalid_argument("expected fast or fixed (aliases: native, fixed_order), got '" + s + "'");
  }
  return Status::ok();
}

const char* reduction_order_name(ReductionOrder order) {
  return order == ReductionOrder::kFixedOrder ? "fixed" : "fast";
}

}  // namespace lansbert
