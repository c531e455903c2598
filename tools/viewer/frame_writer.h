// Copyright 2026 The contactkit developers.
//
// Writes rendered frames (RGB, bottom row first as mjr_readPixels returns them) as numbered PNG
// files, or as one video through ffmpeg when it is installed.
#ifndef CONTACTKIT_TOOLS_VIEWER_FRAME_WRITER_H_
#define CONTACTKIT_TOOLS_VIEWER_FRAME_WRITER_H_

#include <cstdio>
#include <string>

namespace contactkit::viewer {

// write one RGB image (width x height, rows bottom-up) as an 8-bit PNG; false with a message
bool WritePng(const std::string& path, const unsigned char* rgb, int width, int height,
              std::string* error);

// true if an ffmpeg executable is on PATH
bool HaveFfmpeg();

class FrameWriter {
 public:
  enum Format { kPng, kVideo };

  FrameWriter() = default;
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;
  ~FrameWriter() { Close(); }

  // frames go to dir/frame_00000.png ... or dir/comparison.mp4; dir is created if needed
  bool Open(const std::string& dir, Format format, int width, int height, int fps,
            std::string* error);
  bool Write(const unsigned char* rgb, std::string* error);
  // finish the video; returns false if ffmpeg failed
  bool Close();

  int frames() const { return frames_; }
  std::string output() const;  // the PNG pattern or the video path

 private:
  std::string dir_;
  Format format_ = kPng;
  int width_ = 0, height_ = 0, frames_ = 0;
  FILE* pipe_ = nullptr;
};

}  // namespace contactkit::viewer

#endif  // CONTACTKIT_TOOLS_VIEWER_FRAME_WRITER_H_
