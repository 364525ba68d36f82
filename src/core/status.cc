// Status formatting and the mapping from status codes to process exit codes.
#include "lansbert/core/status.h"

namespace lansbert {

namespace {
const char* code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kCorrupt: return "corrupt";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kInterrupted: return "interrupted";
    case StatusCode::kDiverged: return "diverged";
  }
  return "unknown";
}
}  // namespace

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

int Status::exit_code() const {
  switch (code_) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return 2;
    case StatusCode::kNotFound: return 3;
    case StatusCode::kCorrupt: return 4;
    case StatusCode::kIoError: return 5;
    case StatusCode::kUnsupported: return 6;
    case StatusCode::kInternal: return 70;
    case StatusCode::kInterrupted: return 130;
    case StatusCode::kDiverged: return 7;
  }
  return 1;
}

}  // namespace lansbert
