/** What one audio request may hold. */

/**
 * Characters of `prompt` handed to whisper.cpp: its end (the decoder reads at most the last 224
 * tokens of a prompt). whisper.cpp's tokenizer matches words with std::regex, which recurses per
 * character: one unbroken run of ~30000 letters overflowed its thread's stack (the process died).
 */
export const MAX_PROMPT_CHARS = 2000;

/** The longest audio one request transcribes (an hour: 230 MB of samples, minutes of CPU). */
export const MAX_AUDIO_SECONDS = 3600;

/** Bytes an audio upload may take (the route's own body limit, above JSON's 32 MiB). */
export const AUDIO_BODY_LIMIT = 128 * 1024 * 1024;
