// A WAV file in memory as 16 kHz mono f32 samples, decoded as whisper-cli decodes audio.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// Empty on success; else why the bytes are not audio this server reads (the caller's 400).
std::string decodeWav(const char * data, size_t size, uint64_t maxFrames, std::vector<float> & out);
