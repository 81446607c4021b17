//===- Progress.cpp - Which collective each rank has reached --------------===//
//
// The board talks to the store through its own client connection (a clone),
// so that its publishing thread never queues behind the process groups' use
// of the store and the query after a failure can shorten its own timeout
// without touching theirs.
//
//===----------------------------------------------------------------------===//

#include "Progress.h"

#include <c10/util/Exception.h>

#include <exception>

namespace loomrt {

namespace {

std::vector<uint8_t> bytesOf(const std::string &s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string rankList(const std::vector<int64_t> &ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

/// The published "<sequence>\n<what>" of one rank.
struct Published {
  int64_t sequence = -1;
  std::string what;
};

Published parse(const std::vector<uint8_t> &raw) {
  std::string s(raw.begin(), raw.end());
  Published p;
  size_t nl = s.find('\n');
  try {
    p.sequence = std::stoll(s.substr(0, nl));
  } catch (const std::exception &) {
    p.sequence = -1;
  }
  if (nl != std::string::npos)
    p.what = s.substr(nl + 1);
  return p;
}

} // namespace

ProgressBoard::ProgressBoard(c10::intrusive_ptr<c10d::Store> store,
                             int64_t rank, std::chrono::milliseconds patience)
    : store_(store->clone()), rank_(rank), patience_(patience) {
  publisher_ = std::thread([this] { publishLoop(); });
}

ProgressBoard::~ProgressBoard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  publisher_.join();
}

std::string ProgressBoard::key(const std::string &group, int64_t rank) {
  return "loomrt/progress/" + group + "/" + std::to_string(rank);
}

int64_t ProgressBoard::started(const std::string &group,
                               const std::string &what) {
  int64_t sequence;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry &e = entries_[group];
    sequence = ++e.sequence;
    e.what = what;
    e.published = false;
  }
  changed_.notify_one();
  return sequence;
}

void ProgressBoard::publishLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] {
      if (stopping_)
        return true;
      for (auto &kv : entries_)
        if (!kv.second.published)
          return true;
      return false;
    });
    if (stopping_)
      return;
    std::vector<std::pair<std::string, std::string>> updates;
    for (auto &kv : entries_) {
      if (kv.second.published)
        continue;
      kv.second.published = true;
      updates.emplace_back(key(kv.first, rank_),
                           std::to_string(kv.second.sequence) + "\n" +
                               kv.second.what);
    }
    lock.unlock();
    try {
      for (auto &u : updates)
        store_->set(u.first, bytesOf(u.second));
    } catch (const std::exception &) {
      // The store went with its host rank: the failure that follows says
      // so; nothing more to publish.
      return;
    }
    // At most one round of updates per 50 ms, whatever the step's rate.
    lock.lock();
    changed_.wait_for(lock, std::chrono::milliseconds(50),
                      [&] { return stopping_; });
    if (stopping_)
      return;
  }
}

std::string ProgressBoard::explain(const std::string &group,
                                   const std::vector<int64_t> &ranks,
                                   int64_t sequence) {
  std::string head = "collective #" + std::to_string(sequence) +
                     " this rank started on " + group;
  try {
    // Give the peers' publishers (and this rank's) one round to land.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    store_->setTimeout(patience_);
    std::vector<int64_t> reached, silent;
    std::string behind;
    for (int64_t r : ranks) {
      std::string k = key(group, r);
      if (!store_->check({k})) {
        silent.push_back(r);
        continue;
      }
      Published p = parse(store_->get(k));
      if (p.sequence >= sequence) {
        reached.push_back(r);
        continue;
      }
      behind += "; rank " + std::to_string(r) +
                " has not reached it (the last it started on this group: #" +
                std::to_string(p.sequence) + ", " + p.what + ")";
    }
    std::string s = head;
    if (!reached.empty())
      s += ": reached by " + rankList(reached);
    s += behind;
    if (!silent.empty())
      s += "; " + rankList(silent) + " started no collective on this group";
    return s;
  } catch (const c10::Error &e) {
    return head +
           " (where the peers are is unknown: the store did not "
           "answer: " +
           e.what_without_backtrace() + ")";
  } catch (const std::exception &e) {
    return head +
           " (where the peers are is unknown: the store did not "
           "answer: " +
           e.what() + ")";
  }
}

} // namespace loomrt
