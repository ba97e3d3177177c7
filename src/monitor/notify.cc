#include "monitor/notify.h"

#include <curl/curl.h>

#include <cstring>
#include <memory>

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

CurlPtr make_curl(long timeout_s) {
  static const bool initialized = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!initialized) return nullptr;
  CurlPtr c(curl_easy_init());
  if (c) {
    curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT, timeout_s);
    curl_easy_setopt(c.get(), CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: threads and MPI
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

}  // namespace

Status post_webhook(const std::string& url, const std::string& json, long timeout_s) {
  CurlPtr c = make_curl(timeout_s);
  if (!c) return Status::io_error("webhook " + url + ": libcurl did not start");
  SlistPtr headers(curl_slist_append(nullptr, "Content-Type: application/json"));
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c.get(), CURLOPT_POSTFIELDS, json.c_str());
  curl_easy_setopt(c.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(json.size()));
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, discard);
  const CURLcode rc = curl_easy_perform(c.get());
  if (rc != CURLE_OK) return Status::io_error("webhook " + url + ": " + curl_easy_strerror(rc));
  long code = 0;
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &code);
  if (code >= 300) return Status::io_error("webhook " + url + ": HTTP " + std::to_string(code));
  return Status::ok();
}

Status send_email(const std::string& smtp_url, const std::string& from, const std::string& to,
                  const std::string& subject, const std::string& body, long timeout_s) {
  CurlPtr c = make_curl(timeout_s);
  if (!c) return Status::io_error("e-mail through " + smtp_url + ": libcurl did not start");
  SlistPtr rcpt(curl_slist_append(nullptr, ("<" + to + ">").c_str()));
  Upload u;
  u.text = "From: <" + from + ">\r\nTo: <" + to + ">\r\nSubject: " + subject +
           "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n";
  curl_easy_setopt(c.get(), CURLOPT_URL, smtp_url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_MAIL_FROM, ("<" + from + ">").c_str());
  curl_easy_setopt(c.get(), CURLOPT_MAIL_RCPT, rcpt.get());
  curl_easy_setopt(c.get(), CURLOPT_READFUNCTION, read_upload);
  curl_easy_setopt(c.get(), CURLOPT_READDATA, &u);
  curl_easy_setopt(c.get(), CURLOPT_UPLOAD, 1L);
  const CURLcode rc = curl_easy_perform(c.get());
  if (rc != CURLE_OK) return Status::io_error("e-mail to " + to + " through " + smtp_url + ": " + curl_easy_strerror(rc));
  return Status::ok();
}

}  // namespace trident::monitor
