#include "api/loomctl/table.h"

#include <algorithm>

namespace loom::loomctl {

void Table::Print(std::ostream& out) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < width.size(); ++i) {
      std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < width.size()) line += std::string(width[i] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  print(header_);
  for (const auto& r : rows_) print(r);
}

}  // namespace loom::loomctl
