// fp8scale-allreduce-ranks: an all-gather of byte strings through files, the
// exchange the ranks of one run share (IPC handles for
// AllreduceCommunicator::createIpc / registerBufferIpc, the NCCL unique id,
// output hashes, bench times, and a barrier before teardown).
//
// Round N of rank r is the file round-N-rank-r.bin in the run's directory:
// written under a temporary name and renamed, so that a file that exists is
// complete. A rank's N-th call of allGather() writes its file of round N,
// polls until all W files of round N exist, and reads them in rank order.
// Files are never removed during the run (a slower rank may still be reading
// them); the parent removes the directory at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fp8scale {
namespace ranks {

using Bytes = std::vector<std::uint8_t>;

/// One rank's end of the file all-gather. Not thread-safe; one per process.
class FileExchange {
 public:
  /// `timeout`: how long one round waits for the other ranks' files.
  FileExchange(std::string dir, int world, int rank, std::chrono::milliseconds timeout)
      : dir_(std::move(dir)), world_(world), rank_(rank), timeout_(timeout) {}

  /// Every rank's bytes of the next round (index = rank), or nullopt when a
  /// file could not be written or read, or the round timed out; error()
  /// then says which.
  std::optional<std::vector<Bytes>> allGather(const Bytes& mine) {
    const int round = round_++;
    const std::string path = fileName(round, rank_);
    const std::string temp = path + ".tmp";
    if (!writeFile(temp, mine) || std::rename(temp.c_str(), path.c_str()) != 0) {
      error_ = "exchange round " + std::to_string(round) + ": cannot write " + path;
      return std::nullopt;
    }
    std::vector<Bytes> all(static_cast<std::size_t>(world_));
    std::vector<bool> have(static_cast<std::size_t>(world_), false);
    int missing = world_;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    auto pause = std::chrono::microseconds(100);
    while (true) {
      for (int p = 0; p < world_; ++p) {
        if (have[p]) continue;
        if (readFile(fileName(round, p), all[p])) {
          have[p] = true;
          --missing;
        }
      }
      if (missing == 0) return all;
      if (std::chrono::steady_clock::now() > deadline) {
        error_ = "exchange round " + std::to_string(round) + ": no file from rank";
        for (int p = 0; p < world_; ++p)
          if (!have[p]) error_ += " " + std::to_string(p);
        char within[48];
        std::snprintf(within, sizeof(within), " within %.1f s", 1e-3 * static_cast<double>(timeout_.count()));
        error_ += within + std::string(" (in ") + dir_ + ")";
        return std::nullopt;
      }
      std::this_thread::sleep_for(pause);
      if (pause < std::chrono::milliseconds(5)) pause *= 2;
    }
  }

  /// A barrier: returns once every rank has reached the same round.
  bool barrier() { return allGather(Bytes{}).has_value(); }

  /// allGather() as AllreduceCommunicator::ExchangeFn: a failed round returns
  /// no records, which the communicator reports as a bad 'exchange'
  /// (error() has the cause).
  std::function<std::vector<Bytes>(const Bytes&)> function() {
    return [this](const Bytes& mine) {
      auto all = allGather(mine);
      return all ? std::move(*all) : std::vector<Bytes>{};
    };
  }

  const std::string& error() const { return error_; }
  int world() const { return world_; }
  int rank() const { return rank_; }

 private:
  std::string fileName(int round, int rank) const {
    return dir_ + "/round-" + std::to_string(round) + "-rank-" + std::to_string(rank) + ".bin";
  }

  static bool writeFile(const std::string& path, const Bytes& bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return false;
    const bool wrote = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    return std::fclose(f) == 0 && wrote;
  }

  /// False when the file does not exist (yet).
  static bool readFile(const std::string& path, Bytes& out) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    out.clear();
    std::uint8_t chunk[4096];
    std::size_t n = 0;
    while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) out.insert(out.end(), chunk, chunk + n);
    std::fclose(f);
    return true;
  }

  std::string dir_;
  int world_ = 0;
  int rank_ = 0;
  std::chrono::milliseconds timeout_;
  int round_ = 0;
  std::string error_;
};

/// Packs trivially copyable values into bytes for an exchange, and back.
template <class T>
Bytes packValues(const std::vector<T>& values) {
  Bytes b(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(b.data(), values.data(), b.size());
  return b;
}
template <class T>
std::vector<T> unpackValues(const Bytes& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace ranks
}  // namespace fp8scale
