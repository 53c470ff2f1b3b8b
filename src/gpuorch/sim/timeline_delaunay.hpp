#pragma once
// Piecewise-linear interpolation over scattered 3-D points: the Delaunay triangulation (Qhull,
// with the options scipy's LinearNDInterpolator passes it: "d Qbb Qc Qz Q12 Qt") and barycentric
// weights inside the simplex that holds the query. The measured throughput grids are full of
// co-spherical cells whose triangulation is not unique, so the same Qhull options and the same
// point order are what make the values equal to the Pollux artifact's (timeline-protocol.md §4.2).
#include <array>
#include <optional>
#include <vector>

namespace gpuorch::sim {

class Delaunay3 {
 public:
  // points: x, y, z per point, in the order the values follow; values: several per point.
  Delaunay3(std::vector<std::array<double, 3>> points, std::vector<std::vector<double>> values);

  // nullopt outside the convex hull.
  [[nodiscard]] std::optional<std::vector<double>> interpolate(
      const std::array<double, 3>& q) const;
  [[nodiscard]] std::size_t simplex_count() const { return simplices_.size(); }

 private:
  struct Simplex {
    std::array<int, 4> vertex{};
    std::array<double, 9> inverse{};  // maps q - vertex[3] to the first three barycentric weights
    std::array<double, 3> lo{}, hi{};  // bounding box, to skip most simplices cheaply
  };
  std::vector<std::array<double, 3>> points_;
  std::vector<std::vector<double>> values_;
  std::vector<Simplex> simplices_;
};

}  // namespace gpuorch::sim
