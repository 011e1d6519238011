#pragma once
// Timeline — what the viewer shows of a trace, independent of any drawing library:
// one row per (rank, sub-lane) ordered by mesh coordinates (pp stage, then tp, then
// dp), the events of each row sorted by time, the time window, and the pipeline
// bubbles: idle time of each rank's compute lane inside each step's window (first
// compute start to last compute end over all ranks; the optimizer step excluded),
// the definition core::measured_bubble_fraction uses, so the percentages agree.
#include <optional>
#include <string>
#include <vector>

#include "core/trace.h"

namespace quintnet::viz {

struct Row {
  int rank = 0;
  core::Lane lane = core::Lane::Compute;
  std::string label;          // "pp0 tp1 dp0" on the compute row, the lane name below it
  std::vector<size_t> events;  // indices into Timeline::trace().events, sorted by start
};

struct Interval {
  double begin_us = 0, end_us = 0;
};

class Timeline {
 public:
  // `step`: keep only that step's events (and flows between them); all steps when empty.
  // Throws core::TraceError for a trace without events (nothing to draw) or with times
  // no clock produces (not finite, beyond +-1e15 us, negative durations).
  explicit Timeline(core::Trace trace, std::optional<int> step = std::nullopt);

  const core::Trace& trace() const { return trace_; }
  const std::vector<Row>& rows() const { return rows_; }
  // Replaces the compute rows' labels, by rank (grouped lanes name their group).
  void label_ranks(const std::vector<std::string>& labels);
  double begin_us() const { return begin_us_; }
  double end_us() const { return end_us_; }
  std::vector<int> steps() const;
  const std::vector<std::string>& kinds() const { return kinds_; }  // op kinds present, first-seen order

  // Idle intervals of `rank`'s compute lane inside the step windows, in time order.
  const std::vector<Interval>& bubbles(int rank) const { return bubbles_.at(static_cast<size_t>(rank)); }
  // Idle share of `rank`'s compute lane over the step windows, and its mean over ranks.
  double bubble_fraction(int rank) const;
  double bubble_fraction() const;
  // Compute time of `rank` inside the step windows (optimizer excluded).
  double busy_us(int rank) const { return busy_us_.at(static_cast<size_t>(rank)); }
  // Sum of the step windows (for one step: its duration).
  double step_time_us() const { return window_total_us_; }

  // The events of `row` that overlap [t0, t1]: a range into rows()[row].events.
  std::pair<size_t, size_t> visible(size_t row, double t0, double t1) const;
  // The first event of `row` at index >= from that starts at or after t.
  size_t first_starting_at(size_t row, size_t from, double t) const;
  double longest_us(size_t row) const { return max_dur_per_row_[row]; }

 private:
  // The constructor's parts, in order.
  void keep_step(int step);          // drops the other steps' events; throws naming the steps there are
  void check_event_ranges() const;   // throws TraceError for an event out of range
  void build_rows(int num_ranks);    // rows_, kinds_, max_dur_per_row_
  void find_bubbles(int num_ranks);  // bubbles_, busy_us_, window_total_us_
  core::Trace trace_;
  std::vector<Row> rows_;
  std::vector<std::vector<Interval>> bubbles_;  // per rank
  std::vector<double> busy_us_;                 // per rank, inside the windows
  std::vector<std::string> kinds_;
  std::vector<double> max_dur_per_row_;         // for visible(): how far back an overlapping event can start
  double begin_us_ = 0, end_us_ = 0, window_total_us_ = 0;
};

}  // namespace quintnet::viz
