#pragma once
// A Scene as a PNG file (QImage + QPainter), for `quintnet render -o F.png` and the Python
// module's Trace.render_png.  Needs a QGuiApplication (fonts); gui_application() makes
// one for processes that have none.
#include <string>

#include "visualizer/model/scene.h"

namespace quintnet::viz {

// Written under a temporary name and renamed: never half a PNG under the final name.
// Throws core::UserError when the file cannot be written.
void write_png(const Scene& scene, const std::string& path);

// Makes sure this process has a QGuiApplication — an existing one (a Qt notebook backend's)
// is used as it is; otherwise one is created on the offscreen platform when there is no
// display, and kept until the process ends.  Throws core::UserError when the process has
// a non-GUI QCoreApplication, which cannot draw text.
void ensure_gui_application(const char* program);

}  // namespace quintnet::viz
