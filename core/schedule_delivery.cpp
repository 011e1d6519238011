#include "core/schedule_delivery.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/error.h"

namespace quintnet::core {

namespace {

// clock[r][i][q]: how many of rank q's actions happened before or at rank r's action i.
using Clock = std::vector<int>;

std::vector<std::vector<Clock>> vector_clocks(const std::vector<std::vector<Step>>& steps) {
  const int ranks = static_cast<int>(steps.size());
  std::vector<std::vector<Clock>> clock(ranks);
  std::map<Message, Clock> sent;  // a SEND's clock, once its rank got there
  std::vector<std::size_t> next(ranks, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      for (; next[r] < steps[r].size(); ++next[r]) {
        const Step& st = steps[r][next[r]];
        Clock c = next[r] == 0 ? Clock(ranks, 0) : clock[r].back();
        if (is_recv(st.action.kind)) {
          const auto from = sent.find(*st.message);
          if (from == sent.end()) break;  // its SEND has not been reached yet
          for (int q = 0; q < ranks; ++q) c[q] = std::max(c[q], from->second[q]);
        }
        c[r] = static_cast<int>(next[r]) + 1;
        if (is_send(st.action.kind)) sent[*st.message] = c;
        clock[r].push_back(std::move(c));
        progress = true;
      }
    }
  }
  for (int r = 0; r < ranks; ++r)
    if (next[r] < steps[r].size())
      throw ConfigError("schedule: " + steps[r][next[r]].name + " on rank " + std::to_string(r) +
                        " waits for a message that is never sent");
  return clock;
}

}  // namespace

std::vector<std::vector<Message>> delivered_before(const Schedule& schedule, int rank) {
  std::vector<std::vector<Step>> steps;
  for (int r = 0; r < schedule.pp; ++r) steps.push_back(interpret(schedule, r));
  const std::vector<std::vector<Clock>> clock = vector_clocks(steps);
  std::map<Message, std::pair<int, int>> received_at;  // message -> (rank, index) of its RECV
  for (int r = 0; r < schedule.pp; ++r)
    for (const Step& st : steps[r])
      if (is_recv(st.action.kind)) received_at[*st.message] = {r, static_cast<int>(st.index)};

  const std::vector<Step>& mine = steps[rank];
  std::vector<std::vector<Message>> delivered(mine.size());
  for (const Step& st : mine) {
    if (!is_send(st.action.kind)) continue;
    const auto [peer, recv_index] = received_at.at(*st.message);
    // The first later action of this rank that the peer's RECV happened before: the
    // actions before it (their clocks: as each ended) include the RECV.
    for (std::size_t j = st.index + 1; j < mine.size(); ++j)
      if (clock[rank][j - 1][peer] > recv_index) {
        delivered[j].push_back(*st.message);
        break;
      }
  }
  return delivered;
}

}  // namespace quintnet::core
