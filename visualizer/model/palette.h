#pragma once
// Colours of the viewer.  Op kinds use the Okabe–Ito palette, which stays
// distinguishable under the common colour-vision deficiencies; microbatches shade
// an op's colour (lighter for higher numbers, four steps) so neighbours differ.
#include <cstdint>
#include <string>

namespace quintnet::viz {

struct Color {
  std::uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Color& o) const { return r == o.r && g == o.g && b == o.b; }
  std::string hex() const;  // "#rrggbb"
};

struct Palette {
  Color background, text, grid, lane_band, bubble, flow, selection, critical;
  static Palette light();
  static Palette dark();
  static Palette named(const std::string& name);  // "light" | "dark"; throws core::UserError

  // An op kind's colour (forward, backward, backward-input, backward-weight, send,
  // recv, allreduce, grad-sync, optimizer; others grey).
  Color of_kind(const std::string& kind) const;
  // The kind's colour shaded for microbatch `mb` (mb < 0: unshaded).
  Color of_op(const std::string& kind, int mb) const;
};

}  // namespace quintnet::viz
