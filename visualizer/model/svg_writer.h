#pragma once
// A Scene as an SVG document (no Qt needed): for docs and browsers.
#include <string>

#include "visualizer/model/scene.h"

namespace quintnet::viz {

std::string scene_to_svg(const Scene& scene);

}  // namespace quintnet::viz
