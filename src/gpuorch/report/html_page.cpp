#include "gpuorch/report/html_page.hpp"

#include <fmt/format.h>

#include <ctime>

namespace gpuorch::report {

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string html_page_start(const std::string& title, const RunHeader& header) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return fmt::format(
      "<!doctype html>\n<html><head><meta charset='utf-8'><title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}"
      "pre,code{{background:#f6f6f6}}pre{{padding:1em;overflow-x:auto;white-space:pre-wrap}}"
      "table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;"
      "text-align:right}}td:first-child,th:first-child{{text-align:left}}</style></head><body>\n"
      "<h1>{0}</h1>\n<p>Command:</p>\n<pre>{1}</pre>\n"
      "<p>Seeds: {2}<br>gpuorch {3}{5}<br>Written {4}</p>\n",
      html_escape(title), html_escape(header.command), html_escape(header.seeds), GPUORCH_VERSION,
      date, header.build.empty() ? "" : " (" + html_escape(header.build) + ")");
}

std::string html_page_end() { return "</body></html>\n"; }

std::string html_table(const std::vector<std::string>& columns,
                       const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table>\n<tr>";
  for (const auto& c : columns) out += fmt::format("<th>{}</th>", html_escape(c));
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const auto& cell : row) out += fmt::format("<td>{}</td>", html_escape(cell));
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace gpuorch::report
