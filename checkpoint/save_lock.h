// One job per --save directory. Two jobs saving to one directory would replace each other's
// iter_N and tracker; the second one is refused, naming the job that holds the directory.
#pragma once

#include <string>

namespace megacpp::checkpoint {

class SaveDirectoryLock {
 public:
  // Creates `root` if needed and takes an exclusive flock on ROOT/.megacpp_save.lock, held until
  // destruction or the process's end (a killed job releases it too). The file names the holder
  // (host, pid, start time). Throws std::runtime_error with the holder's line when another
  // process holds it.
  explicit SaveDirectoryLock(const std::string& root);
  ~SaveDirectoryLock();
  SaveDirectoryLock(const SaveDirectoryLock&) = delete;
  SaveDirectoryLock& operator=(const SaveDirectoryLock&) = delete;

  static std::string lock_path(const std::string& root);

 private:
  int fd_ = -1;
};

}  // namespace megacpp::checkpoint
