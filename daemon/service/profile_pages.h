// The daemon's pages for people, served beside /metrics on the same port
// and under the same rules (whoever may reach the port may read them;
// nothing they serve changes anything):
//   /                               the recent windows, newest first, and
//                                   the processes in each with their samples
//   /profile?window=N[&pid=P][&memory=1]
//                                   one window (of one process) as the page
//                                   `pystrobe report --html` writes
#ifndef PYSTROBE_DAEMON_SERVICE_PROFILE_PAGES_H_
#define PYSTROBE_DAEMON_SERVICE_PROFILE_PAGES_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/service/recent_windows.h"

namespace pystrobe {

struct PageResponse {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
};

// Read-only pages a server answers GET requests with.
class HttpPages {
 public:
  virtual ~HttpPages() = default;
  // `path` is the request's path ("/", "/profile"), `query` what follows
  // its '?'; nullopt when there is no such page.
  virtual std::optional<PageResponse> Get(std::string_view path, std::string_view query) const = 0;
};

class ProfilePages : public HttpPages {
 public:
  explicit ProfilePages(std::shared_ptr<const RecentWindows> windows)
      : windows_(std::move(windows)) {}

  std::optional<PageResponse> Get(std::string_view path, std::string_view query) const override;

 private:
  PageResponse Index() const;
  PageResponse Window(std::string_view query) const;

  std::shared_ptr<const RecentWindows> windows_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_PROFILE_PAGES_H_
