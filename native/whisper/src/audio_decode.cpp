// miniaudio as whisper.cpp's examples build it (common-whisper.cpp holds its implementation,
// with these same options), so the samples match whisper-cli's for the same file.
#define MA_NO_DEVICE_IO
#define MA_NO_THREADING
#define MA_NO_ENCODING
#define MA_NO_GENERATION
#define MA_NO_RESOURCE_MANAGER
#define MA_NO_NODE_GRAPH
#include "miniaudio.h"

#include "audio_decode.h"
#include "whisper.h"

std::string decodeWav(const char * data, size_t size, uint64_t maxFrames, std::vector<float> & out) {
  ma_decoder_config cfg = ma_decoder_config_init(ma_format_f32, 1, WHISPER_SAMPLE_RATE);
  // WAV only: left to itself miniaudio tries FLAC, MP3 and Vorbis on what its WAV reader
  // refuses, and a WAV header over MP3 frames decoded to hours the header never declared.
  cfg.encodingFormat = ma_encoding_format_wav;
  ma_decoder dec;
  if (ma_decoder_init_memory(data, size, &cfg, &dec) != MA_SUCCESS) return "the WAV data could not be decoded (an unsupported layout, or damaged)";
  ma_uint64 frames = 0;
  std::string why;
  if (ma_decoder_get_length_in_pcm_frames(&dec, &frames) != MA_SUCCESS) {
    why = "the WAV data's length could not be read";
  } else if (frames > maxFrames) {
    why = "the audio decodes to " + std::to_string(frames / WHISPER_SAMPLE_RATE) + " s, more than one request transcribes";
  } else {
    out.resize(frames);
    ma_uint64 read = 0;
    if (ma_decoder_read_pcm_frames(&dec, out.data(), frames, &read) != MA_SUCCESS) why = "the WAV data could not be decoded";
  }
  ma_decoder_uninit(&dec);
  return why;
}
