#pragma once
// A progress line for long loops on rank 0: samples/s and ETA.  On a terminal it
// redraws one line; in a log (not a terminal) it prints a line every 10%.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace quintnet::exec {

class Progress {
 public:
  Progress(std::string label, long total, bool enabled)
      : label_(std::move(label)), total_(total), enabled_(enabled), tty_(isatty(STDERR_FILENO)),
        start_(std::chrono::steady_clock::now()) {}

  // done: items finished so far; samples: samples processed so far; note: e.g. "loss 0.53".
  void update(long done, long samples, const std::string& note) {
    if (!enabled_ || total_ <= 0) return;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int decile = static_cast<int>(10 * done / total_);
    if (!tty_ && decile == last_decile_ && done != total_) return;
    last_decile_ = decile;
    const double rate = secs > 0 ? samples / secs : 0.0;
    const double eta = done > 0 ? secs * (total_ - done) / done : 0.0;
    const int width = 24, filled = static_cast<int>(width * done / total_);
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "%s%s [%s] %ld/%ld  %.0f samples/s  ETA %s  %s%s", tty_ ? "\r" : "", label_.c_str(),
                 bar.c_str(), done, total_, rate, clock_text(eta).c_str(), note.c_str(), tty_ ? "\033[K" : "\n");
    if (tty_ && done == total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

  // A line of its own (e.g. "checkpoint: ..."); on a terminal the bar redraws below it.
  void message(const std::string& text) {
    if (!enabled_) return;
    std::fprintf(stderr, "%s%s%s\n", tty_ ? "\r" : "", text.c_str(), tty_ ? "\033[K" : "");
    std::fflush(stderr);
  }

  static std::string clock_text(double secs) {
    const long s = static_cast<long>(secs + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    return buf;
  }

 private:
  std::string label_;
  long total_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point start_;
  int last_decile_ = -1;
};

}  // namespace quintnet::exec
