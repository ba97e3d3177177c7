#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace trident::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

// " | MFU 41.2%" when the step has one (train.mfu), else "".
static std::string mfu_text(const StepMetrics& m) {
  if (!m.mfu) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, " | MFU %.1f%%", 100.0 * *m.mfu);
  return buf;
}

Progress::Progress(int64_t total_steps, int64_t log_interval, std::FILE* out)
    : total_(total_steps), log_interval_(log_interval), out_(out), tty_(isatty(fileno(out)) != 0) {}

std::string Progress::bar(const StepMetrics& m) const {
  constexpr int kWidth = 24;
  const double frac = total_ > 0 ? static_cast<double>(m.step) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string b(kWidth + 2, '.');
  b.front() = '[';
  b.back() = ']';
  std::fill_n(b.begin() + 1, filled, '#');
  const double per_step = m.step > 0 ? m.elapsed_s / static_cast<double>(m.step) : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s step %lld/%lld | loss %.4f | lr %.2e | %.0f tok/s%s | ETA %s", b.c_str(),
                static_cast<long long>(m.step), static_cast<long long>(total_), m.loss, m.lr, m.tokens_per_s,
                mfu_text(m).c_str(), format_duration(per_step * static_cast<double>(total_ - m.step)).c_str());
  return buf;
}

void Progress::step(const StepMetrics& m) {
  if (tty_) {
    const auto now = std::chrono::steady_clock::now();
    if (m.step == total_ || now - last_draw_ > std::chrono::milliseconds(100)) {
      std::fprintf(out_, "\r\033[K%s", bar(m).c_str());
      std::fflush(out_);
      bar_visible_ = true;
      last_draw_ = now;
    }
  } else if (m.step % log_interval_ == 0 || m.step == total_ || m.step == 1) {
    std::fprintf(out_, "step %lld/%lld | loss %.4f | lr %.2e | grad_norm %.3f | %.0f tok/s%s | %.1fs\n",
                 static_cast<long long>(m.step), static_cast<long long>(total_), m.loss, m.lr, m.grad_norm,
                 m.tokens_per_s, mfu_text(m).c_str(), m.elapsed_s);
    std::fflush(out_);
  }
}

void Progress::message(const std::string& line) {
  if (bar_visible_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", line.c_str());
  bar_visible_ = false;
  last_draw_ = {};
  std::fflush(out_);
}

void Progress::finish() {
  if (bar_visible_) std::fprintf(out_, "\n");
  bar_visible_ = false;
  std::fflush(out_);
}

}  // namespace trident::train
