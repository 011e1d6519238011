#pragma once
// Headless machines (CI, servers): Qt's offscreen platform when there is no display,
// and Qt's start-up chatter about it kept off stderr, where our one-line errors go.
#include <QtGlobal>
#include <cstdlib>
#include <cstring>

namespace quintnet::viz {

inline void use_offscreen_without_display() {
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) setenv("QT_QPA_PLATFORM", "offscreen", 0);
  qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& msg) {
    // Harmless without a session or a window system.
    if (type == QtWarningMsg && (msg.contains("XDG_RUNTIME_DIR") || msg.contains("propagateSizeHints"))) return;
    if (type != QtDebugMsg && type != QtInfoMsg) fprintf(stderr, "qt: %s\n", msg.toLocal8Bit().constData());
  });
}

// The argc/argv a Q(Gui)Application keeps pointers to: our own command line is parsed
// by core::cli::Args, so Qt gets only the program name.  Must outlive the application.
struct QtArguments {
  explicit QtArguments(const char* program) {
    std::strncpy(name, program, sizeof(name) - 1);
    argv[0] = name;
  }
  int argc = 1;
  char name[64] = {};
  char* argv[2] = {nullptr, nullptr};
};

}  // namespace quintnet::viz
