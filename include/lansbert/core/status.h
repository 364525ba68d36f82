// Status: the value returned by every operation that can fail for reasons outside the
// program (a config key, a file, a command-line flag). It carries a code and a message that
// names the file, field or offset; callers propagate it and the CLI turns it into a clear
// error and a non-zero exit. Program bugs use LB_CHECK (check.h) instead.
#pragma once

#include <string>
#include <utility>

namespace lansbert {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad flag, config value or shape
  kNotFound,         // missing file or key
  kCorrupt,          // file content fails validation (checksum, header, bounds)
  kIoError,          // read/write/rename failed
  kUnsupported,      // valid request this build cannot serve
  kInterrupted,      // stopped by SIGINT/SIGTERM/SIGUSR1 before it finished (nothing half-written kept)
  kInternal,
  kDiverged,         // training produced non-finite gradients past the loss scaler's limits (last:
                     // the ranks' max of codes in agree_across_ranks keeps the others' values)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status interrupted(std::string m) { return {StatusCode::kInterrupted, std::move(m)}; }
  static Status diverged(std::string m) { return {StatusCode::kDiverged, std::move(m)}; }
  // A status of a code known only at run time (one received from another rank).
  static Status with_code(StatusCode c, std::string m) { return {c, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The same code, the message after `prefix` (the config key or command that led here).
  Status with_prefix(const std::string& prefix) const { return is_ok() ? *this : Status(code_, prefix + message_); }
  // "corrupt: ckpt/model.safetensors: header length 9e18 exceeds file size 1024"
  std::string to_string() const;
  // Exit code the CLI uses for this status: 0 ok, 2 invalid input, 3 missing, 4 corrupt, 5 I/O,
  // 6 unsupported, 7 diverged (a job script should not simply retry it: the same run diverges
  // again), 70 internal, 130 interrupted (128 + SIGINT, what a shell reports for Ctrl-C).
  int exit_code() const;

 private:
  Status(StatusCode c, std::string m) : code_(c), message_(std::move(m)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Returns early from the enclosing function when `expr` yields a non-ok Status.
#define LB_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::lansbert::Status lb_status_ = (expr); \
    if (!lb_status_.is_ok()) return lb_status_; \
  } while (0)

}  // namespace lansbert
