import { cudaDevicePossible } from '../../libs/engine/src/backend/backend-loader';

describe('cudaDevicePossible (whether -backend auto loads the CUDA addon at all)', () => {
  const dev = (...names: string[]) => () => ['null', 'tty', 'shm', ...names];

  it('needs a GPU device node on Linux', () => {
    expect(cudaDevicePossible({}, dev('nvidiactl', 'nvidia-uvm'), 'linux')).toBe(false);
    expect(cudaDevicePossible({}, dev('nvidiactl', 'nvidia0'), 'linux')).toBe(true);
    expect(cudaDevicePossible({}, dev('nvidia12'), 'linux')).toBe(true);
    expect(cudaDevicePossible({}, dev('dxg'), 'linux')).toBe(true); // WSL
    expect(cudaDevicePossible({}, dev('nvhost-ctrl-gpu'), 'linux')).toBe(true); // Jetson
    expect(cudaDevicePossible({}, dev(), 'linux')).toBe(false);
  });

  it('honours CUDA_VISIBLE_DEVICES hiding every device', () => {
    expect(cudaDevicePossible({ CUDA_VISIBLE_DEVICES: '' }, dev('nvidia0'), 'linux')).toBe(false);
    expect(cudaDevicePossible({ CUDA_VISIBLE_DEVICES: '-1' }, dev('nvidia0'), 'linux')).toBe(false);
    expect(cudaDevicePossible({ CUDA_VISIBLE_DEVICES: '0' }, dev('nvidia0'), 'linux')).toBe(true);
    expect(cudaDevicePossible({ CUDA_VISIBLE_DEVICES: '' }, dev(), 'win32')).toBe(false);
  });

  it('leaves the decision to the addon where it cannot look', () => {
    expect(cudaDevicePossible({}, dev(), 'win32')).toBe(true);
    expect(cudaDevicePossible({}, () => { throw new Error('EACCES'); }, 'linux')).toBe(true);
  });
});
