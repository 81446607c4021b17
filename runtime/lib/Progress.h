//===- Progress.h - Which collective each rank has reached --------*- C++
//-*-===//
//
// Every rank of a group issues the group's collectives in the same compiled
// order, so the n-th collective a rank starts on a group is the same
// collective on every member: its sequence number names it across ranks.
// Each rank publishes, per group, the sequence number and description of the
// last collective it started to the rendezvous store, from a background
// thread (at most every 50 ms, so a step pays no store round trip per
// collective). When a collective fails or times out, the rank that waited
// reads its peers' entries and says which of them reached that collective
// and where the others stopped, instead of only that "a peer" failed.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_PROGRESS_H
#define LOOMRT_LIB_PROGRESS_H

#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loomrt {

class ProgressBoard {
public:
  /// `patience`: how long explain() waits for the store.
  ProgressBoard(c10::intrusive_ptr<c10d::Store> store, int64_t rank,
                std::chrono::milliseconds patience);
  ~ProgressBoard();
  ProgressBoard(const ProgressBoard &) = delete;
  ProgressBoard &operator=(const ProgressBoard &) = delete;

  /// This rank started the next collective of the group labelled `group`;
  /// `what` describes it for the peers' messages. Returns its sequence
  /// number (1 for the group's first).
  int64_t started(const std::string &group, const std::string &what);

  /// "collective #7 of its group: reached by rank 0; not reached by rank 1
  /// (its last on this group: #6, <what>)", from the peers' published
  /// entries; waits at most the board's patience for the store (it may be
  /// gone with the rank that hosted it). Never throws.
  std::string explain(const std::string &group,
                      const std::vector<int64_t> &ranks, int64_t sequence);

private:
  struct Entry {
    int64_t sequence = 0;
    std::string what;
    bool published = true;
  };
  void publishLoop();
  static std::string key(const std::string &group, int64_t rank);

  c10::intrusive_ptr<c10d::Store> store_;
  int64_t rank_;
  std::chrono::milliseconds patience_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Entry> entries_;
  bool stopping_ = false;
  std::thread publisher_;
};

} // namespace loomrt

#endif // LOOMRT_LIB_PROGRESS_H
