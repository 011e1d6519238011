#include "visualizer/model/palette.h"

#include <cstdio>

#include "core/error.h"

namespace quintnet::viz {

std::string Color::hex() const {
  char s[8];
  std::snprintf(s, sizeof(s), "#%02x%02x%02x", r, g, b);
  return s;
}

Palette Palette::light() {
  return {{255, 255, 255}, {30, 30, 30}, {215, 215, 215}, {246, 246, 246}, {250, 214, 214}, {90, 90, 90}, {0, 114, 178}, {200, 0, 90}};
}

Palette Palette::dark() {
  return {{24, 24, 28}, {230, 230, 230}, {70, 70, 76}, {34, 34, 40}, {96, 40, 44}, {190, 190, 190}, {86, 180, 233}, {255, 90, 160}};
}

Palette Palette::named(const std::string& name) {
  if (name == "light") return light();
  if (name == "dark") return dark();
  throw core::UserError("--palette '" + name + "': expected light or dark");
}

Color Palette::of_kind(const std::string& kind) const {
  // Okabe–Ito.
  if (kind == "forward") return {0, 114, 178};          // blue
  if (kind == "backward") return {230, 159, 0};         // orange
  if (kind == "backward-input") return {213, 94, 0};    // vermillion
  if (kind == "backward-weight") return {204, 121, 167};  // reddish purple
  if (kind == "send") return {0, 158, 115};             // bluish green
  if (kind == "recv") return {86, 180, 233};            // sky blue
  if (kind == "allreduce" || kind == "grad-sync") return {240, 228, 66};  // yellow
  if (kind == "optimizer") return {110, 110, 110};
  if (kind == "cp-ring") return {0, 90, 70};  // dark green: the context-parallel ring's key/value blocks
  return {160, 160, 160};
}

Color Palette::of_op(const std::string& kind, int mb) const {
  Color c = of_kind(kind);
  if (mb < 0) return c;
  const double t = 0.12 * (mb % 4);  // towards white
  auto mix = [&](std::uint8_t v) { return static_cast<std::uint8_t>(v + (255 - v) * t + 0.5); };
  return {mix(c.r), mix(c.g), mix(c.b)};
}

}  // namespace quintnet::viz
