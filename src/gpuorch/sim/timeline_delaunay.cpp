#include "gpuorch/sim/timeline_delaunay.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

extern "C" {
#include <libqhull_r/qhull_ra.h>
}

namespace gpuorch::sim {
namespace {

// The inverse of the 3x3 matrix whose columns are the edges from the last vertex; false when the
// simplex is flat (Qhull may keep such slivers from its triangulation of coplanar facets).
bool invert(const std::array<double, 9>& m, std::array<double, 9>& inv) {
  const double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                     m[2] * (m[3] * m[7] - m[4] * m[6]);
  if (std::fabs(det) < 1e-14) return false;
  inv[0] = (m[4] * m[8] - m[5] * m[7]) / det;
  inv[1] = (m[2] * m[7] - m[1] * m[8]) / det;
  inv[2] = (m[1] * m[5] - m[2] * m[4]) / det;
  inv[3] = (m[5] * m[6] - m[3] * m[8]) / det;
  inv[4] = (m[0] * m[8] - m[2] * m[6]) / det;
  inv[5] = (m[2] * m[3] - m[0] * m[5]) / det;
  inv[6] = (m[3] * m[7] - m[4] * m[6]) / det;
  inv[7] = (m[1] * m[6] - m[0] * m[7]) / det;
  inv[8] = (m[0] * m[4] - m[1] * m[3]) / det;
  return true;
}

std::vector<std::array<int, 4>> triangulate(const std::vector<std::array<double, 3>>& points) {
  std::vector<coordT> coords;
  coords.reserve(points.size() * 3);
  for (const auto& p : points) coords.insert(coords.end(), p.begin(), p.end());
  // qhull writes its complaint (a page) to this stream; its first line goes into the exception,
  // so that a profile it cannot triangulate is one line of gpuorch's.
  char* complaint = nullptr;
  std::size_t complaint_size = 0;
  FILE* err = open_memstream(&complaint, &complaint_size);
  qhT qh_storage;
  qhT* qh = &qh_storage;
  qh_zero(qh, err ? err : stderr);
  char options[] = "qhull d Qbb Qc Qz Q12 Qt";
  const int rc = qh_new_qhull(qh, 3, static_cast<int>(points.size()), coords.data(), False,
                              options, nullptr, err ? err : stderr);
  std::vector<std::array<int, 4>> out;
  if (rc == 0) {
    facetT* facet = nullptr;
    FORALLfacets {
      if (facet->upperdelaunay) continue;
      std::array<int, 4> s{};
      int i = 0;
      vertexT* vertex = nullptr;
      vertexT** vertexp = nullptr;
      FOREACHvertex_(facet->vertices) {
        if (i < 4) s[static_cast<std::size_t>(i)] = qh_pointid(qh, vertex->point);
        ++i;
      }
      if (i == 4) out.push_back(s);
    }
  }
  qh_freeqhull(qh, !qh_ALL);
  int curlong = 0, totlong = 0;
  qh_memfreeshort(qh, &curlong, &totlong);
  std::string first_line;
  if (err) {
    std::fclose(err);
    first_line.assign(complaint, complaint_size);
    std::free(complaint);
    first_line = first_line.substr(0, first_line.find('\n'));
  }
  if (rc != 0) {
    throw std::runtime_error("qhull failed to triangulate the throughput profile" +
                             (first_line.empty() ? std::string() : " (" + first_line + ")"));
  }
  return out;
}

}  // namespace

Delaunay3::Delaunay3(std::vector<std::array<double, 3>> points,
                     std::vector<std::vector<double>> values)
    : points_(std::move(points)), values_(std::move(values)) {
  for (const auto& v : triangulate(points_)) {
    Simplex s;
    s.vertex = v;
    const auto& p3 = points_[static_cast<std::size_t>(v[3])];
    std::array<double, 9> m{};
    for (int c = 0; c < 3; ++c) {
      const auto& pc = points_[static_cast<std::size_t>(v[static_cast<std::size_t>(c)])];
      for (int r = 0; r < 3; ++r) {
        m[static_cast<std::size_t>(r * 3 + c)] =
            pc[static_cast<std::size_t>(r)] - p3[static_cast<std::size_t>(r)];
      }
    }
    if (!invert(m, s.inverse)) continue;
    for (std::size_t d = 0; d < 3; ++d) {
      s.lo[d] = s.hi[d] = p3[d];
      for (std::size_t c = 0; c < 3; ++c) {
        const double x = points_[static_cast<std::size_t>(v[c])][d];
        s.lo[d] = std::min(s.lo[d], x);
        s.hi[d] = std::max(s.hi[d], x);
      }
    }
    simplices_.push_back(s);
  }
}

std::optional<std::vector<double>> Delaunay3::interpolate(const std::array<double, 3>& q) const {
  // scipy accepts a point within this relative tolerance of a simplex (its find_simplex eps).
  constexpr double kEps = 1e-10;
  for (const auto& s : simplices_) {
    bool outside = false;
    for (std::size_t d = 0; d < 3 && !outside; ++d) {
      const double pad = kEps * std::max(1.0, std::fabs(s.hi[d]));
      outside = q[d] < s.lo[d] - pad || q[d] > s.hi[d] + pad;
    }
    if (outside) continue;
    const auto& p3 = points_[static_cast<std::size_t>(s.vertex[3])];
    const std::array<double, 3> dq{q[0] - p3[0], q[1] - p3[1], q[2] - p3[2]};
    std::array<double, 4> w{};
    for (std::size_t r = 0; r < 3; ++r) {
      w[r] = s.inverse[r * 3] * dq[0] + s.inverse[r * 3 + 1] * dq[1] + s.inverse[r * 3 + 2] * dq[2];
    }
    w[3] = 1.0 - w[0] - w[1] - w[2];
    if (*std::min_element(w.begin(), w.end()) < -kEps) continue;
    std::vector<double> out(values_.front().size(), 0.0);
    for (std::size_t c = 0; c < 4; ++c) {
      const auto& v = values_[static_cast<std::size_t>(s.vertex[c])];
      for (std::size_t k = 0; k < out.size(); ++k) out[k] += w[c] * v[k];
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace gpuorch::sim
