#include "visualizer/qt/scene_painter.h"

#include <QFont>
#include <QFontMetricsF>
#include <QPolygonF>
#include <cmath>

namespace quintnet::viz {
namespace {

QColor qcolor(const Color& c) { return QColor(c.r, c.g, c.b); }

// White or black label, whichever reads better on the fill.
QColor label_color(const Color& fill) {
  const double luminance = 0.299 * fill.r + 0.587 * fill.g + 0.114 * fill.b;
  return luminance > 150 ? QColor(20, 20, 20) : QColor(255, 255, 255);
}

}  // namespace

void paint_scene(QPainter& p, const Scene& scene) {
  p.fillRect(QRectF(0, 0, scene.width, scene.height), qcolor(scene.background));
  QFont font("DejaVu Sans");
  font.setPixelSize(10);
  p.setFont(font);
  const QFontMetricsF metrics(font);
  // Boxes without antialiasing: op colours stay exact up to their edges.
  p.setRenderHint(QPainter::Antialiasing, false);
  p.setPen(Qt::NoPen);
  for (const Box& b : scene.boxes) p.fillRect(QRectF(b.x, b.y, b.w, b.h), qcolor(b.fill));
  for (const Box& b : scene.boxes) {
    if (b.label.empty()) continue;
    const QString text = QString::fromStdString(b.label);
    if (metrics.horizontalAdvance(text) + 4 > b.w) continue;
    p.setPen(label_color(b.fill));
    p.drawText(QRectF(b.x, b.y, b.w, b.h), Qt::AlignCenter, text);
  }
  p.setRenderHint(QPainter::Antialiasing, true);
  for (const Line& l : scene.lines) {
    p.setPen(QPen(qcolor(l.color), l.width));
    p.drawLine(QPointF(l.x1, l.y1), QPointF(l.x2, l.y2));
    if (l.arrow) {
      const double angle = std::atan2(l.y2 - l.y1, l.x2 - l.x1), size = 6;
      QPolygonF head;
      head << QPointF(l.x2, l.y2) << QPointF(l.x2 - size * std::cos(angle - 0.4), l.y2 - size * std::sin(angle - 0.4))
           << QPointF(l.x2 - size * std::cos(angle + 0.4), l.y2 - size * std::sin(angle + 0.4));
      p.setBrush(qcolor(l.color));
      p.drawPolygon(head);
      p.setBrush(Qt::NoBrush);
    }
  }
  for (const Text& t : scene.texts) {
    QFont f("DejaVu Sans");
    f.setPixelSize(static_cast<int>(std::lround(t.size)));
    f.setBold(t.bold);
    p.setFont(f);
    p.setPen(qcolor(t.color));
    const QString text = QString::fromStdString(t.text);
    const double w = QFontMetricsF(f).horizontalAdvance(text);
    const double x = t.align == Text::Center ? t.x - w / 2 : t.align == Text::Right ? t.x - w : t.x;
    p.drawText(QPointF(x, t.y), text);
  }
}

}  // namespace quintnet::viz
