#include "monitor/notify.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <memory>
#include <random>

namespace trident::monitor {
namespace {

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using CurlPtr = std::unique_ptr<CURL, CurlDeleter>;
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

// libcurl calls this about once a second and more often while data moves, connect included;
// non-zero aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
int check_abort(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* abort = static_cast<const std::atomic<bool>*>(user);
  return abort != nullptr && abort->load() ? 1 : 0;
}

CurlPtr make_curl(const NotifySendOptions& o) {
  static const bool initialized = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!initialized) return nullptr;
  CurlPtr c(curl_easy_init());
  if (c) {
    curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout_s * 1000));
    curl_easy_setopt(c.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout_s * 1000));
    curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: threads and MPI
    if (o.abort != nullptr) {
      curl_easy_setopt(c.get(), CURLOPT_XFERINFOFUNCTION, check_abort);
      curl_easy_setopt(c.get(), CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(o.abort));
      curl_easy_setopt(c.get(), CURLOPT_NOPROGRESS, 0L);
    }
  }
  return c;
}

size_t discard(char*, size_t size, size_t n, void*) { return size * n; }

// Feeds an e-mail's text to libcurl.
struct Upload {
  std::string text;
  size_t pos = 0;
};
size_t read_upload(char* buf, size_t size, size_t n, void* user) {
  auto* u = static_cast<Upload*>(user);
  const size_t len = std::min(size * n, u->text.size() - u->pos);
  std::memcpy(buf, u->text.data() + u->pos, len);
  u->pos += len;
  return len;
}

std::string curl_error(CURLcode rc, const NotifySendOptions& o) {
  if (rc == CURLE_ABORTED_BY_CALLBACK) return "aborted (the run is ending)";
  std::string s = curl_easy_strerror(rc);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    char t[64];
    std::snprintf(t, sizeof t, " (no answer within %g s)", o.timeout_s);
    s += t;
  }
  return s;
}

}  // namespace

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string format_email(const std::string& from, const std::string& to, const std::string& subject,
                         const std::string& body, std::chrono::system_clock::time_point when, const std::string& host) {
  const std::time_t t = std::chrono::system_clock::to_time_t(when);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  // RFC 5322 section 3.3, in English whatever the locale.
  static const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char date[64];
  std::snprintf(date, sizeof date, "%s, %02d %s %04d %02d:%02d:%02d +0000", kDays[tm.tm_wday], tm.tm_mday,
                kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char id[160];
  std::snprintf(id, sizeof id, "<%lld.%llu.%d.%016llx@%s>", static_cast<long long>(t),
                static_cast<unsigned long long>(counter.fetch_add(1)), static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng()), host.c_str());
  std::string text = "From: <" + from + ">\r\nTo: <" + to + ">\r\nSubject: " + subject + "\r\nDate: " + date +
                     "\r\nMessage-ID: " + id + "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n";
  size_t start = 0;
  while (start <= body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line[0] == '.') text += ".";  // dot-stuffing
    text += line + "\r\n";
    start = end + 1;
  }
  return text;
}

Status post_webhook(const std::string& url, const std::string& json, const NotifySendOptions& options) {
  CurlPtr c = make_curl(options);
  if (!c) return Status::io_error("webhook " + url + ": libcurl did not start");
  SlistPtr headers(curl_slist_append(nullptr, "Content-Type: application/json"));
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c.get(), CURLOPT_POSTFIELDS, json.c_str());
  curl_easy_setopt(c.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(json.size()));
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, discard);
  const CURLcode rc = curl_easy_perform(c.get());
  if (rc != CURLE_OK) return Status::io_error("webhook " + url + ": " + curl_error(rc, options));
  long code = 0;
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &code);
  if (code >= 300) return Status::io_error("webhook " + url + ": HTTP " + std::to_string(code));
  return Status::ok();
}

Status send_email(const std::string& smtp_url, const std::string& from, const std::string& to,
                  const std::string& subject, const std::string& body, const NotifySendOptions& options) {
  CurlPtr c = make_curl(options);
  if (!c) return Status::io_error("e-mail through " + smtp_url + ": libcurl did not start");
  SlistPtr rcpt(curl_slist_append(nullptr, ("<" + to + ">").c_str()));
  Upload u;
  u.text = format_email(from, to, subject, body, std::chrono::system_clock::now(), host_name());
  const std::string mail_from = "<" + from + ">";
  curl_easy_setopt(c.get(), CURLOPT_URL, smtp_url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_MAIL_FROM, mail_from.c_str());
  curl_easy_setopt(c.get(), CURLOPT_MAIL_RCPT, rcpt.get());
  curl_easy_setopt(c.get(), CURLOPT_READFUNCTION, read_upload);
  curl_easy_setopt(c.get(), CURLOPT_READDATA, &u);
  curl_easy_setopt(c.get(), CURLOPT_UPLOAD, 1L);
  const CURLcode rc = curl_easy_perform(c.get());
  if (rc != CURLE_OK)
    return Status::io_error("e-mail to " + to + " through " + smtp_url + ": " + curl_error(rc, options));
  return Status::ok();
}

}  // namespace trident::monitor
