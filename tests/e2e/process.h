// Starting and stopping real Loom binaries from tests.
#ifndef LOOM_TESTS_E2E_PROCESS_H_
#define LOOM_TESTS_E2E_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace loom::testing {

// A child process with stdout+stderr redirected to `log_path`.
class Process {
 public:
  Process() = default;
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool Start(const std::vector<std::string>& argv, const std::string& log_path);
  // Sends `sig` and waits for the exit; returns the wait status.
  int Stop(int sig);
  // Waits up to `timeout_ms` for the process to exit by itself; -1 if it did not.
  int WaitExit(int timeout_ms);
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

// Output and exit code of a shell command.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command);

// Reads a whole file; empty when missing.
std::string ReadFile(const std::string& path);

// Polls for `path` to exist (up to timeout_ms).
bool WaitForFile(const std::string& path, int timeout_ms);

}  // namespace loom::testing

#endif  // LOOM_TESTS_E2E_PROCESS_H_
