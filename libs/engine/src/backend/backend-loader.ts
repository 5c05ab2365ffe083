import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BackendName } from './inference-backend';
import { NativeAddon } from './native-addon';
import { NativeInferenceBackend } from './native-backend';

/** Where `npm run build:native` puts the compiled addons. */
export function addonPath(backend: BackendName, root = defaultRoot()): string {
  return join(root, 'build', 'native', backend, 'svc_engine.node');
}

/** The project root: the nearest folder above this file holding build/native or package.json. */
function defaultRoot(): string {
  if (process.env.SVC_ROOT) return process.env.SVC_ROOT;
  let dir = __dirname;
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'native'))) return dir;
    const up = resolve(dir, '..');
    if (up === dir) return process.cwd();
    dir = up;
  }
}

function load(backend: BackendName, root?: string): NativeAddon | undefined {
  const p = addonPath(backend, root);
  if (!existsSync(p)) return undefined;
  return require(p) as NativeAddon;
}

/** Device nodes through which a CUDA driver reaches a GPU (WSL: dxg; Jetson: nvhost-ctrl-gpu, nvgpu). */
const CUDA_DEVICE_NODE = /^(nvidia\d+|dxg|nvhost-ctrl-gpu|nvgpu)$/;

/**
 * Whether a CUDA GPU could be visible, decided without loading CUDA. A Node addon is
 * never unloaded, so loading the CUDA addon only to find no GPU (a CPU-only host with
 * both addons built, the CUDA image without --gpus) left cuBLAS and the CUDA runtime
 * mapped: ~135 MB more resident memory than the CPU addon alone, measured.
 * On Linux the driver sees GPUs only through /dev nodes, and CUDA_VISIBLE_DEVICES
 * set empty or to -1 hides them all; elsewhere the addon decides.
 */
export function cudaDevicePossible(env: NodeJS.ProcessEnv = process.env, devNodes: () => string[] = () => readdirSync('/dev'), platform: string = process.platform): boolean {
  const visible = env.CUDA_VISIBLE_DEVICES?.trim();
  if (visible === '' || visible?.startsWith('-1')) return false;
  if (platform !== 'linux') return true;
  try {
    return devNodes().some((n) => CUDA_DEVICE_NODE.test(n));
  } catch {
    return true;
  }
}

/**
 * Picks the backend at boot: CUDA when built and a GPU is visible, Metal on Apple
 * silicon, otherwise CPU. `preferred` ('auto' or a name) comes from -backend.
 */
export function loadBackend(preferred: 'auto' | BackendName = 'auto', root?: string): NativeInferenceBackend {
  const order: BackendName[] =
    preferred !== 'auto' ? [preferred] : process.platform === 'darwin' && process.arch === 'arm64' ? ['metal', 'cpu'] : ['cuda', 'cpu'];
  const tried: string[] = [];
  for (const name of order) {
    if (name === 'cuda' && preferred === 'auto' && !cudaDevicePossible()) {
      tried.push('cuda: no GPU visible (no /dev/nvidia* device, or CUDA_VISIBLE_DEVICES hides them)');
      continue;
    }
    let addon: NativeAddon | undefined;
    try {
      addon = load(name, root);
    } catch (err) {
      // A CUDA addon whose driver library is absent fails to load: fall back.
      tried.push(`${name}: ${(err as Error).message.split('\n')[0]}`);
      continue;
    }
    if (!addon) {
      tried.push(`${name}: not built`);
      continue;
    }
    if (name !== 'cpu' && preferred === 'auto' && addon.deviceCount() === 0) {
      tried.push(`${name}: no GPU visible`);
      continue;
    }
    return new NativeInferenceBackend(addon);
  }
  throw new Error(`no usable inference backend (${tried.join('; ')}); run: npm run build:native`);
}
