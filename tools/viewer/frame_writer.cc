// Copyright 2026 The contactkit developers.
#include "tools/viewer/frame_writer.h"

#include <png.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace contactkit::viewer {

namespace {

// the image into f through libpng; false if libpng failed. No C++ object lives across its setjmp
// (a longjmp would skip its destructor and could clobber it)
bool WritePngRows(FILE* f, const unsigned char* rgb, int width, int height) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 3);
  png_write_info(png, info);
  // PNG rows go top-down
  for (int r = height - 1; r >= 0; r--) {
    png_write_row(png, const_cast<png_bytep>(rgb + static_cast<size_t>(r) * width * 3));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

bool WritePng(const std::string& path, const unsigned char* rgb, int width, int height,
              std::string* error) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  if (!WritePngRows(f, rgb, width, height)) {
    std::fclose(f);
    *error = "libpng failed to write " + path;
    return false;
  }
  if (std::fclose(f) != 0) {
    *error = "cannot finish " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool HaveFfmpeg() { return std::system("command -v ffmpeg >/dev/null 2>&1") == 0; }

bool FrameWriter::Open(const std::string& dir, Format format, int width, int height, int fps,
                       std::string* error) {
  Close();
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    *error = "cannot create " + dir + ": " + std::strerror(errno);
    return false;
  }
  dir_ = dir;
  format_ = format;
  width_ = width;
  height_ = height;
  frames_ = 0;
  if (format == kVideo) {
    const std::string cmd = "ffmpeg -loglevel error -y -f rawvideo -pix_fmt rgb24 -s " +
                            std::to_string(width) + "x" + std::to_string(height) + " -r " +
                            std::to_string(fps) + " -i - -vf vflip -pix_fmt yuv420p '" + output() +
                            "'";
    pipe_ = popen(cmd.c_str(), "w");
    if (!pipe_) {
      *error = "cannot start ffmpeg";
      return false;
    }
  }
  return true;
}

std::string FrameWriter::output() const {
  return dir_ + (format_ == kVideo ? "/comparison.mp4" : "/frame_NNNNN.png");
}

bool FrameWriter::Write(const unsigned char* rgb, std::string* error) {
  if (format_ == kVideo) {
    const size_t n = static_cast<size_t>(width_) * height_ * 3;
    if (!pipe_ || std::fwrite(rgb, 1, n, pipe_) != n) {
      *error = "ffmpeg stopped accepting frames";
      return false;
    }
  } else {
    char name[32];
    std::snprintf(name, sizeof(name), "/frame_%05d.png", frames_);
    if (!WritePng(dir_ + name, rgb, width_, height_, error)) return false;
  }
  frames_++;
  return true;
}

bool FrameWriter::Close() {
  if (!pipe_) return true;
  const int rc = pclose(pipe_);
  pipe_ = nullptr;
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

}  // namespace contactkit::viewer
