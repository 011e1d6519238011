#include "visualizer/model/svg_writer.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace quintnet::viz {
namespace {

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string num(double v) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.2f", v);
  return s;
}

}  // namespace

std::string scene_to_svg(const Scene& scene) {
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(scene.width) << "\" height=\"" << num(scene.height)
    << "\" font-family=\"DejaVu Sans, sans-serif\">\n";
  o << "<defs><marker id=\"head\" markerWidth=\"8\" markerHeight=\"6\" refX=\"8\" refY=\"3\" orient=\"auto\">"
       "<path d=\"M0,0 L8,3 L0,6 z\" fill=\"context-stroke\"/></marker></defs>\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"" << scene.background.hex() << "\"/>\n";
  for (const Box& b : scene.boxes) {
    o << "<rect x=\"" << num(b.x) << "\" y=\"" << num(b.y) << "\" width=\"" << num(b.w) << "\" height=\"" << num(b.h)
      << "\" fill=\"" << b.fill.hex() << "\"/>\n";
    if (!b.label.empty() && b.w > 7.0 * static_cast<double>(b.label.size()) + 4)
      o << "<text x=\"" << num(b.x + b.w / 2) << "\" y=\"" << num(b.y + b.h / 2 + 4)
        << "\" font-size=\"10\" text-anchor=\"middle\" fill=\"#ffffff\">" << escaped(b.label) << "</text>\n";
  }
  for (const Line& l : scene.lines)
    o << "<line x1=\"" << num(l.x1) << "\" y1=\"" << num(l.y1) << "\" x2=\"" << num(l.x2) << "\" y2=\"" << num(l.y2)
      << "\" stroke=\"" << l.color.hex() << "\" stroke-width=\"" << num(l.width) << "\""
      << (l.arrow ? " marker-end=\"url(#head)\"" : "") << "/>\n";
  for (const Text& t : scene.texts) {
    const char* anchor = t.align == Text::Center ? "middle" : t.align == Text::Right ? "end" : "start";
    o << "<text x=\"" << num(t.x) << "\" y=\"" << num(t.y) << "\" font-size=\"" << num(t.size) << "\" text-anchor=\""
      << anchor << "\" fill=\"" << t.color.hex() << "\"" << (t.bold ? " font-weight=\"bold\"" : "") << ">"
      << escaped(t.text) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace quintnet::viz
