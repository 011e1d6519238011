#pragma once
// Paints a Scene with QPainter: onto a QImage for `quintnet render`, onto the
// widget in `quintnet view`.
#include <QPainter>

#include "visualizer/model/scene.h"

namespace quintnet::viz {

void paint_scene(QPainter& painter, const Scene& scene);

}  // namespace quintnet::viz
