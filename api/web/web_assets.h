// The live fabric view's static files (api/web/), compiled into loomd by
// cmake/embed_web.cmake: no build step, no CDN, nothing read from disk.
#ifndef LOOM_API_WEB_WEB_ASSETS_H_
#define LOOM_API_WEB_WEB_ASSETS_H_

#include <string_view>

namespace loom::api::web {

struct Asset {
  std::string_view path;  // "/index.html"
  const char* content_type;
  std::string_view body;
};

// The asset served at `path`, or nullptr.
const Asset* FindAsset(std::string_view path);

}  // namespace loom::api::web

#endif  // LOOM_API_WEB_WEB_ASSETS_H_
