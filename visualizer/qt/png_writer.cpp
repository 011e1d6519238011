#include "visualizer/qt/png_writer.h"

#include <QGuiApplication>
#include <QImage>
#include <QPainter>

#include "core/atomic_file.h"
#include "core/error.h"
#include "visualizer/qt/offscreen.h"
#include "visualizer/qt/scene_painter.h"

namespace quintnet::viz {

void write_png(const Scene& scene, const std::string& path) {
  QImage image(static_cast<int>(scene.width + 0.5), static_cast<int>(scene.height + 0.5), QImage::Format_RGB32);
  {
    QPainter painter(&image);
    paint_scene(painter, scene);
  }
  const std::string tmp = path + ".tmp.png";
  if (!image.save(QString::fromStdString(tmp), "PNG"))
    throw core::UserError(path + ": cannot write the PNG (directory missing or not writable?)");
  core::move_into_place(tmp, path);
}

void ensure_gui_application(const char* program) {
  if (QCoreApplication* existing = QCoreApplication::instance()) {
    if (!qobject_cast<QGuiApplication*>(existing))
      throw core::UserError("this process has a Qt QCoreApplication without a GUI; a PNG needs a QGuiApplication "
                            "(write an SVG instead)");
    return;
  }
  use_offscreen_without_display();
  static QtArguments arguments(program);  // the application keeps pointers into them
  static QGuiApplication* application = new QGuiApplication(arguments.argc, arguments.argv);
  (void)application;
}

}  // namespace quintnet::viz
