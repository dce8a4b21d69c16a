// Plain-text tables for loomctl's human output.
#ifndef LOOM_API_LOOMCTL_TABLE_H_
#define LOOM_API_LOOMCTL_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace loom::loomctl {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;
  size_t size() const { return rows_.size(); }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace loom::loomctl

#endif  // LOOM_API_LOOMCTL_TABLE_H_
